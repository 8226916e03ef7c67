package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// topRealm starts a realm with krb5kdc -w workers and kadmind, and the
// daemon on it with the realm's configuration probing every second; it
// returns once the daemon's login probe has succeeded. top's arguments
// follow the same configuration and read that daemon's probes.
func topRealm(t *testing.T, workers int) (*realm.Realm, []string) {
	t.Helper()
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Workers: workers, DisableLastSuccess: true})
	cfg := filepath.Join(t.TempDir(), "exporter.yml")
	if err := writeRealmConfig(r, cfg); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.ReplaceAll(string(b), "interval: 15s", "interval: 1s")), 0o600)
	base, _, logs := daemon(t, "--config.file", cfg, "--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf)
	testutil.Eventually(t, 60*time.Second, "the daemon's first login probe", func() bool {
		for _, l := range metricLines(t, base, "krb5_probe_success") {
			if strings.Contains(l, `exchange="as"`) && strings.HasSuffix(l, " 1") {
				return true
			}
		}
		return false
	})
	_ = logs
	return r, []string{"top", "--config.file", cfg, "--collector.process.krb5kdc-pidfile", r.KDCPidFile, "--daemon.url", base + "/metrics"}
}

// snapshot is one parsed --batch snapshot.
type snapshot struct {
	text     string
	interval float64
	preauth  map[string]float64 // by row name; "total" too
	gone     map[string]bool
	kadmind  float64
}

var (
	reInterval = regexp.MustCompile(`interval ([0-9.]+)s`)
	reKadmind  = regexp.MustCompile(`kadmind ([0-9.]+) ops/s`)
	reRow      = regexp.MustCompile(`^(\S+)\s+(\d+|-|gone)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s`)
)

func parseSnapshot(t *testing.T, text string) snapshot {
	t.Helper()
	s := snapshot{text: text, preauth: map[string]float64{}, gone: map[string]bool{}}
	if m := reInterval.FindStringSubmatch(text); m != nil {
		s.interval, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reKadmind.FindStringSubmatch(text); m != nil {
		s.kadmind, _ = strconv.ParseFloat(m[1], 64)
	}
	for _, line := range strings.Split(text, "\n") {
		if m := reRow.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[5], 64)
			s.preauth[m[1]] = v
			s.gone[m[1]] = m[2] == "gone"
		}
	}
	return s
}

