package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// TestDemo runs `make demo`'s script as a user does, with a small realm,
// a 1 s interval and a copy of alerts/ where the for: of KDCDown and
// KDCErrorBudgetBurnFast is 5s, and DEMO_FAULT=kdc-stopped: the demo's
// Prometheus loads every rule group of alerts/ and evaluates every rule
// without error, the recording rules return data from the demo's load
// (the replication ones need DEMO_REPLICA), the fault, injected on the
// documented signal, makes KDCDown fire, and KDCErrorBudgetBurnFast
// through the probes' refusals (a stopped KDC logs nothing), and the
// landing page (in chromium) say krb5kdc is not running; Ctrl-C (SIGINT
// to the process group) leaves no process and no directory behind.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo: a realm, a load, the exporter and Prometheus")
	}
	t.Parallel()
	realmtest.RequireMIT(t)
	testutil.RequireProgram(t, "prometheus")
	ctx, problems := browser(t)
	tmp := t.TempDir()
	alerts := filepath.Join(tmp, "alerts")
	groups := shortenedRules(t, alerts, "KDCDown", "KDCErrorBudgetBurnFast")
	dir := filepath.Join(tmp, "demo")
	listen, plisten := realmtest.Addr(t), realmtest.Addr(t)
	cmd := exec.Command("../../scripts/demo.sh", binary)
	cmd.Env = append(os.Environ(), "DEMO_DIR="+dir, "LISTEN="+listen, "PROMETHEUS_LISTEN="+plisten,
		"DEMO_ALERTS_DIR="+alerts, "DEMO_INTERVAL=1s", "DEMO_FAULT=kdc-stopped", "DEMO_FAULT_AFTER=600",
		"DEMO_REALM_ARGS=--users 5 --services 2 --fillers=-1")
	out := &testutil.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // Ctrl-C
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Errorf("the demo did not stop within 30 s of Ctrl-C:\n%s", out.String())
			<-done
		}
	}
	t.Cleanup(stop)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\ndemo output:\n%s", append(args, out.String())...)
	}
	prom := "http://" + plisten

	// Every group of alerts/ loaded, every rule evaluated without error.
	var rules []promRule
	testutil.Eventually(t, 60*time.Second, "Prometheus to evaluate every rule group", func() bool {
		var res struct {
			Groups []struct {
				Name  string
				Rules []promRule
			}
		}
		if promGet(prom+"/api/v1/rules", &res) != nil || len(res.Groups) != len(groups) {
			return false
		}
		rules = rules[:0]
		for _, g := range res.Groups {
			for _, r := range g.Rules {
				if r.LastEvaluation.Year() < 2000 {
					return false // not evaluated yet
				}
				rules = append(rules, r)
			}
		}
		return true
	})
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %q: %s", r.Name, r.Health, r.LastError)
		}
	}

	// The script made its directory, the user's alone.
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("the demo's directory: %v, want a directory of mode 0700 (%v)", fi.Mode(), err)
	}

	// Every recording rule returns data from the load and the probes.
	// (testutil.Eventually would not say which.)
	var empty []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		empty = empty[:0]
		for _, r := range rules {
			// The demo has no replica (iprop), one KDC in its realm (no N-1
			// headroom) and no bench run beside it (no capacity against the
			// bench).
			if r.Type != "recording" || strings.HasPrefix(r.Name, "krb5:iprop_") ||
				r.Name == "realm:krb5_kdc_capacity_n_minus_1_utilization:ratio5m" || r.Name == "instance_request:krb5_kdc_capacity_to_bench:ratio" ||
				os.Geteuid() != 0 && strings.Contains(r.Name, "krb5_kdc_request_") {
				// The demo traces the KDC (--collector.kdcservice) as root only.
				continue
			}
			var res struct{ Result []json.RawMessage }
			if promGet(prom+"/api/v1/query?query="+url.QueryEscape(r.Name), &res) != nil || len(res.Result) == 0 {
				empty = append(empty, r.Name)
			}
		}
		if len(empty) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(empty) > 0 {
		fail("recording rules without data: %v", empty)
	}
	var res struct{ Result []json.RawMessage }
	q := `sum(instance_request_status:krb5_kdc_requests:rate5m{status="ISSUE"}) > 0`
	testutil.Eventually(t, 30*time.Second, "the load's logins in Prometheus", func() bool {
		return promGet(prom+"/api/v1/query?query="+url.QueryEscape(q), &res) == nil && len(res.Result) == 1
	})

	// The fault, now: KDCDown and the error budget's alert fire; the
	// landing page says why.
	b, err := os.ReadFile(filepath.Join(dir, "fault.pid"))
	if err != nil {
		fail("%v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		fail("the fault's process: %v", err)
	}
	firing := map[string]bool{}
	testutil.Eventually(t, 60*time.Second, "KDCDown and KDCErrorBudgetBurnFast to fire", func() bool {
		var res struct {
			Alerts []struct {
				Labels map[string]string
				State  string
			}
		}
		if promGet(prom+"/api/v1/alerts", &res) != nil {
			return false
		}
		for _, a := range res.Alerts {
			if a.State == "firing" {
				firing[a.Labels["alertname"]] = true
			}
		}
		return firing["KDCDown"] && firing["KDCErrorBudgetBurnFast"]
	})
	var verdict string
	testutil.Eventually(t, 30*time.Second, "the landing page to say krb5kdc is not running (it says: "+verdict+")", func() bool {
		if chromedp.Do(ctx, chromedp.Navigate("http://"+listen+"/"), chromedp.WaitReady(chromedp.CSS("#verdict"))) != nil {
			return false
		}
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#verdict").textContent`))
		verdict = v
		return err == nil && strings.Contains(v, "krb5kdc is not running")
	})
	if p := problems(); len(p) > 0 {
		t.Errorf("the landing page logged: %v", p)
	}

	// Ctrl-C: nothing left.
	stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the demo's directory is still there: %v", err)
	}
	if left := groupMembers(cmd.Process.Pid); len(left) > 0 {
		t.Errorf("processes of the demo left after Ctrl-C: %v", left)
	}
}

