package alerts

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestHeadroomEndToEnd runs capacity.rules.yml (the headroom alerts'
// for: 5s) in a real Prometheus scraping a real krb5-exporter with
// --collector.kdcservice watching a harness KDC that writes last_success.
// The demo's steady load (3 logins a second, 2 tickets each) uses a few
// % of the KDC's estimated capacity: KDCHeadroomLow stays silent. Then
// the KDC's disk is made slow (strace holds each fsync 250 ms, as a
// saturated disk would) under 8 more logins a second: the KDC is blocked
// nearly all the time, its estimate falls to about 16 requests a second,
// and as the 5-minute windows (the estimate's, the rules' rate5m) fill
// with the slow disk the load passes half of it (0.29 after 90 s, 0.49
// after 150 s) and KDCHeadroomLow fires, with its real threshold (after
// 157 s in one run): a test of about 3 minutes. The kdcservice collector's BPF program is loaded under
// /tmp/krb5x-bpf.lock, which the test takes.
func TestHeadroomEndToEnd(t *testing.T) {
	promBin := needPrometheus(t)
	testutil.RequireProgram(t, "strace")
	lock, err := os.OpenFile("/tmp/krb5x-bpf.lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	phase := func(what string) { t.Logf("%.1fs: %s", time.Since(began).Seconds(), what) }
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	bin := exporterBinary(t)
	r := realmtest.Realm(t, realm.Options{Users: 6, Services: 4, Fillers: -1, NoKadmind: true})
	cfg := filepath.Join(tmp, "exporter.yml")
	writeFile(t, cfg, fmt.Sprintf("logs:\n  - {path: %s, type: kdc, start_at: beginning, probe_principals: [%s]}\n", r.KDCLog, realm.ReadyPrincipal))
	exporterAddr := freeAddr(t)
	exporterLog := &testutil.LockedBuffer{}
	start(t, exporterLog, bin, "--web.listen-address", exporterAddr, "--config.file", cfg,
		"--collector.kdcservice", "--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf)
	waitHTTP(t, ctx, "http://"+exporterAddr+"/-/ready", exporterLog)
	text := string(testutil.MustRead(t, "capacity.rules.yml"))
	for _, a := range []string{"KDCHeadroomLow", "KDCRealmNoFailoverHeadroom", "KDCCapacityFalling"} {
		text = testutil.ShortenFor(text, a, "for", "5s")
	}
	rules := filepath.Join(tmp, "capacity.rules.yml")
	writeFile(t, rules, text)
	prom, _ := startPrometheus(t, ctx, promBin, tmp, []string{rules}, fmt.Sprintf(`scrape_configs:
  - job_name: krb5
    static_configs: [{targets: ["%s"], labels: {realm: "%s"}}]`, exporterAddr, r.Realm))
	load := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append([]string{"realm", "load", "--dir", r.Dir}, args...)...)
		cmd.Env = append(os.Environ(), r.Env()...)
		out := &testutil.LockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("realm load %v: %s", args, out.String())
			}
		})
	}
	phase("realm, exporter and Prometheus up")
	if n, err := instantQuery(ctx, prom, `krb5_kdc_service_tracing_up == 1`); err != nil || n == 0 {
		waitQuery(t, ctx, prom, `krb5_kdc_service_tracing_up`)
		if n, _ := instantQuery(ctx, prom, `krb5_kdc_service_tracing_up == 1`); n == 0 {
			if testutil.InCI() {
				t.Fatalf("the kdcservice collector is not up: %s", exporterLog.String())
			}
			t.Skip("the kdcservice collector cannot load its BPF program here")
		}
	}

	// The demo's steady load.
	load("--duration", "6m")
	waitQuery(t, ctx, prom, `instance:krb5_kdc_capacity_utilization:ratio5m`)
	steady := time.Now()
	testutil.Eventually(t, 30*time.Second, "the headroom rules evaluated for 10 s of the steady load", func() bool {
		return lastEvaluation(t, ctx, prom, "krb5-headroom").After(steady.Add(10 * time.Second))
	})
	for _, a := range []string{"KDCHeadroomLow", "KDCRealmNoFailoverHeadroom", "KDCCapacityFalling"} {
		if s := alertState(t, ctx, prom, a); s != "" {
			t.Errorf("%s %s under the demo's steady load", a, s)
		}
	}
	phase("steady load evaluated: quiet")

	// A slow disk under a heavier load.
	st := exec.CommandContext(ctx, "strace", "-f", "-qq", "--seccomp-bpf", "-o", "/dev/null", "-e", "trace=fsync,fdatasync",
		"-e", "inject=fsync,fdatasync:delay_enter=250ms", "-p", strconv.Itoa(r.KDCPids()[0]))
	st.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Process.Signal(syscall.SIGINT); st.Wait() })
	load("--duration", "6m", "--rate", "8", "--tickets", "0", "--users", "6",
		"--wrong-password-every", "0", "--unknown-user-every", "0", "--weak-enctype-every", "0")
	show := func() {
		for _, e := range []string{`krb5_kdc_capacity_requests_per_second`, `krb5_kdc_capacity_window_requests`, `instance:krb5_kdc_capacity_utilization:ratio5m`,
			`instance:krb5_kdc_requests:rate5m`, `sum by (state) (rate(krb5_kdc_request_service_split_seconds_total[1m]))`} {
			var resp struct {
				Data struct {
					Result []struct {
						Metric map[string]string `json:"metric"`
						Value  []any             `json:"value"`
					} `json:"result"`
				} `json:"data"`
			}
			getJSON(ctx, prom+"/api/v1/query?query="+url.QueryEscape(e), &resp)
			for _, r := range resp.Data.Result {
				t.Logf("%s %v = %v", e, r.Metric, r.Value[1])
			}
		}
	}
	slow := time.Now()
	testutil.Eventually(t, 240*time.Second, "KDCHeadroomLow firing with the disk slow", func() bool {
		if alertState(t, ctx, prom, "KDCHeadroomLow") == "firing" {
			return true
		}
		if time.Since(slow) > 235*time.Second && !t.Failed() {
			show()
		}
		return false
	})
	phase("KDCHeadroomLow firing")
	if s := alertState(t, ctx, prom, "KDCRealmNoFailoverHeadroom"); s != "" {
		t.Errorf("KDCRealmNoFailoverHeadroom %s for a realm of one KDC", s)
	}
	if b := exporterLog.String(); strings.Contains(b, "level=error") {
		t.Logf("exporter log: %s", b)
	}
}