// TestTopBatchAgainstWorkers: `top --batch` on a KDC with -w 4, kadmind
// and a daemon probing it. Under a known UDP load the per-worker rates of
// each snapshot add up to its total, and the totals over the snapshots
// (rate × interval) to the replies the clients got; kadmind's operations,
// the UDP drop and TCP overflow rates and the daemon's probe latency are
// shown. A killed worker takes the KDC down (MIT 1.20): every row then
// shows as gone.
func TestTopBatchAgainstWorkers(t *testing.T) {
	t.Parallel()
	r, args := topRealm(t, 4)
	cmd := exec.Command(binary, append(args, "--batch", "--iterations", "40", "--interval", "1s")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testutil.LockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	snaps := make(chan snapshot, 64)
	go func() {
		defer close(snaps)
		sc := bufio.NewScanner(out)
		var cur []string
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "krb5-exporter top - ") && len(cur) > 0 {
				snaps <- parseSnapshot(t, strings.Join(cur, "\n"))
				cur = nil
			}
			cur = append(cur, sc.Text())
		}
		if len(cur) > 0 {
			snaps <- parseSnapshot(t, strings.Join(cur, "\n"))
		}
	}()
	next := func() snapshot {
		t.Helper()
		select {
		case s, ok := <-snaps:
			if !ok {
				t.Fatalf("top ended early: %s", stderr.String())
			}
			return s
		case <-time.After(30 * time.Second):
			t.Fatalf("no snapshot for 30s: %s", stderr.String())
		}
		return snapshot{}
	}
	first := next() // top follows the logs from here on
	t.Logf("first snapshot:\n%s", first.text)

	// kadmin first (its own logins are KDC requests too), then the load.
	admin := exec.Command("kadmin", "-k", "-t", r.AdminKeytab, "-p", r.AdminPrincipal, "-q", "getprinc "+r.User(1))
	admin.Env = append(os.Environ(), r.Env()...)
	if out, err := admin.CombinedOutput(); err != nil {
		t.Fatalf("kadmin: %v %s", err, out)
	}
	for n := 0; ; n++ {
		if s := next(); s.kadmind > 0 {
			break
		}
		if n == 20 {
			t.Fatal("kadmind's operations never showed")
		}
	}
	next() // the KDC lines of kadmin's login, written before kadmind's
	sent := realmtest.PreauthLoad(t, r, 4, 40)
	if sent != 160 {
		t.Fatalf("%d replies to 160 requests", sent)
	}
	var total float64
	var probeSeen bool
	reProbe := regexp.MustCompile(`-udp/as OK [0-9.]+ms`)
	for n := 0; n < 30 && (math.Abs(total-float64(sent)) > 0.02*float64(sent)+1 || !probeSeen); n++ {
		s := next()
		var workers float64
		for name, v := range s.preauth {
			switch name {
			case "total", "supervisor":
			case "0", "1", "2", "3":
				workers += v
			default:
				t.Errorf("row %q: want workers 0-3, supervisor, total:\n%s", name, s.text)
			}
		}
		if d := math.Abs(workers - s.preauth["total"]); d > 0.3 { // 5 values rounded to 0.1
			t.Errorf("worker rows add up to %.1f/s, the total row says %.1f/s:\n%s", workers, s.preauth["total"], s.text)
		}
		total += s.preauth["total"] * s.interval
		probeSeen = probeSeen || reProbe.MatchString(s.text)
		if !strings.Contains(s.text, "UDP drops ") || !strings.Contains(s.text, "TCP overflows ") {
			t.Errorf("no UDP drops / TCP overflows:\n%s", s.text)
		}
	}
	if math.Abs(total-float64(sent)) > 0.02*float64(sent)+1 {
		t.Errorf("snapshots add up to %.1f requests, the clients got %d replies", total, sent)
	}
	if !probeSeen {
		t.Error("the daemon's probe latency never showed")
	}

	pids := r.KDCPids()
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		s := next()
		gone := 0
		for name, g := range s.gone {
			if g && name != "total" {
				gone++
			}
		}
		if gone == 5 { // supervisor and 4 workers
			break
		}
		if n == 20 {
			t.Fatalf("after a worker was killed, not every row gone:\n%s", s.text)
		}
	}
}

// The interactive view in a real terminal (tmux): the rows of the KDC's
// processes, kadmind, the network and the daemon's probes appear, the `s`
// key changes the order, `q` quits.
func TestTopInteractive(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		if testutil.InCI() {
			t.Fatal("tmux missing in CI")
		}
		t.Skip(err)
	}
	_, args := topRealm(t, 2)
	session := "krb5top" + strings.ReplaceAll(t.Name(), "/", "")
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "150", "-y", "30", binary+" "+strings.Join(args, " "))
	t.Cleanup(func() { exec.Command("tmux", "kill-session", "-t", session).Run() })
	screen := func() string { return tmux("capture-pane", "-t", session, "-p") }
	reProbe := regexp.MustCompile(`-udp/as OK [0-9.]+ms`)
	testutil.Eventually(t, 30*time.Second, "the worker rows, kadmind, network and probes", func() bool {
		s := screen()
		return strings.Contains(s, "supervisor") && strings.Contains(s, "\n0 ") && strings.Contains(s, "\n1 ") &&
			strings.Contains(s, "sort: cpu") && strings.Contains(s, "kadmind ") && strings.Contains(s, "UDP drops ") &&
			reProbe.MatchString(s)
	})
	tmux("send-keys", "-t", session, "s")
	testutil.Eventually(t, 20*time.Second, "the order to change", func() bool { return strings.Contains(screen(), "sort: requests") })
	tmux("send-keys", "-t", session, "n")
	testutil.Eventually(t, 20*time.Second, "the order by name", func() bool { return strings.Contains(screen(), "sort: name") })
	tmux("send-keys", "-t", session, "q")
	testutil.Eventually(t, 20*time.Second, "top to quit", func() bool {
		return exec.Command("tmux", "has-session", "-t", session).Run() != nil
	})
}

