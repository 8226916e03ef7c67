package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestLandingPageLeadsWithTheCause opens the landing page in a real
// headless chromium through the demo's faults against a harness KDC: when
// healthy it says so in green with nothing listed; in a storm (50 logins a
// second from 127.0.0.5) its headline names the address, its rate and its
// share, in amber, the rate no more than the KDC's log has of it; with the
// KDC stopped the headline is the KDC, in red, its probes' failures second
// as its consequence, each linking its section of the runbook the
// exporter serves. KRB5_EXPORTER_SCREENSHOTS=DIR keeps a screenshot of
// each state.
func TestLandingPageLeadsWithTheCause(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 2, Services: 1, Fillers: -1, NoKadmind: true})
	dir := t.TempDir()
	cfg := talkersConfig(t, r, dir, func(s string) string { return strings.ReplaceAll(s, "interval: 15s", "interval: 1s") })
	base, _, logs := daemon(t, "--config.file", cfg, "--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf,
		"--kdclog.position-file", filepath.Join(dir, "positions.json"))

	type finding struct{ Severity, Title, Since, Runbook string }
	type page struct {
		Header, Verdict string
		Findings        []finding
		Injected        int
	}
	read := func() page {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitReady(chromedp.CSS("#verdict"))); err != nil {
			t.Fatalf("%v\nexporter log:\n%s", err, logs.String())
		}
		p, err := chromedp.Run(ctx, chromedp.Evaluate[page](`({
			Header: document.querySelector("header").className,
			Verdict: document.querySelector("#verdict").textContent,
			Injected: document.querySelectorAll("img, script").length,
			Findings: Array.from(document.querySelectorAll("#findings li.finding")).map(li => ({
				Severity: li.querySelector(".sev").textContent,
				Title: li.querySelector(".title").textContent,
				Since: (li.querySelector(".since") || {}).textContent || "",
				Runbook: li.querySelector(".next a").getAttribute("href")}))})`))
		if err != nil {
			t.Fatalf("%v\nexporter log:\n%s", err, logs.String())
		}
		return p
	}
	shot := func(name string) {
		out := os.Getenv("KRB5_EXPORTER_SCREENSHOTS")
		if out == "" {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
		if err == nil {
			err = os.WriteFile(filepath.Join(out, name+".png"), png, 0o644)
		}
		if err != nil {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}

	// Healthy: green, nothing listed.
	var p page
	testutil.Eventually(t, 60*time.Second, "the page to say the KDC is OK", func() bool {
		p = read()
		return strings.HasPrefix(p.Verdict, "The KDC is OK")
	})
	if p.Header != "ok" || len(p.Findings) != 0 {
		t.Errorf("healthy: header %q, findings %+v", p.Header, p.Findings)
	}
	shot("healthy")

	// A storm: 4 clients from 127.0.0.5, each a login every 20 ms at
	// most (bounded: 400 logins each, 30 s), so that a loaded machine
	// still sends it well above KDCClientStorm's rate.
	lctx, stopStorm := context.WithTimeout(context.Background(), 30*time.Second)
	var wg sync.WaitGroup
	for range 4 {
		storm := loopbackClient(t, r, r.User(1), "127.0.0.5", nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 400 && lctx.Err() == nil; i++ {
				storm.Login(lctx)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	// Before the clients close (cleanups run last first), whatever fails.
	t.Cleanup(func() { stopStorm(); wg.Wait() })
	stormLine := regexp.MustCompile(`^storm: address 127\.0\.0\.5 sends ([0-9.]+) requests/s, ([0-9]+) % of the KDC's$`)
	last := ""
	testutil.Eventually(t, 30*time.Second, "the headline to name the storm", func() bool {
		p = read()
		if p.Verdict != last {
			t.Logf("headline: %s", p.Verdict)
			last = p.Verdict
		}
		return stormLine.MatchString(p.Verdict)
	})
	stopStorm()
	wg.Wait()
	if p.Header != "warning" || len(p.Findings) == 0 || p.Findings[0].Severity != "warning" || !strings.HasSuffix(p.Findings[0].Runbook, "runbook#kdcclientstorm") ||
		!strings.HasPrefix(p.Findings[0].Since, "since at least ") {
		t.Errorf("storm: header %q, findings %+v", p.Header, p.Findings)
	}
	m := stormLine.FindStringSubmatch(p.Verdict)
	rate, _ := strconv.ParseFloat(m[1], 64)
	log, err := os.ReadFile(r.KDCLog)
	if err != nil {
		t.Fatal(err)
	}
	// The window's rate is of requests the KDC logged (a login one, its
	// lines 3): at most a third of what its log holds from that address
	// over the 5 s window, above the storm threshold (20 a second).
	if inLog := strings.Count(string(log), " 127.0.0.5: "); rate*5 > float64(inLog)/3 || rate <= 20 {
		t.Errorf("the storm's rate %.1f/s: %.0f requests in the window, the log has %d from 127.0.0.5 in all", rate, rate*5, inLog)
	}
	shot("storm")

	// The KDC stopped: the KDC first, its probes' failures second.
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	// The storm's window ends a window after the storm (no request is
	// logged any more to end it): then only the KDC and its probes remain.
	testutil.Eventually(t, 30*time.Second, "the headline to say krb5kdc is not running, then its probes, and nothing else", func() bool {
		p = read()
		return len(p.Findings) == 2 && strings.HasPrefix(p.Findings[1].Title, "2 probes failing")
	})
	if p.Verdict != "krb5kdc is not running" || !regexp.MustCompile(`^last seen running \d\d:\d\d:\d\d UTC`).MatchString(p.Findings[0].Since) || p.Header != "critical" ||
		p.Findings[0].Severity != "critical" || p.Findings[1].Severity != "critical" ||
		!strings.HasSuffix(p.Findings[0].Runbook, "runbook#kdcdown") || !strings.HasSuffix(p.Findings[1].Runbook, "runbook#kdcdown") ||
		!strings.Contains(p.Findings[1].Title, "connection_refused") || p.Findings[1].Since == "" {
		t.Errorf("KDC stopped: verdict %q, header %q, findings %+v", p.Verdict, p.Header, p.Findings)
	}
	shot("kdc-stopped")

	// One click to the runbook, served here, at the alert's section.
	err = chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector("#findings li.finding .next a").click()`),
		chromedp.WaitReady(chromedp.CSS("article#runbook")))
	if err != nil {
		t.Fatal(err)
	}
	section, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + " " + (document.getElementById("kdcdown") || {}).textContent`))
	if err != nil || section != "#kdcdown KDCDown" {
		t.Errorf("the runbook link lands on %q (%v)", section, err)
	}
	if p.Injected != 0 {
		t.Errorf("%d img/script elements", p.Injected)
	}
	if pr := problems(); len(pr) > 0 {
		t.Errorf("the pages logged: %v", pr)
	}
}
