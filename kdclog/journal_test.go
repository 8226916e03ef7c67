package kdclog

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/journal"
)

const journalRemote = "/lib/systemd/systemd-journal-remote"

// journalEntry is a fixture line as the journal keeps it: identifier, pid
// and message apart (cut out by a regular expression, not the parser).
type journalEntry struct {
	ident, msg string
	pid        int
	// comm and uid are journald's record of the sender (_COMM, _UID):
	// comm "" is ident.
	comm string
	uid  int
}

func fixtureEntries(t *testing.T, files ...string) (entries []journalEntry, lines []string) {
	t.Helper()
	re := regexp.MustCompile(`^[A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d \S+ ([a-z0-9_.]+)\[(\d+)\](?:\(\w+\))?: (.*)$`)
	for _, f := range files {
		b := testutil.MustRead(t, f)
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			m := re.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			var pid int
			fmt.Sscan(m[2], &pid)
			entries = append(entries, journalEntry{ident: m[1], pid: pid, msg: m[3]})
			lines = append(lines, sc.Text())
		}
	}
	return entries, lines
}

// writeJournal appends entries to a journal file with systemd-journal-remote.
func writeJournal(t *testing.T, file string, ts *int64, entries []journalEntry) {
	t.Helper()
	var b bytes.Buffer
	for _, e := range entries {
		*ts++
		fmt.Fprintf(&b, "__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=0123456789abcdef0123456789abcdef\nSYSLOG_IDENTIFIER=%s\n_COMM=%s\n_UID=%d\n_PID=%d\nMESSAGE=%s\n\n",
			*ts, *ts-1764556800000000, e.ident, cmp.Or(e.comm, e.ident), e.uid, e.pid, e.msg)
	}
	cmd := exec.Command(journalRemote, "-o", file, "-")
	cmd.Stdin = &b
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-journal-remote: %v\n%s", err, out)
	}
}

// sameCounts reports every series whose count the journal source (got)
// and the file source (want) of the same lines disagree on.
func sameCounts(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: journal %v, file %v", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: journal %v, file nothing", k, v)
		}
	}
}

