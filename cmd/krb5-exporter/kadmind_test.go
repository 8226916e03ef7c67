package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestDaemonProbesKadmind runs the binary with the configuration `realm up
// --exporter-config` writes for a realm with kadmind: its kpasswd and
// kadmin probes succeed against the real kadmind, the landing page lists
// them, /probe runs them, and a stopped kadmind reads connection_refused
// while the KDC's probes stay up. The probe principal's keys are untouched.
func TestDaemonProbesKadmind(t *testing.T) {
	t.Parallel()
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 2, Services: 1})
	before := realmtest.KeyState(t, r, r.ProbePrincipal)
	cfg := filepath.Join(t.TempDir(), "exporter.yml")
	if err := writeRealmConfig(r, cfg); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.ReplaceAll(string(b), "interval: 15s", "interval: 1s")), 0o600)
	base, _, logs := daemon(t, "--config.file", cfg, "--kdclog.position-file", filepath.Join(t.TempDir(), "positions.json"))

	waitSeries(t, base, logs, map[string]string{
		`krb5_probe_success{exchange="kpasswd_as",target="perf_test-kpasswd"}`: "1",
		`krb5_probe_success{exchange="kpasswd",target="perf_test-kpasswd"}`:    "1",
		`krb5_probe_success{exchange="kadmin_rpc",target="perf_test-kadmin"}`:  "1",
		`krb5_probe_success{exchange="as",target="perf_test-udp"}`:             "1",
	})
	page := httpGet(t, base+"/")
	for _, want := range []string{"perf_test-kpasswd", "perf_test-kadmin", `(kpasswd udp)`, `(kadmin tcp)`, "<th>kadmind</th>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the landing page lacks %q", want)
		}
	}
	kpasswd := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KpasswdPort))
	for module, target := range map[string]string{"perf_test_kpasswd": kpasswd, "perf_test_kadmin": r.KadmindAddr} {
		if body := httpGet(t, base+"/probe?module="+module+"&target="+target); !strings.Contains(body, "\nprobe_success 1\n") {
			t.Errorf("/probe of %s with %s:\n%s", target, module, body)
		}
	}

	if err := r.StopKadmind(); err != nil {
		t.Fatal(err)
	}
	waitSeries(t, base, logs, map[string]string{
		`krb5_probe_success{exchange="kpasswd",target="perf_test-kpasswd"}`:    "0",
		`krb5_probe_success{exchange="kadmin_rpc",target="perf_test-kadmin"}`:  "0",
		`krb5_probe_success{exchange="as",target="perf_test-udp"}`:             "1",
		`krb5_probe_success{exchange="kpasswd_as",target="perf_test-kpasswd"}`: "1",
	})
	for _, series := range []string{`krb5_probe_total{exchange="kadmin_rpc",result="connection_refused",target="perf_test-kadmin"}`,
		`krb5_probe_total{exchange="kpasswd",result="connection_refused",target="perf_test-kpasswd"}`} {
		found := false
		for _, line := range metricLines(t, base, "krb5_probe_total") {
			found = found || (strings.HasPrefix(line, series+" ") && !strings.HasSuffix(line, " 0"))
		}
		if !found {
			t.Errorf("%s not counted with kadmind stopped", series)
		}
	}
	if after := realmtest.KeyState(t, r, r.ProbePrincipal); after != before {
		t.Errorf("the probe principal changed:\n%s\n%s", before, after)
	}
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}
