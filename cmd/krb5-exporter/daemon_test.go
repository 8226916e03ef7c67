package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestDaemonAgainstRealm runs the binary as `make demo` does, against a
// real KDC, and checks that each part of the daemon reports: the host
// collectors see krb5kdc, the probes log in, and the log collector counts
// a login made by a real MIT client.
func TestDaemonAgainstRealm(t *testing.T) {
	t.Parallel()
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 2, Services: 1, NoKadmind: true})
	cfg := filepath.Join(t.TempDir(), "exporter.yml")
	if err := writeRealmConfig(r, cfg); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.ReplaceAll(string(b), "interval: 15s", "interval: 1s")), 0o600)

	base, _, logs := daemon(t, "--config.file", cfg,
		"--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf,
		"--kdclog.position-file", filepath.Join(t.TempDir(), "positions.json"))

	kinit := exec.Command("kinit", "-k", "-t", r.UserKeytab, r.User(1))
	kinit.Env = append(os.Environ(), r.Env()...)
	if out, err := kinit.CombinedOutput(); err != nil {
		t.Fatalf("kinit: %v %s", err, out)
	}

	want := map[string]string{
		`krb5_process_up{program="krb5kdc"}`:                        "1",
		`krb5_probe_success{exchange="as",target="perf_test-udp"}`:  "1",
		`krb5_probe_success{exchange="tgs",target="perf_test-tcp"}`: "1",
		`krb5_kdc_requests_total{request="as",status="ISSUE"}`:      "1",
		// A single-process KDC answers as worker 0.
		`krb5_kdc_worker_requests_total{request="as",status="ISSUE",worker="0"}`: "1",
		`krb5_kdcconf_tcp_listen_backlog`:                                        "5",
	}
	if os.Getenv("GOGC") == "" {
		want["go_gc_gogc_percent"] = strconv.Itoa(daemonGOGC) // memory.go
	}
	waitSeries(t, base, logs, want)

	// /probe works against the realm's KDC, which realm up listed in the
	// module's allowed_kdcs, and refuses any other target.
	for target, want := range map[string]int{r.KDCAddr: http.StatusOK, "127.0.0.1:88": http.StatusForbidden} {
		resp, err := http.Get(base + "/probe?module=perf_test&target=" + target)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == http.StatusOK && !strings.Contains(string(body), "probe_success 1")) {
			t.Errorf("/probe of %s: %d, want %d:\n%s", target, resp.StatusCode, want, body)
		}
	}
}
