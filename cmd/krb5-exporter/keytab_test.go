package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestDaemonBadKeytab: a probe module whose keytab is truncated does not
// keep the daemon from starting. It serves, the host collectors see
// krb5kdc, the log collector counts a real kinit, the module with a good
// keytab logs in, and the bad module's probe fails with result="keytab";
// one warning line names the configuration file and the module's keytab
// line, never the keytab's path; --config.check fails on it. Once the
// keytab is fixed in place and the configuration reloaded, that module
// logs in too. Loading the configuration, start read the keytabs and
// exited 1 ("configuration not reloaded, keeping the previous one").
func TestDaemonBadKeytab(t *testing.T) {
	t.Parallel()
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 2, Services: 1, NoKadmind: true})
	dir := t.TempDir()
	good, err := os.ReadFile(r.ProbeKeytab)
	if err != nil {
		t.Fatal(err)
	}
	badKeytab := filepath.Join(dir, "bad.keytab")
	if err := os.WriteFile(badKeytab, good[:len(good)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	module := func(name, kt string) string {
		return fmt.Sprintf("  %s:\n    realm: %s\n    client: %s\n    keytab: %s\n", name, r.Realm, r.ProbePrincipal, kt)
	}
	probe := func(name string) string {
		return fmt.Sprintf("  - name: %s\n    address: %s\n    module: %s\n    interval: 1s\n", name, r.KDCAddr, name)
	}
	cfg := filepath.Join(dir, "exporter.yml")
	text := "modules:\n" + module("good", r.ProbeKeytab) + module("bad", badKeytab) +
		"probes:\n" + probe("good") + probe("bad") +
		fmt.Sprintf("logs:\n  - path: %s\n    type: kdc\n    start_at: beginning\n    probe_principals: [%s]\n", r.KDCLog, r.ProbePrincipal)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	keytabLine := fmt.Sprintf("%s:9: modules.bad.keytab: ", cfg) // the bad module's keytab key

	_, stderr, code := exporter(t, "--config.file", cfg, "--config.check")
	if code == 0 {
		t.Errorf("--config.check with a truncated keytab: exit 0")
	}
	oneErrorLine(t, stderr, keytabLine)

	base, _, logs := daemon(t, "--config.file", cfg,
		"--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf,
		"--kdclog.position-file", filepath.Join(dir, "positions.json"))
	kinit := exec.Command("kinit", "-k", "-t", r.UserKeytab, r.User(1))
	kinit.Env = append(os.Environ(), r.Env()...)
	if out, err := kinit.CombinedOutput(); err != nil {
		t.Fatalf("kinit: %v %s", err, out)
	}
	waitSeries(t, base, logs, map[string]string{
		`krb5_process_up{program="krb5kdc"}`:                   "1",
		`krb5_kdc_requests_total{request="as",status="ISSUE"}`: "1",
		`krb5_probe_success{exchange="as",target="good"}`:      "1",
		`krb5_probe_success{exchange="as",target="bad"}`:       "0",
		`krb5_exporter_config_last_reload_successful`:          "1",
	})
	if n := probeTotal(t, base, "bad", "keytab"); n < 1 {
		t.Errorf(`krb5_probe_total{target="bad",result="keytab"} = %v, want > 0`, n)
	}
	var warned []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "probe keys not loaded") {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], keytabLine) || !strings.Contains(warned[0], "probe=bad") {
		t.Errorf("want one line naming %q for probe bad, got %q\nexporter log:\n%s", keytabLine, warned, logs.String())
	}
	if strings.Contains(logs.String(), badKeytab) {
		t.Errorf("the log names the keytab's path:\n%s", logs.String())
	}

	// Fixed in place (as a rotation rewrites it), then reloaded.
	if err := os.WriteFile(badKeytab, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := post(t, base+"/-/reload"); code != http.StatusOK {
		t.Errorf("reload answered %d", code)
	}
	waitSeries(t, base, logs, map[string]string{`krb5_probe_success{exchange="as",target="bad"}`: "1"})
	if _, stderr, code := exporter(t, "--config.file", cfg, "--config.check"); code != 0 {
		t.Errorf("--config.check with the fixed keytab: exit %d: %s", code, stderr)
	}
}

// waitSeries waits up to 60 s for each series to have its value.
func waitSeries(t *testing.T, base string, logs *testutil.LockedBuffer, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var missing []string
		for series, value := range want {
			name, _, _ := strings.Cut(series, "{")
			got := ""
			for _, line := range metricLines(t, base, name) {
				if strings.HasPrefix(line, series+" ") {
					got = strings.TrimPrefix(line, series+" ")
				}
			}
			if got != value {
				missing = append(missing, series+" = "+got+" (want "+value+")")
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: %v\nexporter log:\n%s", missing, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// probeTotal is krb5_probe_total of the target's AS exchanges with result.
func probeTotal(t *testing.T, base, target, result string) float64 {
	t.Helper()
	var v float64
	for _, line := range metricLines(t, base, "krb5_probe_total") {
		if strings.Contains(line, `target="`+target+`"`) && strings.Contains(line, `result="`+result+`"`) && strings.Contains(line, `exchange="as"`) {
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
		}
	}
	return v
}
