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

// e2e is what every end-to-end alert test starts from: its deadline, its
// directory and the shared krb5-exporter binary; it starts the
// exporters, loads and Prometheus configurations of the test.
type e2e struct {
	t         *testing.T
	ctx       context.Context
	tmp       string
	bin       string
	exporters int
}

// newE2E bounds the test by budget (the context is cancelled once it
// ends or its cleanups have run).
func newE2E(t *testing.T, budget time.Duration) *e2e {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancel)
	return &e2e{t: t, ctx: ctx, tmp: t.TempDir(), bin: exporterBinary(t)}
}

// needAlertmanager skips an end-to-end test under -short and returns the
// prometheus and alertmanager binaries; a missing MIT krb5, prometheus
// or alertmanager fails it.
func needAlertmanager(t *testing.T) (promBin, amBin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: real KDC, exporter, Prometheus and Alertmanager")
	}
	realmtest.RequireMIT(t)
	return testutil.RequireProgram(t, "prometheus"), testutil.RequireProgram(t, "prometheus-alertmanager", "alertmanager")
}

// exporter is a krb5-exporter a test runs: its address and output.
type exporter struct {
	addr string
	log  *testutil.LockedBuffer
}

// exporter writes config as a configuration file and runs krb5-exporter
// with it and args (and a position file of its own) for the rest of the
// test; it returns once the exporter is ready.
func (e *e2e) exporter(config string, args ...string) exporter {
	e.t.Helper()
	n := e.exporters
	e.exporters++
	cfg := filepath.Join(e.tmp, fmt.Sprintf("exporter%d.yml", n))
	writeFile(e.t, cfg, config)
	x := exporter{addr: freeAddr(e.t), log: &testutil.LockedBuffer{}}
	start(e.t, x.log, e.bin, append([]string{"--web.listen-address", x.addr, "--config.file", cfg,
		"--kdclog.position-file", filepath.Join(e.tmp, fmt.Sprintf("positions%d.json", n))}, args...)...)
	waitHTTP(e.t, e.ctx, "http://"+x.addr+"/-/ready", x.log)
	return x
}

// logConfig is an exporter configuration following r's KDC log from its
// beginning, the harness's readiness principal its probe principal.
func logConfig(r *realm.Realm) string {
	return fmt.Sprintf("logs:\n  - {path: %s, type: kdc, start_at: beginning, probe_principals: [%s]}\n", r.KDCLog, realm.ReadyPrincipal)
}

// load runs `krb5-exporter realm load` with args against r in the
// background for the rest of the test; its output is logged if the test
// fails.
func (e *e2e) load(r *realm.Realm, args ...string) {
	e.t.Helper()
	t := e.t
	cmd := exec.CommandContext(e.ctx, e.bin, append([]string{"realm", "load", "--dir", r.Dir}, args...)...)
	cmd.Env = append(os.Environ(), r.Env()...)
	out := &testutil.LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("realm load %v: %s", args, out.String())
		}
	})
	startCmd(t, out, cmd)
}

// scrapeConfig is the Prometheus configuration scraping the exporters as
// job krb5, with realmName as their realm label (none if empty), and
// alerting the Alertmanager at URL am (none if empty).
func scrapeConfig(am, realmName string, exporters ...exporter) string {
	var targets []string
	for _, x := range exporters {
		targets = append(targets, fmt.Sprintf("%q", x.addr))
	}
	labels := ""
	if realmName != "" {
		labels = fmt.Sprintf(", labels: {realm: %q}", realmName)
	}
	alerting := ""
	if am != "" {
		alerting = fmt.Sprintf("alerting:\n  alertmanagers:\n    - static_configs: [{targets: [%q]}]\n", strings.TrimPrefix(am, "http://"))
	}
	return alerting + fmt.Sprintf("scrape_configs:\n  - job_name: krb5\n    static_configs: [{targets: [%s]%s}]\n", strings.Join(targets, ", "), labels)
}

// lockBPF holds /tmp/krb5x-bpf.lock for the rest of the test: the tests
// that load a BPF program (the kdcservice collector) take it.
func lockBPF(t *testing.T) { lockFile(t, "/tmp/krb5x-bpf.lock") }

// lockQuiet holds /tmp/krb5x-bpf.lock, then /tmp/krb5x-quiet.lock, for
// the rest of the test: a test that loads a BPF program and needs the
// machine to itself takes both, in the order the shared development
// machine's other measurements take them (the other order deadlocks
// against them).
func lockQuiet(t *testing.T) {
	lockBPF(t)
	lockFile(t, "/tmp/krb5x-quiet.lock")
}

// lockFile holds an exclusive flock of path for the rest of the test.
func lockFile(t *testing.T, path string) {
	t.Helper()
	lock, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
}

// delayFsyncs holds each fsync and fdatasync of r's KDC d before it runs,
// as a slow disk would, for the rest of the test (strace's fault
// injection, filtered by seccomp: the KDC's other system calls run
// untraced).
func delayFsyncs(t *testing.T, e *e2e, r *realm.Realm, d time.Duration) {
	t.Helper()
	testutil.StraceSyncs(t, r.KDCPids()[0], d)
}

// requireTracing skips the test (fails it in CI) where the exporter's
// kdcservice collector could not load its BPF program.
func requireTracing(t *testing.T, ctx context.Context, prom string, x exporter) {
	t.Helper()
	waitQuery(t, ctx, prom, `krb5_kdc_service_tracing_up`)
	for deadline := time.Now().Add(10 * time.Second); ; sleep(ctx, 500*time.Millisecond) {
		if n, _ := instantQuery(ctx, prom, `krb5_kdc_service_tracing_up == 1`); n > 0 {
			return
		}
		if time.Now().Before(deadline) {
			continue
		}
		if testutil.InCI() {
			t.Fatalf("the kdcservice collector is not up: %s", x.log.String())
		}
		t.Skip("the kdcservice collector cannot load its BPF program here")
	}
}

// sample is one series of an instant query's answer.
type sample struct {
	Metric map[string]string
	Value  float64
}

// vector runs the instant query expr; an answer that fails is the test's
// failure.
func vector(t *testing.T, ctx context.Context, prom, expr string) []sample {
	t.Helper()
	var resp struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, prom+"/api/v1/query?query="+url.QueryEscape(expr), &resp); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	var out []sample
	for _, r := range resp.Data.Result {
		v, err := strconv.ParseFloat(fmt.Sprint(r.Value[1]), 64)
		if err != nil {
			t.Fatalf("%s: value %v: %v", expr, r.Value[1], err)
		}
		out = append(out, sample{Metric: r.Metric, Value: v})
	}
	return out
}