// requestCounts are the counters of what the daemons did (no per-source
// self metrics), as name{labels} -> value.
func requestCounts(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for name, mf := range testutil.Gather(t, g).MFs {
		for _, m := range mf.GetMetric() {
			var l []string
			skip := false
			for _, p := range m.GetLabel() {
				if p.GetName() == "path" {
					skip = true
				}
				l = append(l, p.GetName()+"="+p.GetValue())
			}
			// Self metrics, recoveries of a preauth failure and the
			// realm's distinct principals of a window: that correlation
			// lives in memory and a restart forgets it (between a failure
			// and its recovery, or within a window: a name seen before it
			// counts again after), for files and the journal alike.
			if strings.Contains(name, "position_file") || name == "krb5_kdc_preauth_failures_recovered_total" ||
				name == "krb5_kdc_attack_distinct_principals_total" {
				skip = true
			}
			if skip || m.GetCounter() == nil || m.GetCounter().GetValue() == 0 {
				continue
			}
			slices.Sort(l)
			out[name+"{"+strings.Join(l, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}

// The journal source counts exactly what the file source counts for the
// same lines, across a restart between two halves written to the journal:
// real journal files (systemd-journal-remote), a real journalctl.
func TestJournalSourceCountsLikeFiles(t *testing.T) {
	for _, p := range []string{journalRemote, "journalctl"} {
		if _, err := exec.LookPath(p); err != nil {
			if testutil.InCI() {
				t.Fatalf("%s missing in CI: %v", p, err)
			}
			t.Skip(err)
		}
	}
	fixtures := []string{"testdata/mit-1.20-kdc.log", "testdata/mit-1.20-kadmind.log", "testdata/mit-1.20-workers-kdc.log"}
	entries, lines := fixtureEntries(t, fixtures...)
	if len(entries) < 100 {
		t.Fatalf("only %d fixture entries", len(entries))
	}

	// The file source's counts of the same lines: the reference.
	dir := t.TempDir()
	logFile := filepath.Join(dir, "all.log")
	if err := os.WriteFile(logFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fileM := startManager(t, "", src(logFile))
	waitValue(t, fileM.reg, float64(len(lines)), "krb5_kdc_log_lines_read_total", "path", logFile)
	want := requestCounts(t, fileM.reg)
	fileM.stop()

	jdir := filepath.Join(dir, "journal")
	if err := os.Mkdir(jdir, 0o700); err != nil {
		t.Fatal(err)
	}
	jfile := filepath.Join(jdir, "remote.journal")
	ts := int64(1764556800000000)
	half := len(entries) / 2
	writeJournal(t, jfile, &ts, entries[:half])
	// Another program's entries are not ours.
	writeJournal(t, jfile, &ts, []journalEntry{{ident: "sshd", pid: 1, msg: "Accepted publickey for root"}})
	jsrc := config.LogSource{Type: "any", StartAt: "beginning", Journal: &config.JournalSource{Directory: jdir}}
	key := jsrc.Key()
	pos := filepath.Join(dir, "positions.json")
	// journalctl hands on only the daemons' own entries (kadmin.local's
	// and kdb5_util's lines in kadmind's file count for nothing anyway).
	ours := func(es []journalEntry) (n float64) {
		for _, e := range es {
			if e.ident == "krb5kdc" || e.ident == "kadmind" {
				n++
			}
		}
		return n
	}
	m1 := startManager(t, pos, jsrc)
	waitValue(t, m1.reg, ours(entries[:half]), "krb5_kdc_log_lines_read_total", "path", key)
	m1.stop()
	writeJournal(t, jfile, &ts, entries[half:]) // while stopped
	m2 := startManager(t, pos, jsrc)
	// The second run continues the first: sum both runs' counts.
	waitValue(t, m2.reg, ours(entries[half:]), "krb5_kdc_log_lines_read_total", "path", key)
	got := requestCounts(t, m1.reg)
	for k, v := range requestCounts(t, m2.reg) {
		got[k] += v
	}
	if len(want) < 10 {
		t.Fatalf("the file source counted only %d series: %v", len(want), want)
	}
	sameCounts(t, got, want)
	if v := value(t, m2.reg, "krb5_kdc_log_journalctl_running", "path", key); v != 1 {
		t.Errorf("journalctl_running = %v", v)
	}
}

// What local users forge in the journal counts nowhere: lines tagged
// krb5kdc by nobody's logger, by nobody's process named krb5kdc and by
// root's logger, each a burst of wrong passwords for victim@ from
// 10.6.6.6, and journald's suppression entry about nobody's flood. The
// journal source counts what the file source counts of the KDC's lines
// alone (every request, wrong password and suppressed line, with the
// attack signals on), and no offender is the forgers' address or victim.
// The KDC's own suppression entry still counts. On the old
// SYSLOG_IDENTIFIER match this fails (seen: the forged requests and wrong
// passwords counted, 10.6.6.6 and victim@ offenders, 5,986 lines
// suppressed).
func TestJournalForgeriesCountNowhere(t *testing.T) {
	testutil.RequireProgram(t, "journalctl")
	if _, err := os.Stat(journalRemote); err != nil {
		if testutil.InCI() {
			t.Fatalf("%s missing in CI: %v", journalRemote, err)
		}
		t.Skip(err)
	}
	entries, lines := fixtureEntries(t, "testdata/mit-1.20-kdc.log")
	n := min(len(entries), 300)
	entries, lines = entries[:n], lines[:n]
	dir := t.TempDir()
	logFile := filepath.Join(dir, "krb5kdc.log")
	if err := os.WriteFile(logFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fileM := startManager(t, "", src(logFile))
	if err := fileM.m.ApplyConfig(&config.Config{Logs: []config.LogSource{src(logFile)}, AttackSignals: attackTestSignals}); err != nil {
		t.Fatal(err)
	}
	waitValue(t, fileM.reg, float64(len(lines)), "krb5_kdc_log_lines_read_total", "path", logFile)
	want := requestCounts(t, fileM.reg)
	fileM.stop()

	const forged = "AS_REQ (2 etypes {aes256-cts-hmac-sha1-96(18)}) 10.6.6.6: PREAUTH_FAILED: victim@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, Preauthentication failed"
	var all []journalEntry
	for i, e := range entries {
		all = append(all, e)
		if i%10 == 0 {
			all = append(all,
				journalEntry{ident: "krb5kdc", comm: "logger", uid: 65534, pid: 666, msg: forged},
				journalEntry{ident: "krb5kdc", comm: "krb5kdc", uid: 65534, pid: 667, msg: forged},
				journalEntry{ident: "krb5kdc", comm: "logger", uid: 0, pid: 668, msg: forged})
		}
	}
	jdir := filepath.Join(dir, "journal")
	if err := os.Mkdir(jdir, 0o700); err != nil {
		t.Fatal(err)
	}
	jfile := filepath.Join(jdir, "remote.journal")
	ts := int64(1764556800000000)
	writeJournal(t, jfile, &ts, all)
	// journald's suppression entries (its own: _TRANSPORT=driver, _UID=0)
	// about nobody's krb5kdc and about the KDC.
	var exp bytes.Buffer
	for i, obj := range []struct{ uid, n int }{{65534, 5986}, {0, 3}} {
		fmt.Fprintf(&exp, "__REALTIME_TIMESTAMP=%d\n_BOOT_ID=0123456789abcdef0123456789abcdef\n_TRANSPORT=driver\n_UID=0\n_PID=%d\n_COMM=systemd-journal\nMESSAGE_ID=%s\nMESSAGE=Suppressed %d messages from krb5-kdc.service\nN_DROPPED=%d\nOBJECT_PID=667\nOBJECT_UID=%d\nOBJECT_COMM=krb5kdc\nOBJECT_SYSTEMD_UNIT=krb5-kdc.service\n\n",
			ts+1+int64(i), 100, journal.DroppedMessageID, obj.n, obj.n, obj.uid)
	}
	cmd := exec.Command(journalRemote, "-o", jfile, "-")
	cmd.Stdin = &exp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-journal-remote: %v\n%s", err, out)
	}
	jsrc := config.LogSource{Type: "kdc", StartAt: "beginning", Journal: &config.JournalSource{Directory: jdir}}
	jm := startManager(t, "", jsrc)
	if err := jm.m.ApplyConfig(&config.Config{Logs: []config.LogSource{jsrc}, AttackSignals: attackTestSignals}); err != nil {
		t.Fatal(err)
	}
	waitValue(t, jm.reg, 3, "krb5_kdc_log_journal_lines_suppressed_total", "path", jsrc.Key())
	waitValue(t, jm.reg, float64(len(entries)), "krb5_kdc_log_lines_read_total", "path", jsrc.Key())
	got := requestCounts(t, jm.reg)
	sameCounts(t, got, want)
	for name, mf := range testutil.Gather(t, jm.reg).MFs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "10.6.6.6") || strings.Contains(l.GetValue(), "victim") {
					t.Errorf("a forger is in %s: %v", name, m)
				}
			}
		}
	}
	if v := value(t, jm.reg, "krb5_kdc_log_journal_lines_suppressed_total", "path", jsrc.Key()); v != 3 {
		t.Errorf("%v lines suppressed counted, journald's entry about the KDC says 3", v)
	}
}