// `top --once` prints one snapshot and exits 0: the KDC's rows and the
// summary lines an admin pastes into a ticket.
func TestTopOnce(t *testing.T) {
	t.Parallel()
	_, args := topRealm(t, 2)
	stdout, stderr, code := exporter(t, append(args, "--once", "--interval", "1500ms")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"supervisor", "\n0 ", "\n1 ", "\ntotal ", "kadmind ", "UDP drops ", "TCP overflows ", "probes "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "\x1b[") {
		t.Errorf("escape sequences in a snapshot that is not for a terminal:\n%q", stdout)
	}
}

// top shows label values with what a terminal acts on escaped: a probe
// target holding "\e[2J" or "\e]0;..." cleared the screen or retitled the
// window of whoever ran top (issue 26 item 8). The daemon's configuration
// now refuses such names, so the values come from a /metrics that is not
// this version's daemon: an HTTP server serving them raw.
func TestTopEscapesLabelValues(t *testing.T) {
	t.Parallel()
	target := "kdc\x1b[2J\x1b]0;owned\a\r\u0085\u009b31m\\n\x7f\u202e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "# TYPE krb5_probe_success gauge\nkrb5_probe_success{target=\""+strings.ReplaceAll(target, `\`, `\\`)+"\",exchange=\"as\x1b[8m\"} 1\n")
	}))
	defer srv.Close()
	stdout, stderr, code := exporter(t, "top", "--once", "--interval", "100ms", "--daemon.url", srv.URL+"/metrics")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := `kdc\x1b[2J\x1b]0;owned\a\r\u0085\u009b31m\\n\x7f\u202e/as\x1b[8m OK`; !strings.Contains(stdout, want) {
		t.Errorf("no %s in:\n%s", want, stdout)
	}
	if i := strings.IndexFunc(stdout, func(r rune) bool { return r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) }); i >= 0 {
		t.Errorf("a control character (%U) in top's output:\n%q", []rune(stdout[i:])[0], stdout)
	}
}

// TestTopCollectorFlagsAreServes: the collector flags top takes (the
// process it reads, where /proc is) are serve's, with serve's help,
// default and placeholder, not top's own declarations of them.
func TestTopCollectorFlagsAreServes(t *testing.T) {
	app, _ := newApp(io.Discard, io.Discard)
	flags := map[string]map[string]string{}
	for _, c := range app.Model().FlattenedCommands() {
		if c.FullCommand != "top" && c.FullCommand != "serve" {
			continue
		}
		flags[c.FullCommand] = map[string]string{}
		for _, f := range c.Flags {
			flags[c.FullCommand][f.Name] = f.Help + "|" + strings.Join(f.Default, ",") + "|" + f.PlaceHolder
		}
	}
	shared := 0
	for name, top := range flags["top"] {
		if !strings.HasPrefix(name, "collector.") && !strings.HasPrefix(name, "path.") {
			continue
		}
		shared++
		if serve, ok := flags["serve"][name]; !ok {
			t.Errorf("top --%s: serve has no such flag", name)
		} else if top != serve {
			t.Errorf("top --%s is %q (help|default|placeholder), serve's is %q", name, top, serve)
		}
	}
	if shared != 5 {
		t.Errorf("top has %d collector flags, want 5 (--path.procfs, --collector.process.krb5kdc-pidfile, --collector.process.{user,exe,unit})", shared)
	}
}

