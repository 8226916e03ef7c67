package kdclog

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/internal/ulog"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// syslogRealm is a harness realm that logs the Debian way: no [logging]
// section, its daemons' syslog messages in a real journal.
func syslogRealm(t *testing.T, opts realm.Options) *realm.Realm {
	t.Helper()
	needMIT(t)
	if _, err := os.Stat(realm.JournalRemote); err != nil {
		if testutil.InCI() {
			t.Fatalf("%s missing in CI: %v", realm.JournalRemote, err)
		}
		t.Skip(err)
	}
	opts.Dir, opts.LogToSyslog = filepath.Join(t.TempDir(), "r"), true
	r, err := realm.Up(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	return r
}

// tracedClients count, from the clients' own trace (KRB5_TRACE), the
// requests they sent to the KDC.
type tracedClients struct {
	clients
	sent int
}

// sentRequest is a request put on the wire (a UDP retransmit of it is
// "Sending retry UDP request", which the KDC logs as a retransmit).
var sentRequest = regexp.MustCompile(`(?m)Sending (initial UDP|TCP) request to `)

func (c *tracedClients) do(wantOK bool, stdin, name string, args ...string) {
	c.t.Helper()
	out, err := c.run("", stdin, "env", append([]string{"KRB5_TRACE=/dev/stderr", name}, args...)...)
	if (err == nil) != wantOK {
		c.t.Fatalf("%s %v: err %v, want success %v: %s", name, args, err, wantOK, out)
	}
	c.sent += len(sentRequest.FindAllString(out, -1))
}

// requestsTotal is krb5_kdc_requests_total by "request status".
func requestsTotal(t *testing.T, tm *testManager) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, v := range gather(t, tm.reg) {
		if strings.HasPrefix(k, "krb5_kdc_requests_total{") && v != 0 {
			out[k] = v
		}
	}
	return out
}

// countIssued counts the ISSUE lines of one request type in KDC log text.
func countIssued(text []byte, req string) int {
	n := 0
	for _, l := range strings.Split(string(text), "\n") {
		if strings.Contains(l, req) && strings.Contains(l, ": ISSUE:") {
			n++
		}
	}
	return n
}

func sum(m map[string]float64) (n float64) {
	for _, v := range m {
		n += v
	}
	return n
}