// TestDemoRefusesPlantedDirectory: the demo removes its directory at the
// start, so a DEMO_DIR that is a symbolic link (to a directory holding a
// file), another user's directory or not a directory at all is refused
// with exit 2 and a message saying so, before anything is started or
// removed: the file behind it survives.
func TestDemoRefusesPlantedDirectory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, demo, victim string)
		want  string
	}{
		{"symbolic link", func(t *testing.T, demo, victim string) {
			if err := os.Symlink(victim, demo); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"another user's directory", func(t *testing.T, demo, victim string) {
			if os.Geteuid() != 0 {
				t.Skip("giving a directory to another user needs root")
			}
			if err := os.Rename(victim, demo); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(demo, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory of"},
		{"a file", func(t *testing.T, demo, victim string) {
			if err := os.Rename(filepath.Join(victim, "keep"), demo); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			victim, demo := filepath.Join(tmp, "victim"), filepath.Join(tmp, "demo")
			if err := os.Mkdir(victim, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("keep me\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, demo, victim)
			// Bounded, and a realm up that fails at once should the
			// script go past its check.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "../../scripts/demo.sh", binary)
			cmd.Env = append(os.Environ(), "DEMO_DIR="+demo, "LISTEN="+realmtest.Addr(t), "PROMETHEUS_LISTEN="+realmtest.Addr(t),
				"DEMO_REALM_ARGS=--no-such-flag")
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), tc.want) {
				t.Errorf("demo.sh exited %d (%v), want 2 and %q:\n%s", code, err, tc.want, out)
			}
			kept := 0
			for _, f := range []string{filepath.Join(victim, "keep"), filepath.Join(demo, "keep"), demo} {
				if b, err := os.ReadFile(f); err == nil && string(b) == "keep me\n" {
					kept++
				}
			}
			if kept == 0 {
				t.Error("the planted file did not survive")
			}
		})
	}
}

type promRule struct {
	Name, Type, Health, LastError string
	LastEvaluation                time.Time
}

// promGet reads the data of a Prometheus API reply into v.
func promGet(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Status string
		Data   json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return err
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", u, env.Status)
	}
	return json.Unmarshal(env.Data, v)
}

// shortenedRules copies alerts/*.rules.yml to dir with the for: of the
// named alerts set to 5s, and returns the files' group names.
func shortenedRules(t *testing.T, dir string, alerts ...string) []string {
	t.Helper()
	files, _ := filepath.Glob("../../alerts/*.rules.yml")
	if len(files) == 0 {
		t.Fatal("no alerts/*.rules.yml")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, f := range files {
		b := string(testutil.MustRead(t, f))
		for _, a := range alerts {
			b = testutil.ShortenFor(b, a, "for", "5s")
		}
		for _, m := range regexp.MustCompile(`(?m)^  - name: (\S+)`).FindAllStringSubmatch(b, -1) {
			groups = append(groups, m[1])
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return groups
}

// groupMembers lists the processes of process group pgid.
func groupMembers(pgid int) []string {
	var left []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			left = append(left, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return left
}
