package kdclog

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/kdclog/attack"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// talkerTruth is the top talkers read from a KDC log with regular
// expressions (the oracle's header and request shapes), apart from the
// byte scanner and the Space-Saving summaries: "metric{by,request}" ->
// name -> requests.
type talkerTruth map[string]map[string]float64

var (
	tClientServer = regexp.MustCompile(`^(?:authtime \d+, )?(?:etypes \{[^}]*\},? )?(.*?) for ([^,]*)`)
	tDispatch     = regexp.MustCompile(`^DISPATCH: repeated \(retransmitted\?\) request from ([^ ,]+)`)
)

func (tt talkerTruth) add(list, name string) {
	if tt[list] == nil {
		tt[list] = map[string]float64{}
	}
	tt[list][attack.Sanitize([]byte(name))]++
}

func readTalkerTruth(t *testing.T, path string, probes []string) talkerTruth {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tt := talkerTruth{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		h := oHeader.FindStringSubmatch(sc.Text())
		if h == nil || h[1] != "krb5kdc" {
			continue
		}
		if d := tDispatch.FindStringSubmatch(h[3]); d != nil {
			tt.add("retransmits", d[1])
			continue
		}
		m := oRequest.FindStringSubmatch(h[3])
		if m == nil {
			continue
		}
		req, addr, status, rest := strings.ToLower(m[1]), m[4], m[5], m[6]
		cs := tClientServer.FindStringSubmatch(rest)
		if cs == nil {
			t.Fatalf("no client in %q", sc.Text())
		}
		if isProbe(cs[1], probes) {
			continue
		}
		tt.add("requests{address,"+req+"}", addr)
		tt.add("requests{client,"+req+"}", cs[1])
		if req == "tgs" {
			tt.add("requests{service,tgs}", cs[2])
		}
		step := status == "NEEDED_PREAUTH" || status == "PREAUTH_FAILED" && strings.HasSuffix(rest, ", More preauthentication data is required")
		if status == "ISSUE" || step {
			continue
		}
		tt.add("failures{address}", addr)
		tt.add("failures{client}", cs[1])
		if req == "tgs" {
			tt.add("failures{service}", cs[2])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return tt
}

// exportedTalkers is the same view of a scrape's top series.
func exportedTalkers(s *testutil.Scrape) talkerTruth {
	tt := talkerTruth{}
	for _, f := range []string{MetricTopRequests, MetricTopFailures, MetricTopRetransmits} {
		mf := s.MFs[f]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			list := "retransmits"
			switch f {
			case MetricTopRequests:
				list = "requests{" + l["by"] + "," + l["request"] + "}"
			case MetricTopFailures:
				list = "failures{" + l["by"] + "}"
			}
			if tt[list] == nil {
				tt[list] = map[string]float64{}
			}
			tt[list][l["name"]] = m.GetGauge().GetValue()
		}
	}
	return tt
}

// setTalkersClock makes the top talkers' clock stand at now.
func setTalkersClock(tm *testManager, now time.Time) {
	s := tm.m.counts.talkers
	s.mu.Lock()
	s.now = func() time.Time { return now }
	s.mu.Unlock()
}

// TestTopTalkersRealKDC drives a harness KDC with the project's client
// from four loopback addresses (logins and service tickets of several
// principals, in different numbers each), wrong passwords from a fifth,
// tickets for a service the realm lacks, MIT kinit and kvno loops, and
// datagrams sent twice (retransmits); then, its window closed, every
// top-talkers series must be what the KDC's own log says, counted with
// regular expressions, and the window's totals its request lines.
func TestTopTalkersRealKDC(t *testing.T) {
	needMIT(t)
	r, tm := followedRealm(t, realm.Options{Users: 12, Services: 6, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	t0 := time.Now().Truncate(time.Minute)
	setTalkersClock(tm, t0)
	src := config.LogSource{Path: r.KDCLog, Type: "kdc", StartAt: "beginning", PollInterval: 20 * time.Millisecond,
		ProbePrincipals: []string{realm.ReadyPrincipal}}
	// k above the names the load uses: every name is exported, and must
	// be exact (the window holds fewer than 4k names).
	if err := tm.m.ApplyConfig(&config.Config{Logs: []config.LogSource{src}, TopTalkers: config.TopTalkers{TopK: 30}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(user, from string, creds *krb5.Credentials) *krb5.Client {
		t.Helper()
		p, err := krb5.ParsePrincipal(user, r.Realm)
		if err != nil {
			t.Fatal(err)
		}
		if creds == nil {
			if creds, err = krb5.NewKeytabCredentials(r.UserKeytab, p); err != nil {
				t.Fatal(err)
			}
		}
		c, err := krb5.NewClient(krb5.Options{KDC: r.KDCAddr, Client: p, Credentials: creds, LocalAddr: netip.MustParseAddr(from)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	service := func(c *krb5.Client, name string) error {
		p, err := krb5.ParsePrincipal(name, r.Realm)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ServiceTicket(ctx, c.PrepareService(p))
		return err
	}
	// Address 127.0.0.(1+a) logs in 3a times as users a and a+4 in turn,
	// each login with a ticket for services 1..a.
	for a := 1; a <= 4; a++ {
		from := fmt.Sprintf("127.0.0.%d", 1+a)
		cs := []*krb5.Client{client(r.User(a), from, nil), client(r.User(a+4), from, nil)}
		for n := range 3 * a {
			c := cs[n%2]
			if _, err := c.Login(ctx); err != nil {
				t.Fatal(err)
			}
			for s := 1; s <= a; s++ {
				if err := service(c, r.Service(s)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// A stale password: user 9 failing from 127.0.0.6.
	p9, _ := krb5.ParsePrincipal(r.User(9), r.Realm)
	stale := client(r.User(9), "127.0.0.6", krb5.NewPasswordCredentials("stale", p9))
	for range 5 {
		if _, err := stale.Login(ctx); err == nil {
			t.Fatal("a wrong password succeeded")
		}
	}
	// A job asking for a service the realm lacks, from 127.0.0.3.
	job := client(r.User(10), "127.0.0.3", nil)
	if _, err := job.Login(ctx); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := service(job, "HTTP/gone.example"); err == nil {
			t.Fatal("a ticket for a service the realm lacks")
		}
	}
	// MIT's clients from the default address, and retransmits.
	mit := clients{t: t, r: r}
	for range 3 {
		mit.ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(11))
		mit.ok("", "kvno", "--no-store", r.Service(5), r.Service(6))
	}
	for range 3 {
		sendTwice(t, r, r.User(12))
	}

	waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
	truth := readTalkerTruth(t, r.KDCLog, src.ProbePrincipals)
	// The window still open: nothing yet.
	if got := testutil.Gather(t, tm.reg); got.Count(MetricTopRequests) != 0 {
		t.Errorf("%d top series before the first window ended", got.Count(MetricTopRequests))
	}
	setTalkersClock(tm, t0.Add(time.Minute+time.Second))
	got := testutil.Gather(t, tm.reg)
	exported := exportedTalkers(got)
	lists := map[string]bool{}
	for l := range truth {
		lists[l] = true
	}
	for l := range exported {
		lists[l] = true
	}
	for l := range lists {
		if fmt.Sprint(sortedTalkers(truth[l])) != fmt.Sprint(sortedTalkers(exported[l])) {
			t.Errorf("%s:\n exported %v\n log says %v", l, sortedTalkers(exported[l]), sortedTalkers(truth[l]))
		}
	}
	// The load's shape is in the truth: the counts are not all alike.
	if n := len(truth["requests{address,tgs}"]); n != 5 {
		t.Errorf("TGS requests from %d addresses in the log, want 5: %v", n, truth["requests{address,tgs}"])
	}
	if v := truth["failures{client}"][r.User(9)]; v != 5 {
		t.Errorf("the log has %v failures of %s, want 5", v, r.User(9))
	}
	if v := truth["failures{service}"]["HTTP/gone.example@"+r.Realm]; v != 4 {
		t.Errorf("the log has %v failures of the missing service, want 4", v)
	}
	if v := truth["retransmits"]["127.0.0.1"]; v != 3 {
		t.Errorf("the log has %v retransmits, want 3", v)
	}
	// The window's totals are its request lines.
	for _, req := range []string{"as", "tgs"} {
		var sum float64
		for _, v := range truth["requests{address,"+req+"}"] {
			sum += v
		}
		if v := got.Value(MetricTopWindowRequests, "request", req); v != sum {
			t.Errorf("window requests %s = %v, the log has %v", req, v, sum)
		}
	}
	// Two windows on with nothing read: an empty last window.
	setTalkersClock(tm, t0.Add(3*time.Minute+time.Second))
	if got := testutil.Gather(t, tm.reg); got.Count(MetricTopRequests) != 0 || got.Value(MetricTopWindowRequests, "request", "as") != 0 {
		t.Errorf("an idle window has %d top series, %v AS requests", got.Count(MetricTopRequests), got.Value(MetricTopWindowRequests, "request", "as"))
	}
}

func sortedTalkers(m map[string]float64) []string {
	var out []string
	for n, v := range m {
		out = append(out, fmt.Sprintf("%s=%v", n, v))
	}
	sort.Strings(out)
	return out
}