// top shows the KDC's own time per request from the /metrics of a daemon
// running the kdcservice collector (--collector.kdcservice): a service
// table and a column per worker, from the change between two scrapes.
// The server stands for such a daemon, whose eBPF collector is not in
// this test: each scrape has 100 more as requests, all within 1 ms (none
// within 64 us: p95 64 us + 936 us x 0.95 = 953 us), 0.5 ms each.
func TestTopShowsServiceTime(t *testing.T) {
	t.Parallel()
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := float64(scrapes.Add(1))
		fmt.Fprintf(w, `# TYPE krb5_kdc_request_service_seconds histogram
krb5_kdc_request_service_seconds_bucket{request="as",transport="udp",le="6.4e-05"} 0
krb5_kdc_request_service_seconds_bucket{request="as",transport="udp",le="0.001"} %[1]g
krb5_kdc_request_service_seconds_bucket{request="as",transport="udp",le="+Inf"} %[1]g
krb5_kdc_request_service_seconds_sum{request="as",transport="udp"} %[2]g
krb5_kdc_request_service_seconds_count{request="as",transport="udp"} %[1]g
# TYPE krb5_kdc_worker_service_seconds_total counter
krb5_kdc_worker_service_seconds_total{worker="0"} %[2]g
# TYPE krb5_kdc_worker_service_requests_total counter
krb5_kdc_worker_service_requests_total{worker="0"} %[1]g
# TYPE krb5_kdc_service_tracing_up gauge
krb5_kdc_service_tracing_up 1
`, 100*n, 0.05*n)
	}))
	defer srv.Close()
	stdout, stderr, code := exporter(t, "top", "--once", "--interval", "300ms", "--daemon.url", srv.URL+"/metrics")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`(?m)^as +[0-9.]+ +953us +500us +- +- +- +-$`).MatchString(stdout) {
		t.Errorf("no as service line with p95 953us, mean 500us in:\n%s", stdout)
	}
	if !strings.Contains(stdout, "SVC/req\n") || !regexp.MustCompile(`(?m)^total .* 500us$`).MatchString(stdout) {
		t.Errorf("no service column, or the total's is not 500us:\n%s", stdout)
	}
}

// TestTopFitsTheTerminal runs the interactive view in real terminals
// (tmux) of 80x24 and 200x50 against a -w 4 KDC and the daemon probing
// it: every line fits, the columns that do not are dropped whole (at 80
// the error columns go, CPU% and the ok rates stay), every value shown is
// whole, the keys line is there; then, with the KDC stopped, the first
// thing under the title says so, with when it was last seen, and the
// probes say why they fail.
func TestTopFitsTheTerminal(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		if testutil.InCI() {
			t.Fatal("tmux missing in CI")
		}
		t.Skip(err)
	}
	r, args := topRealm(t, 4)
	type term struct{ w, h int }
	screens := map[term]func() string{}
	for _, tm := range []term{{80, 24}, {200, 50}} {
		session := fmt.Sprintf("krb5top%dx%d%s", tm.w, tm.h, strings.ReplaceAll(t.Name(), "/", ""))
		out, err := exec.Command("tmux", "new-session", "-d", "-s", session, "-x", strconv.Itoa(tm.w), "-y", strconv.Itoa(tm.h),
			binary+" "+strings.Join(args, " ")).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("tmux", "kill-session", "-t", session).Run() })
		screens[tm] = func() string {
			out, err := exec.Command("tmux", "capture-pane", "-t", session, "-p").Output()
			if err != nil {
				t.Fatalf("tmux capture-pane: %v", err)
			}
			return string(out)
		}
	}
	rowRe := regexp.MustCompile(`^(supervisor|[0-9]+|total) +(\d+|-|gone)( +(-|[0-9.]+[KMG]?|[0-9.]+(us|ms|s)))+$`)
	check := func(tm term, s string) []string {
		var problems []string
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		if len(lines) > tm.h {
			problems = append(problems, fmt.Sprintf("%d lines on a screen of %d", len(lines), tm.h))
		}
		if !strings.HasPrefix(lines[0], "krb5-exporter top - ") {
			problems = append(problems, "the title scrolled away: "+lines[0])
		}
		var head string
		rows := 0
		for _, l := range lines {
			if n := len([]rune(l)); n > tm.w {
				problems = append(problems, fmt.Sprintf("a line of %d columns: %q", n, l))
			}
			if strings.HasPrefix(l, "WORKER") {
				head = l
			}
			if rowRe.MatchString(l) {
				rows++
			}
		}
		if rows != 6 { // supervisor, 4 workers, total
			problems = append(problems, fmt.Sprintf("%d whole process rows, want 6", rows))
		}
		for _, want := range []string{"PID", "CPU%", "AS ok/s", "TGS ok/s"} {
			if !strings.Contains(head, want) {
				problems = append(problems, "no column "+want)
			}
		}
		if wide := strings.Contains(head, "preauth/s") && strings.Contains(head, "AS err/s"); wide != (tm.w >= 120) {
			problems = append(problems, fmt.Sprintf("at %d columns every column shown: %v", tm.w, wide))
		}
		if !strings.Contains(s, "sort: cpu") || !strings.Contains(s, "q quit") {
			problems = append(problems, "no sort or keys line")
		}
		return problems
	}
	for tm, screen := range screens {
		var last []string
		testutil.Eventually(t, 45*time.Second, fmt.Sprintf("top at %dx%d to fit with every process row", tm.w, tm.h), func() bool {
			s := screen()
			last = check(tm, s)
			return len(last) == 0 && strings.Contains(s, "-udp/as OK")
		})
		if len(last) > 0 {
			t.Errorf("%dx%d: %v\n%s", tm.w, tm.h, last, screen())
		}
	}
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	down := regexp.MustCompile(`^KDC DOWN: no krb5kdc process, last seen \d\d:\d\d:\d\d`)
	for tm, screen := range screens {
		seen := ""
		testutil.Eventually(t, 45*time.Second, fmt.Sprintf("top at %dx%d to lead with the stopped KDC and the probes' reason", tm.w, tm.h), func() bool {
			s := screen()
			lines := strings.Split(s, "\n")
			ok := len(lines) > 2 && down.MatchString(lines[1]) && strings.Contains(s, "PROBES FAILING") && strings.Contains(s, "/as connection_refused")
			if !ok && len(lines) > 2 && lines[1] != seen {
				seen = lines[1]
				t.Logf("%dx%d:\n%s", tm.w, tm.h, s)
			}
			return ok
		})
		s := screen()
		for _, l := range strings.Split(s, "\n") {
			if len([]rune(l)) > tm.w {
				t.Errorf("%dx%d, KDC stopped: a line of %d columns: %q", tm.w, tm.h, len([]rune(l)), l)
			}
		}
		if strings.Contains(s, "talkers ") {
			t.Errorf("%dx%d: the talkers of a window before the KDC stopped are still shown:\n%s", tm.w, tm.h, s)
		}
		if out := os.Getenv("KRB5_EXPORTER_SCREENSHOTS"); out != "" {
			os.WriteFile(filepath.Join(out, fmt.Sprintf("top-%dx%d-kdc-stopped.txt", tm.w, tm.h)), []byte(s), 0o644)
		}
	}
}

