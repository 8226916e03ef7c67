package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/prober"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestRealmUpTrust: realm up --trust starts two realms with a two-way
// trust that MIT's kvno walks with the printed environment; the exporter
// configuration it writes checks, and the daemon run with it probes the
// trust (both hops succeed in /metrics, the landing page in chromium
// lists the trust's row with both hops); the trusted realm's files are its
// owner's alone; realm down stops and removes both realms.
func TestRealmUpTrust(t *testing.T) {
	t.Parallel()
	realmtest.RequireMIT(t)
	dir := filepath.Join(t.TempDir(), "realm")
	cfg := filepath.Join(t.TempDir(), "exporter.yml")
	out, stderr, code := exporter(t, "realm", "up", "--dir", dir, "--trust", "PARTNER.TEST", "--users=1", "--services=1",
		"--fillers=-1", "--no-kadmind", "--exporter-config", cfg)
	if code != 0 {
		t.Fatalf("realm up --trust: %d %s", code, stderr)
	}
	t.Cleanup(func() { exporter(t, "realm", "down", "--dir", dir) })
	a, err := realm.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := a.Trusted
	if b == nil || b.Realm != "PARTNER.TEST" || len(b.KDCPids()) == 0 {
		t.Fatalf("no running trusted realm after realm up --trust: %+v\n%s", b, out)
	}
	if !strings.Contains(out, "kvno "+b.Service(1)) {
		t.Errorf("realm up does not say how to try the trust:\n%s", out)
	}

	// The oracle: MIT's client walks the trust with the printed profile.
	env := append(os.Environ(), a.Env()...)
	for _, args := range [][]string{{"kinit", "-k", "-t", a.ProbeKeytab, a.ProbePrincipal}, {"kvno", b.Service(1)}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", args, err, out)
		}
	}
	// The trust's keys are in the databases, under the realm's directory.
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		switch {
		case err != nil:
			t.Error(err)
		case fi.IsDir() && fi.Mode().Perm() != 0o700:
			t.Errorf("%s: mode %04o, want 0700", p, fi.Mode().Perm())
		case strings.HasPrefix(fi.Name(), "principal") || strings.HasSuffix(fi.Name(), ".keytab") || fi.Name() == "stash":
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %04o, want 0600", p, fi.Mode().Perm())
			}
		}
		return nil
	})

	if out, stderr, code := exporter(t, "--config.file", cfg, "--config.check"); code != 0 {
		t.Fatalf("the written configuration does not check: %s %s", out, stderr)
	}
	text, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(string(text), "interval: 15s", "interval: 1s")), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _, logs := daemon(t, "--config.file", cfg, "--kdclog.position-file", filepath.Join(t.TempDir(), "positions.json"))
	const target = "perf_test-to-partner_test"
	testutil.Eventually(t, 30*time.Second, "the trust's probe to succeed", func() bool {
		return metric(t, base, `krb5_probe_success{exchange="remote_tgs",target="`+target+`"}`) != "" &&
			strings.HasSuffix(metric(t, base, `krb5_probe_success{exchange="remote_tgs",target="`+target+`"}`), " 1")
	})
	for _, ex := range []string{"as", "referral"} {
		if l := metric(t, base, `krb5_probe_success{exchange="`+ex+`",target="`+target+`"}`); !strings.HasSuffix(l, " 1") {
			t.Errorf("%s: %q", ex, l)
		}
	}
	if l := metric(t, base, `krb5_probe_success{exchange="as",target="partner_test-udp"}`); !strings.HasSuffix(l, " 1") {
		t.Errorf("the trusted realm's own login probe: %q", l)
	}

	ctx, problems := browser(t)
	var cell string
	testutil.Eventually(t, 30*time.Second, "the landing page to list the trust", func() bool {
		err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitReady(chromedp.CSS("#probes")))
		if err == nil {
			cell, err = chromedp.Run(ctx, chromedp.Evaluate[string](`(Array.from(document.querySelectorAll("#probes tr.probe")).
				find(tr => tr.querySelector("td.target").textContent === "`+target+`") || {querySelector: () => ({textContent: ""})}).
				querySelector("td.tgs").textContent`))
		}
		if err != nil {
			t.Fatalf("%v\n%s", err, logs.String())
		}
		return cell == "cross-realm: referral success, remote_tgs success"
	})
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged: %v", p)
	}

	pids := append(a.KDCPids(), b.KDCPids()...)
	if _, stderr, code := exporter(t, "realm", "down", "--dir", dir); code != 0 {
		t.Fatalf("realm down: %s", stderr)
	}
	for _, p := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("krb5kdc pid %d still running after realm down", p)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("realm down left %s", dir)
	}
}

// TestProbeCommandCrossRealm: `probe --module` with a cross-realm module
// rates both hops (perfdata for each), and B's KDC stopped is CRITICAL at
// the remote hop, not OK after a good login.
func TestProbeCommandCrossRealm(t *testing.T) {
	a, b := realmtest.Trusted(t, realm.Options{Users: 1, Services: 1})
	cfgFile := filepath.Join(t.TempDir(), "c.yml")
	cfg := fmt.Sprintf("modules:\n  x:\n    realm: %s\n    client: %s\n    keytab: %s\n    service: %s\n    realm_kdcs: {%s: [%q]}\n    timeout: 2s\n",
		a.Realm, a.ProbePrincipal, a.ProbeKeytab, b.Service(1), b.Realm, b.KDCAddr)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runProbe(t, "--kdc", a.KDCAddr, "--module", "x", "--config.file", cfgFile)
	if code != prober.NagiosOK || !strings.Contains(out, "service ticket of the trusted realm ") || !strings.Contains(out, " remote_tgs=") || !strings.Contains(out, " referral=") {
		t.Errorf("trust up: exit %d\n%s", code, out)
	}
	if err := b.StopKDC(); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runProbe(t, "--kdc", a.KDCAddr, "--module", "x", "--config.file", cfgFile)
	if code != prober.NagiosCritical || !strings.Contains(out, "service ticket of the trusted realm failed: connection_refused") {
		t.Errorf("trusted realm's KDC down: exit %d\n%s", code, out)
	}
}
