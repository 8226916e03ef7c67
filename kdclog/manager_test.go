package kdclog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// value returns the value of the series name{labels}, or -1 if absent. A
// label name the metric does not have is a mistake of the test (the
// lookup could never match), so it fails the test.
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for i := 0; i+1 < len(labels) && len(mf.GetMetric()) > 0; i += 2 {
			has := false
			for _, lp := range mf.GetMetric()[0].GetLabel() {
				has = has || lp.GetName() == labels[i]
			}
			if !has {
				t.Fatalf("%s has no label %q", name, labels[i])
			}
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
	}
	return -1
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == kv[i] && lp.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// waitValue waits until name{labels} reaches want.
func waitValue(t *testing.T, g prometheus.Gatherer, want float64, name string, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v := value(t, g, name, labels...)
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v, want %v", name, labels, v, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type testManager struct {
	m      *Manager
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

func startManager(t *testing.T, posFile string, srcs ...config.LogSource) *testManager {
	t.Helper()
	return startManagerLogging(t, log.NewNopLogger(), posFile, srcs...)
}

func startManagerLogging(t *testing.T, logger log.Logger, posFile string, srcs ...config.LogSource) *testManager {
	t.Helper()
	return startManagerOpts(t, logger, Config{PositionFile: posFile}, srcs...)
}

// startManagerOpts starts a manager with opts (SyncInterval 20ms unless
// set) following srcs.
func startManagerOpts(t *testing.T, logger log.Logger, opts Config, srcs ...config.LogSource) *testManager {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if opts.SyncInterval == 0 {
		opts.SyncInterval = 20 * time.Millisecond
	}
	m, err := NewManager(logger, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyConfig(&config.Config{Logs: srcs}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tm := &testManager{m: m, reg: reg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tm.done)
		if err := m.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(tm.stop)
	return tm
}

func (tm *testManager) stop() {
	tm.m.Stop()
	tm.cancel()
	<-tm.done
	tm.m.Close()
}

func src(path string) config.LogSource {
	return config.LogSource{Path: path, Type: "any", StartAt: "beginning", PollInterval: 10 * time.Millisecond, RotateWait: 300 * time.Millisecond}
}

const hdr = "Nov 30 06:15:34 vm krb5kdc[7559](info): "

func asLine(status, client, tail string) string {
	return hdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: " + status + ": " + client + " for krbtgt/PERF.TEST@PERF.TEST" + tail
}

func asIssue(client string) string {
	return hdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: ISSUE: authtime 1796019334, " + issueReps + ", " + client + " for krbtgt/PERF.TEST@PERF.TEST"
}

func tgsIssue(client string) string {
	return hdr + "TGS_REQ (" + etypes4 + ") 127.0.0.1: ISSUE: authtime 1796019334, " + issueReps + ", " + client + " for HTTP/web0001.perf.test@PERF.TEST"
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestManagerCounts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "krb5kdc.log")
	lines := []string{
		hdr + "commencing operation",
		// A SPAKE login: 4 lines, one of them the MORE_PREAUTH_DATA_REQUIRED step.
		asLine("NEEDED_PREAUTH", "user1@PERF.TEST", ", Additional pre-authentication required"),
		hdr + "preauth (spake) verify failure: More preauthentication data is required",
		asLine("PREAUTH_FAILED", "user1@PERF.TEST", ", More preauthentication data is required"),
		asIssue("user1@PERF.TEST"),
		tgsIssue("user1@PERF.TEST"),
		// SPAKE group mismatch: a failure, then success with another method.
		asLine("NEEDED_PREAUTH", "user2@PERF.TEST", ", Additional pre-authentication required"),
		hdr + "preauth (spake) verify failure: Preauthentication failed",
		asLine("PREAUTH_FAILED", "user2@PERF.TEST", ", Preauthentication failed"),
		asIssue("user2@PERF.TEST"),
		// A wrong password: no ISSUE follows.
		asLine("NEEDED_PREAUTH", "user3@PERF.TEST", ", Additional pre-authentication required"),
		hdr + "preauth (encrypted_timestamp) verify failure: Preauthentication failed",
		asLine("PREAUTH_FAILED", "user3@PERF.TEST", ", Preauthentication failed"),
		asLine("CLIENT_NOT_FOUND", "nosuch@PERF.TEST", ", Client not found in Kerberos database"),
		asLine("CLIENT LOCKED OUT", "user6@PERF.TEST", ", Client's credentials have been revoked"),
		hdr + "AS_REQ (1 etypes {DEPRECATED:arcfour-hmac(23)}) 127.0.0.1: BAD_ENCRYPTION_TYPE: user1@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, KDC has no support for encryption type",
		hdr + "TGS_REQ (" + etypes4 + ") 127.0.0.1: LOOKING_UP_SERVER: authtime 0, etypes {rep=UNSUPPORTED:(0)} user1@PERF.TEST for HTTP/nosuch.perf.test@PERF.TEST, Server not found in Kerberos database",
		hdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: SOME NEW STATUS: user1@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, x",
		// The probe: counted apart.
		asLine("NEEDED_PREAUTH", "krb5-exporter-probe@PERF.TEST", ", Additional pre-authentication required"),
		asIssue("krb5-exporter-probe@PERF.TEST"),
		tgsIssue("krb5-exporter-probe@PERF.TEST"),
		hdr + "DISPATCH: repeated (retransmitted?) request from 127.0.0.1, resending previous response",
		hdr + "shutting down",
		"Nov 30 06:16:02 vm kadmind[7561](Notice): Request: kadm5_create_principal, p@PERF.TEST, success, client=admin/admin@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1",
		"Nov 30 06:16:02 vm kadmind[7561](Notice): Request: kadm5_create_principal, p@PERF.TEST, Principal or policy already exists, client=admin/admin@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1",
		"Nov 30 06:16:03 vm sshd[1]: unrelated",
		hdr + "an unknown message",
	}
	writeLines(t, path, lines...)
	s := src(path)
	s.ProbePrincipals = []string{"krb5-exporter-probe"}
	tm := startManager(t, "", s)
	waitValue(t, tm.reg, float64(len(lines)), "krb5_kdc_log_lines_read_total", "path", path)

	want := `
# HELP krb5_kdc_requests_total KDC requests by type (as, tgs) and status as logged (ISSUE is success), excluding probe principals.
# TYPE krb5_kdc_requests_total counter
krb5_kdc_requests_total{request="as",status="BAD_ENCRYPTION_TYPE"} 1
krb5_kdc_requests_total{request="as",status="CLIENT LOCKED OUT"} 1
krb5_kdc_requests_total{request="as",status="CLIENT_NOT_FOUND"} 1
krb5_kdc_requests_total{request="as",status="ISSUE"} 2
krb5_kdc_requests_total{request="as",status="MORE_PREAUTH_DATA_REQUIRED"} 1
krb5_kdc_requests_total{request="as",status="NEEDED_PREAUTH"} 3
krb5_kdc_requests_total{request="as",status="PREAUTH_FAILED"} 2
krb5_kdc_requests_total{request="as",status="SOME NEW STATUS"} 1
krb5_kdc_requests_total{request="tgs",status="ISSUE"} 1
krb5_kdc_requests_total{request="tgs",status="LOOKING_UP_SERVER"} 1
# HELP krb5_kdc_log_probe_requests_total KDC requests of the configured probe principals, by type and status; not in krb5_kdc_requests_total.
# TYPE krb5_kdc_log_probe_requests_total counter
krb5_kdc_log_probe_requests_total{request="as",status="ISSUE"} 1
krb5_kdc_log_probe_requests_total{request="as",status="NEEDED_PREAUTH"} 1
krb5_kdc_log_probe_requests_total{request="tgs",status="ISSUE"} 1
# HELP krb5_kdc_preauth_verify_failures_total KDC 'preauth (METHOD) verify failure' lines by method and reason.
# TYPE krb5_kdc_preauth_verify_failures_total counter
krb5_kdc_preauth_verify_failures_total{method="encrypted_timestamp",reason="preauth_failed"} 1
krb5_kdc_preauth_verify_failures_total{method="spake",reason="more_data_required"} 1
krb5_kdc_preauth_verify_failures_total{method="spake",reason="preauth_failed"} 1
# HELP krb5_kdc_preauth_failures_recovered_total AS PREAUTH_FAILED lines followed by an ISSUE for the same client and address (a fallback to another preauth method, e.g. a SPAKE group mismatch, or a retyped password), by the method that failed.
# TYPE krb5_kdc_preauth_failures_recovered_total counter
krb5_kdc_preauth_failures_recovered_total{method="spake"} 1
# HELP krb5_kdc_issued_etypes_total Encryption types of issued tickets (ISSUE lines only), by request type, key (reply, ticket, session) and etype.
# TYPE krb5_kdc_issued_etypes_total counter
krb5_kdc_issued_etypes_total{etype="aes256-cts-hmac-sha384-192",key="reply",request="as"} 2
krb5_kdc_issued_etypes_total{etype="aes256-cts-hmac-sha384-192",key="reply",request="tgs"} 1
krb5_kdc_issued_etypes_total{etype="aes256-cts-hmac-sha384-192",key="session",request="as"} 2
krb5_kdc_issued_etypes_total{etype="aes256-cts-hmac-sha384-192",key="session",request="tgs"} 1
krb5_kdc_issued_etypes_total{etype="aes256-cts-hmac-sha384-192",key="ticket",request="as"} 2
krb5_kdc_issued_etypes_total{etype="aes256-cts-hmac-sha384-192",key="ticket",request="tgs"} 1
# HELP krb5_kdc_weak_etype_requests_total Requests involving DES, 3DES or RC4: offered by the client (offered), offered only (only_weak), used in an issued ticket (issued).
# TYPE krb5_kdc_weak_etype_requests_total counter
krb5_kdc_weak_etype_requests_total{kind="issued",request="as"} 0
krb5_kdc_weak_etype_requests_total{kind="issued",request="tgs"} 0
krb5_kdc_weak_etype_requests_total{kind="offered",request="as"} 1
krb5_kdc_weak_etype_requests_total{kind="offered",request="tgs"} 0
krb5_kdc_weak_etype_requests_total{kind="only_weak",request="as"} 1
krb5_kdc_weak_etype_requests_total{kind="only_weak",request="tgs"} 0
# HELP krb5_kdc_retransmits_total Repeated (retransmitted) requests the KDC answered from its lookaside cache (resent) or dropped while still processing the first (dropped).
# TYPE krb5_kdc_retransmits_total counter
krb5_kdc_retransmits_total{action="dropped"} 0
krb5_kdc_retransmits_total{action="resent"} 1
# HELP krb5_kadmind_requests_total kadmind operations by RPC name (kadm5_*, chpw, setpw) and result.
# TYPE krb5_kadmind_requests_total counter
krb5_kadmind_requests_total{operation="kadm5_create_principal",result="already_exists"} 1
krb5_kadmind_requests_total{operation="kadm5_create_principal",result="success"} 1
# HELP krb5_kdc_log_lines_unparsed_total Lines not understood, by reason.
# TYPE krb5_kdc_log_lines_unparsed_total counter
krb5_kdc_log_lines_unparsed_total{path="PATH",reason="malformed"} 0
krb5_kdc_log_lines_unparsed_total{path="PATH",reason="no_header"} 0
krb5_kdc_log_lines_unparsed_total{path="PATH",reason="other_program"} 1
krb5_kdc_log_lines_unparsed_total{path="PATH",reason="too_long"} 0
krb5_kdc_log_lines_unparsed_total{path="PATH",reason="unknown_message"} 1
`
	want = strings.ReplaceAll(want, "PATH", path)
	if err := promtest.GatherAndCompare(tm.reg, strings.NewReader(want),
		"krb5_kdc_requests_total", "krb5_kdc_log_probe_requests_total", "krb5_kdc_preauth_verify_failures_total",
		"krb5_kdc_preauth_failures_recovered_total", "krb5_kdc_issued_etypes_total", "krb5_kdc_weak_etype_requests_total",
		"krb5_kdc_retransmits_total", "krb5_kadmind_requests_total", "krb5_kdc_log_lines_unparsed_total",
	); err != nil {
		t.Error(err)
	}
	for ev, n := range map[string]float64{"started": 1, "stopping": 1, "workers_created": 0} {
		if v := value(t, tm.reg, "krb5_kdc_lifecycle_events_total", "event", ev); v != n {
			t.Errorf("lifecycle %s = %v, want %v", ev, v, n)
		}
	}
	if v := value(t, tm.reg, "krb5_kdc_log_lines_parsed_total", "path", path); v != float64(len(lines)-2) {
		t.Errorf("parsed %v, want %d", v, len(lines)-2)
	}
	problems, err := promtest.GatherAndLint(tm.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestManagerRejectsBadConfig(t *testing.T) {
	m, err := NewManager(log.NewNopLogger(), prometheus.NewRegistry(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]config.LogSource{
		{{Path: "/x", Type: "krb4"}},
		{{Path: "", Type: "any"}},
		{{Path: "/x", Type: "kdc"}, {Path: "/x", Type: "kadmind"}},
		{{Path: "/x", Type: "kdc", ProbePrincipals: []string{"a b"}}},
		{{Path: "/x", Type: "kdc", StartAt: "middle"}},
	} {
		if err := m.ApplyConfig(&config.Config{Logs: bad}); err == nil {
			t.Errorf("ApplyConfig(%+v) accepted", bad)
		}
	}
	if len(m.paths) != 0 {
		t.Error("a rejected configuration changed the manager")
	}
}

// TestManagerReloadAndRestart appends lines all along while the manager
// is reconfigured (what is counted, how the file is tailed) and restarted;
// every line must be counted exactly once: the sum of what each run
// counted equals what was written.
func TestManagerReloadAndRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "krb5kdc.log")
	posFile := filepath.Join(dir, "positions.json")
	writeLines(t, path, hdr+"commencing operation")

	var mu sync.Mutex
	written := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			writeLines(t, path, tgsIssue(fmt.Sprintf("user%d@PERF.TEST", i)))
			written++
			mu.Unlock()
			time.Sleep(300 * time.Microsecond)
		}
	}()

	s := src(path)
	counted := 0.0
	issued := func(tm *testManager) float64 {
		return value(t, tm.reg, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	}
	for round := range 4 {
		tm := startManager(t, posFile, s)
		time.Sleep(50 * time.Millisecond)
		s.ProbePrincipals = append(s.ProbePrincipals, fmt.Sprintf("nobody%d", round)) // swapped in place
		if err := tm.m.ApplyConfig(&config.Config{Logs: []config.LogSource{s}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		s.PollInterval += 5 * time.Millisecond // set in place
		if err := tm.m.ApplyConfig(&config.Config{Logs: []config.LogSource{s}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		tm.stop()
		counted += issued(tm)
	}
	close(stop)
	<-done
	tm := startManager(t, posFile, s)
	waitValue(t, tm.reg, float64(written)-counted, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	time.Sleep(50 * time.Millisecond)
	tm.stop()
	if total := counted + issued(tm); total != float64(written) {
		t.Fatalf("counted %v lines over all runs, wrote %d", total, written)
	}
	t.Logf("%d lines, 4 restarts, 8 reloads", written)
}

func TestManagerRemoveSource(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	writeLines(t, a, tgsIssue("u@R"))
	writeLines(t, b, tgsIssue("u@R"), tgsIssue("v@R"))
	tm := startManager(t, "", src(a), src(b))
	waitValue(t, tm.reg, 3, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	if err := tm.m.ApplyConfig(&config.Config{Logs: []config.LogSource{src(a)}}); err != nil {
		t.Fatal(err)
	}
	if v := value(t, tm.reg, "krb5_kdc_log_lines_read_total", "path", b); v != -1 {
		t.Errorf("removed source still exported: %v", v)
	}
	if _, ok := tm.m.store.Get(b); ok {
		t.Error("removed source's position kept")
	}
	// The counts it contributed stay: counters never go back.
	if v := value(t, tm.reg, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE"); v != 3 {
		t.Errorf("requests after removal = %v, want 3", v)
	}
}

// TestPositionFileWriteErrors: an unwritable position file is counted and
// logged (once while it lasts, and its recovery), and the logs are still
// followed and counted.
func TestPositionFileWriteErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "krb5kdc.log")
	writeLines(t, path, tgsIssue("u@R"))
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o700)
	var logs testutil.LockedBuffer
	tm := startManagerLogging(t, log.NewLogfmtLogger(&logs), filepath.Join(state, "positions.json"), src(path))
	waitValue(t, tm.reg, 1, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	// The directory goes away under the running exporter (the lock it
	// holds stays): every write fails from now on.
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	writeLines(t, path, tgsIssue("w@R"))
	waitValue(t, tm.reg, 2, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	deadline := time.Now().Add(10 * time.Second)
	for value(t, tm.reg, "krb5_kdc_log_position_file_write_errors_total") < 3 {
		if time.Now().After(deadline) {
			t.Fatal("not three position file write errors counted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	writeLines(t, path, tgsIssue("v@R"))
	waitValue(t, tm.reg, 3, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	if n := strings.Count(logs.String(), `msg="cannot write the position file;`); n != 1 {
		t.Errorf("%d lines for a lasting write failure, want 1:\n%s", n, logs.String())
	}
	// The directory is back: the next write succeeds and says so, once.
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the position file to be written again", func() bool {
		_, err := os.Stat(filepath.Join(state, "positions.json"))
		return err == nil
	})
	writeLines(t, path, tgsIssue("x@R"))
	waitValue(t, tm.reg, 4, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	if n := strings.Count(logs.String(), `msg="position file written again"`); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, logs.String())
	}
}

// TestReloadTimingsKeepsDeletedLog: a reload that changes poll_interval
// and rotate_wait while the log is deleted but still written by the KDC
// (before it reopens its log) must not lose the lines written to the
// deleted file: a restarted tailer could not open it again.
func TestReloadTimingsKeepsDeletedLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "krb5kdc.log")
	kdc, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer kdc.Close()
	n := 0
	write := func(k int) {
		for range k {
			n++
			if _, err := fmt.Fprintln(kdc, tgsIssue(fmt.Sprintf("user%d@PERF.TEST", n))); err != nil {
				t.Fatal(err)
			}
		}
	}
	const metric = "krb5_kdc_requests_total"
	issue := []string{"request", "tgs", "status", "ISSUE"}

	s := src(path)
	s.RotateWait = 5 * time.Second
	write(2)
	tm := startManager(t, filepath.Join(dir, "positions.json"), s)
	waitValue(t, tm.reg, 2, metric, issue...)

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(3) // to the deleted file
	waitValue(t, tm.reg, 5, metric, issue...)

	s.PollInterval += 15 * time.Millisecond
	s.RotateWait += time.Second
	if err := tm.m.ApplyConfig(&config.Config{Logs: []config.LogSource{s}}); err != nil {
		t.Fatal(err)
	}
	write(3) // still to the deleted file
	waitValue(t, tm.reg, 8, metric, issue...)

	kdc.Close() // the KDC reopens its log
	if kdc, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
		t.Fatal(err)
	}
	write(2)
	waitValue(t, tm.reg, 10, metric, issue...)
	tm.stop()
	if v := value(t, tm.reg, metric, issue...); v != 10 {
		t.Fatalf("counted %v lines, wrote 10", v)
	}
	// The deleted file was followed on as one rotation, not reopened by a
	// restarted tailer.
	if v := value(t, tm.reg, "krb5_kdc_log_rotations_total", "path", path, "kind", "delete"); v != 1 {
		t.Errorf("delete rotations = %v, want 1", v)
	}
}

// TestReloadUnchangedKeepsSource: a reload with the same configuration
// keeps the source, so a preauth failure before a SIGHUP and the ISSUE
// after it still count as a recovery.
func TestReloadUnchangedKeepsSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "krb5kdc.log")
	s := src(path)
	tm := startManager(t, "", s)
	writeLines(t, path,
		hdr+"preauth (encrypted_timestamp) verify failure: Preauthentication failed",
		asLine("PREAUTH_FAILED", "alice@PERF.TEST", ", Preauthentication failed"))
	waitValue(t, tm.reg, 1, "krb5_kdc_requests_total", "request", "as", "status", "PREAUTH_FAILED")
	current := func() *source {
		tm.m.mu.Lock()
		defer tm.m.mu.Unlock()
		return tm.m.paths[path].src.Load()
	}
	before := current()
	if err := tm.m.ApplyConfig(&config.Config{Logs: []config.LogSource{src(path)}}); err != nil {
		t.Fatal(err)
	}
	if current() != before {
		t.Error("an unchanged configuration replaced the source")
	}
	writeLines(t, path, asIssue("alice@PERF.TEST"))
	waitValue(t, tm.reg, 1, "krb5_kdc_requests_total", "request", "as", "status", "ISSUE")
	if v := value(t, tm.reg, "krb5_kdc_preauth_failures_recovered_total", "method", "encrypted_timestamp"); v != 1 {
		t.Errorf("recovered = %v, want 1", v)
	}
}

// TestProbePrincipalsFromModules: a log without probe_principals counts
// the logins of the modules' clients as probe traffic, not as users'.
func TestProbePrincipalsFromModules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "krb5kdc.log")
	writeLines(t, path,
		asIssue("krb5-exporter-probe@PERF.TEST"),
		asIssue("other-probe@ELSEWHERE.ORG"),
		asIssue("user0001@PERF.TEST"),
		asIssue("krb5-exporter-probe@ELSEWHERE.ORG"), // same name, not a module's realm: a user
	)
	reg := prometheus.NewPedanticRegistry()
	m, err := NewManager(log.NewNopLogger(), reg, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := &config.Config{
		Modules: map[string]config.ProbeModule{
			"a": {Realm: "PERF.TEST", Client: "krb5-exporter-probe"},
			"b": {Realm: "PERF.TEST", Client: "other-probe@ELSEWHERE.ORG"},
		},
		Logs: []config.LogSource{src(path)},
	}
	if err := m.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitValue(t, reg, 4, "krb5_kdc_log_lines_read_total", "path", path)
	if v := value(t, reg, "krb5_kdc_log_probe_requests_total", "request", "as", "status", "ISSUE"); v != 2 {
		t.Errorf("probe logins: %v, want 2", v)
	}
	if v := value(t, reg, "krb5_kdc_requests_total", "request", "as", "status", "ISSUE"); v != 2 {
		t.Errorf("user logins: %v, want 2", v)
	}
}