// TestTopOneKDC: without a pid file, with another realm's KDC on the host,
// top shows one KDC: every process row is the shown supervisor or one of
// its own workers (their parents read from /proc), and the title says
// that other KDCs run.
func TestTopOneKDC(t *testing.T) {
	t.Parallel()
	a := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "a"), Workers: 2, Users: 1, Services: 1, Fillers: -1, NoKadmind: true})
	b := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "b"), Workers: 3, Users: 1, Services: 1, Fillers: -1, NoKadmind: true})
	_, _ = a, b
	stdout, stderr, code := exporter(t, "top", "--once", "--interval", "500ms", "--log", a.KDCLog, "--daemon.url", "")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`\(\+\d+ other KDCs on this host`).MatchString(stdout) {
		t.Errorf("no word of the other KDCs:\n%s", stdout)
	}
	var supervisor int
	var pids []int
	for _, l := range strings.Split(stdout, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		if f[0] == "supervisor" {
			supervisor = pid
		} else if _, err := strconv.Atoi(f[0]); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no KDC process shown:\n%s", stdout)
	}
	// The oldest KDC of the host is shown, whichever realm's (other
	// tests' KDCs come and go): a single-process one is its one row;
	// a -w N one its supervisor and that one's own workers.
	parent := func(pid int) (int, string) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		ppid, _ := strconv.Atoi(f[1])
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
		return ppid, strings.TrimSpace(string(comm))
	}
	if supervisor == 0 {
		if ppid, comm := parent(pids[0]); len(pids) != 1 || comm == "krb5kdc" {
			t.Errorf("a KDC without a supervisor row shows %d processes, the first a child of %d (%s)\n%s", len(pids), ppid, comm, stdout)
		}
		return
	}
	for _, pid := range pids {
		if ppid, _ := parent(pid); ppid != supervisor {
			t.Errorf("worker pid %d's parent is %d, not the shown supervisor %d: two KDCs mixed\n%s", pid, ppid, supervisor, stdout)
		}
	}
}
