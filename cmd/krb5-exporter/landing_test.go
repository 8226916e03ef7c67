package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	browserpkg "github.com/krb5-exporter/krb5-exporter/internal/testutil/browser"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// hostileName is a probe target's name and hostileClient a probe
// client's principal name (no spaces there): shown as text, they never
// become an element or run.
const (
	hostileName   = `<img src=x onerror="document.title='pwned'"><script>document.title='pwned'</script>`
	hostileClient = `<img/src=x/onerror=document.title='pwned'><script>document.title='pwned'</script>`
)

// sharedBrowser is one headless chromium for the package's tests,
// started by the first that needs it and ended by TestMain; each test gets
// a tab of its own.
var sharedBrowser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

// stopBrowser ends the shared browser, if one was started.
func stopBrowser() {
	if sharedBrowser.cancel != nil {
		sharedBrowser.cancel()
	}
}

// browser opens a tab in the shared chromium; problems returns what its
// pages logged as errors or warnings.
func browser(t *testing.T) (ctx context.Context, problems func() []string) {
	t.Helper()
	bin := testutil.RequireProgram(t, "chromium", "chromium-browser", "google-chrome")
	sharedBrowser.once.Do(func() {
		dir, err := os.MkdirTemp("", "krb5-exporter-chromium")
		if err != nil {
			sharedBrowser.err = err
			return
		}
		ctx, cancel, err := browserpkg.Start(bin, dir)
		sharedBrowser.cancel = func() {
			if cancel != nil {
				cancel()
			}
			os.RemoveAll(dir)
		}
		sharedBrowser.ctx, sharedBrowser.err = ctx, err
	})
	if sharedBrowser.err != nil {
		t.Fatalf("cannot start chromium: %v", sharedBrowser.err)
	}
	ctx, cancel, problems := browserpkg.Tab(sharedBrowser.ctx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx, problems
}

// TestLandingPageInBrowser opens the daemon's landing page in a real
// headless chromium against a harness KDC: the probe rows and log sources
// are there, the page moves after a probe and a login, the probes' debug
// logs are one click away, and a hostile probe name and a hostile client
// principal in a probe's log are shown as text: no element of theirs
// exists and none of their code ran (the title stays).
func TestLandingPageInBrowser(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 2, Services: 1, Fillers: -1, NoKadmind: true})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "exporter.yml")
	if err := writeRealmConfig(r, cfg); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("not a password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cfg)
	text := strings.ReplaceAll(string(b), "interval: 15s", "interval: 1s")
	text = strings.Replace(text, "\nprobes:\n", fmt.Sprintf(`
  hostile:
    realm: %[1]s
    client: %[5]s
    password_file: %[3]s
    timeout: 5s
    allowed_kdcs: ["%[4]s"]

probes:
  - name: %[2]s
    address: %[4]s
    module: hostile
    interval: 1s
`, r.Realm, yamlString(hostileName), pw, r.KDCAddr, yamlString(hostileClient+"@"+r.Realm)), 1)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _, logs := daemon(t, "--config.file", cfg,
		"--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf,
		"--kdclog.position-file", filepath.Join(dir, "positions.json"))

	type row struct{ Target, Start, Result string }
	type logRow struct {
		Path  string
		Lines int
	}
	type pageState struct {
		Title, HeaderBG string
		Probes          []row
		Logs            []logRow
		Injected        int
		Processes       string
	}
	read := func() pageState {
		t.Helper()
		err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitReady(chromedp.CSS("#verdict")))
		if err != nil {
			t.Fatalf("%v\nexporter log:\n%s", err, logs.String())
		}
		s, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](`({
			Title: document.title,
			HeaderBG: getComputedStyle(document.querySelector("header")).backgroundColor,
			Probes: Array.from(document.querySelectorAll("#probes tr.probe")).map(tr => ({
				Target: tr.querySelector("td.target").textContent,
				Start: (tr.querySelector("time") || {}).dateTime || "",
				Result: tr.cells[3].textContent})),
			Logs: Array.from(document.querySelectorAll("#logs tr.log")).map(tr => ({
				Path: tr.querySelector("td.path").textContent,
				Lines: Number(tr.querySelector("td.lines").textContent)})),
			Injected: document.querySelectorAll("img, script").length,
			Processes: (document.querySelector("#processes") || {}).textContent || ""})`))
		if err != nil {
			t.Fatalf("%v\nexporter log:\n%s", err, logs.String())
		}
		return s
	}
	byTarget := func(s pageState) map[string]row {
		m := map[string]row{}
		for _, r := range s.Probes {
			m[r.Target] = r
		}
		return m
	}
	var first pageState
	testutil.Eventually(t, 60*time.Second, "the page to show every target probed", func() bool {
		first = read()
		rows := byTarget(first)
		return len(rows) == 3 && rows["perf_test-udp"].Start != "" && rows["perf_test-tcp"].Start != "" && rows[hostileName].Start != ""
	})
	rows := byTarget(first)
	if rows["perf_test-udp"].Result != "success" || rows["perf_test-tcp"].Result != "success" || rows[hostileName].Result != "failed" {
		t.Errorf("probe rows: %+v", first.Probes)
	}
	if first.Title != "krb5-exporter" || first.Injected != 0 {
		t.Errorf("injected code ran or elements exist: title %q, %d img/script elements", first.Title, first.Injected)
	}
	if first.HeaderBG != "rgb(181, 42, 42)" { // critical: the hostile target's probe fails
		t.Errorf("the page's style is not applied under its CSP: header background %q", first.HeaderBG)
	}
	kdcLines := func(s pageState) int {
		for _, l := range s.Logs {
			if l.Path == r.KDCLog {
				return l.Lines
			}
		}
		return -1
	}
	if kdcLines(first) <= 0 {
		t.Fatalf("log sources: %+v, want %s with lines read", first.Logs, r.KDCLog)
	}
	if !strings.Contains(first.Processes, "krb5kdc") || !strings.Contains(first.Processes, fmt.Sprint(r.KDCPids()[0])) {
		t.Errorf("processes table %q lacks krb5kdc's pid %d", first.Processes, r.KDCPids()[0])
	}

	// A login by a real MIT client: the page moves, on its own clock
	// (the next probe) and on the KDC's (the log's lines).
	kinit := exec.Command("kinit", "-k", "-t", r.UserKeytab, r.User(1))
	kinit.Env = append(os.Environ(), r.Env()...)
	if out, err := kinit.CombinedOutput(); err != nil {
		t.Fatalf("kinit: %v %s", err, out)
	}
	testutil.Eventually(t, 30*time.Second, "the page to show a newer probe and the login's lines", func() bool {
		now := read()
		return byTarget(now)["perf_test-udp"].Start > rows["perf_test-udp"].Start && kdcLines(now) > kdcLines(first)
	})

	// One click to the hostile target's debug logs: its client principal,
	// as the KDC refused it, is text in the log.
	name, _ := json.Marshal(hostileName)
	err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`Array.from(document.querySelectorAll("#probes tr.probe")).
			find(tr => tr.querySelector("td.target").textContent === `+string(name)+`).querySelector("a").click()`),
		chromedp.WaitReady(chromedp.CSS("pre.probe-log")))
	if err != nil {
		t.Fatal(err)
	}
	type logsPage struct {
		Log, Title string
		Injected   int
	}
	lp, err := chromedp.Run(ctx, chromedp.Evaluate[logsPage](`({Log: document.querySelector("pre.probe-log").textContent,
		Title: document.title, Injected: document.querySelectorAll("img, script").length})`))
	if err != nil {
		t.Fatal(err)
	}
	logText, title, injected := lp.Log, lp.Title, lp.Injected
	if !strings.Contains(logText, "client=\"") || !strings.Contains(logText, hostileClient) || !strings.Contains(logText, "login failed") {
		t.Errorf("the hostile target's log does not show its client and failure:\n%s", logText)
	}
	if title != "krb5-exporter: probe logs of "+hostileName || injected != 0 {
		t.Errorf("probe logs page: title %q, %d img/script elements", title, injected)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the pages logged: %v", p)
	}
}

// yamlString quotes s for YAML (a JSON string is a YAML one).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