// A KDC that logs only to the journal (realm.Options.LogToSyslog: no
// [logging], syslog, a real journal written as journald would): the
// journal source counts every request the clients made, status by status,
// exactly once across an exporter restart with logins while it was
// stopped.
func TestJournalSourceRealKDC(t *testing.T) {
	r := syslogRealm(t, realm.Options{Users: 6, Services: 3, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	c := &tracedClients{clients: clients{t: t, r: r}}
	src := config.LogSource{Type: "kdc", StartAt: "beginning", ProbePrincipals: []string{realm.ReadyPrincipal},
		Journal: &config.JournalSource{Directory: r.JournalDir, User: strconv.Itoa(os.Getuid())}}
	pos := filepath.Join(t.TempDir(), "positions.json")
	type status = string
	want := map[status]float64{}
	// What each client run asks of the KDC (SPAKE: a login is three AS
	// requests, a wrong password too before its PREAUTH_FAILED).
	login := func(i int) {
		c.do(true, "", "kinit", "-k", "-t", r.UserKeytab, r.User(i))
		want["as NEEDED_PREAUTH"]++
		want["as MORE_PREAUTH_DATA_REQUIRED"]++
		want["as ISSUE"]++
	}
	wrongPassword := func(i int) {
		c.do(false, "wrong password\n", "kinit", r.User(i))
		want["as NEEDED_PREAUTH"]++
		want["as MORE_PREAUTH_DATA_REQUIRED"]++
		want["as PREAUTH_FAILED"]++
	}
	unknown := func() {
		c.do(false, "x\n", "kinit", "nosuchuser@"+r.Realm)
		want["as CLIENT_NOT_FOUND"]++
	}
	tickets := func(n int) {
		var svcs []string
		for i := 1; i <= n; i++ {
			svcs = append(svcs, r.Service(1+(i-1)%3))
		}
		c.do(true, "", "kvno", append([]string{"--no-store"}, svcs...)...)
		want["tgs ISSUE"] += float64(n)
	}
	wantSeries := func() map[string]float64 {
		out := map[string]float64{}
		for k, v := range want {
			req, st, _ := strings.Cut(k, " ")
			out[key("krb5_kdc_requests_total", "request", req, "status", st)] = v
		}
		return out
	}
	waitCounts := func(tm *testManager, wantNow map[string]float64, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !maps.Equal(requestsTotal(t, tm), wantNow) {
			if time.Now().After(deadline) {
				// Which side lost it: the journal's own entries (all
				// boots, no follow) against what the source counted.
				out, err := exec.Command("journalctl", "--directory="+r.JournalDir, "--merge", "--output=cat", "--no-pager").Output()
				t.Fatalf("%s: counted %v, the clients made %v; the journal itself holds %d TGS ISSUE and %d AS ISSUE lines (journalctl: %v)",
					what, requestsTotal(t, tm), wantNow, countIssued(out, "TGS_REQ"), countIssued(out, "AS_REQ"), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Before the exporter starts: read from the journal's beginning.
	login(1)
	tickets(2)
	m1 := startManager(t, pos, src)
	// While it runs.
	wrongPassword(2)
	login(3)
	unknown()
	tickets(3)
	first := wantSeries()
	waitCounts(m1, first, "first run")
	m1.stop()
	// While it is stopped, and after it started again.
	clear(want)
	login(4)
	tickets(1)
	m2 := startManager(t, pos, src)
	login(5)
	wrongPassword(6)
	unknown()
	second := wantSeries()
	waitCounts(m2, second, "second run")

	// The clients' own count of the requests they sent.
	if total := sum(requestsTotal(t, m1)) + sum(requestsTotal(t, m2)); total != float64(c.sent) || c.sent < 20 {
		t.Errorf("counted %v requests, the clients' traces show %d sent", total, c.sent)
	}
	srcKey := src.Key()
	for _, reason := range []string{"no_header", "other_program", "unknown_message", "malformed", "too_long"} {
		if v := value(t, m2.reg, "krb5_kdc_log_lines_unparsed_total", "path", srcKey, "reason", reason); v != 0 {
			t.Errorf("%v journal entries not understood (%s)", v, reason)
		}
	}
	if v := value(t, m2.reg, "krb5_kdc_log_journal_cursor_lost_total", "path", srcKey); v != 0 {
		t.Errorf("cursor lost %v times", v)
	}
	// The harness's readiness request is counted apart, once.
	if v := gather(t, m1.reg)[key("krb5_kdc_log_probe_requests_total", "request", "as", "status", "CLIENT_NOT_FOUND")]; v != 1 {
		t.Errorf("readiness request counted %v times in the first run", v)
	}
}

// kpropd through the journal: a replica of a syslog realm (its kpropd
// logs through syslog too) followed by a kpropd journal source counts
// the initial full resync once and every update the replica's own update
// log shows applied, exactly once across an exporter restart with updates
// while it was stopped.
func TestKpropdJournalE2E(t *testing.T) {
	realmtest.RequireKpropd(t)
	ctx := context.Background()
	p := syslogRealm(t, realm.Options{Users: 2, Services: 1, Fillers: -1})
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	r, err := realm.UpReplica(wctx, p, realm.Options{Dir: filepath.Join(t.TempDir(), "replica")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	if !r.Opts.LogToSyslog || r.JournalDir == "" {
		t.Fatalf("the replica of a syslog realm does not log to syslog: %+v", r.Opts)
	}
	serial := func() uint32 {
		t.Helper()
		if err := r.WaitSerial(wctx, p.IpropLog); err != nil {
			t.Fatal(err)
		}
		h, err := ulog.ReadFile(r.IpropLog)
		if err != nil {
			t.Fatal(err)
		}
		return h.LastSerial
	}
	s0 := serial()
	add := func(from, n int) {
		t.Helper()
		var cmds []string
		for i := from; i < from+n; i++ {
			cmds = append(cmds, fmt.Sprintf("addprinc -randkey -clearpolicy jkp%03d", i))
		}
		if out, err := p.KadminLocal(ctx, cmds...); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	src := config.LogSource{Type: "kpropd", StartAt: "beginning", Journal: &config.JournalSource{Directory: r.JournalDir, User: strconv.Itoa(os.Getuid())}}
	pos := filepath.Join(t.TempDir(), "positions.json")
	m1 := startManager(t, pos, src)
	add(0, 10)
	waitValue(t, m1.reg, 10, "krb5_kpropd_updates_total")
	for _, ev := range []string{"full_resync_needed", "full_resync_granted", "full_propagation_connection"} {
		if v := value(t, m1.reg, "krb5_kpropd_events_total", "event", ev); v != 1 {
			t.Errorf("%s counted %v times, want the one initial full resync", ev, v)
		}
	}
	m1.stop()
	add(10, 7) // while stopped
	serial()
	m2 := startManager(t, pos, src)
	add(17, 5)
	waitValue(t, m2.reg, 12, "krb5_kpropd_updates_total")
	s1 := serial()
	if got := value(t, m1.reg, "krb5_kpropd_updates_total") + value(t, m2.reg, "krb5_kpropd_updates_total"); got != float64(s1-s0) || got != 22 {
		t.Errorf("counted %v updates; the replica's update log went from serial %d to %d", got, s0, s1)
	}
	if v := value(t, m2.reg, "krb5_kpropd_events_total", "event", "full_resync_needed"); v != 0 {
		t.Errorf("the initial full resync counted again after the restart: %v", v)
	}
	for _, reason := range []string{"unknown_message", "malformed", "other_program"} {
		if v := value(t, m2.reg, "krb5_kdc_log_lines_unparsed_total", "path", src.Key(), "reason", reason); v != 0 {
			t.Errorf("%v kpropd journal entries not understood (%s)", v, reason)
		}
	}
}
