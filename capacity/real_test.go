package capacity

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/collector"
	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/kdclog"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// daemon is the daemon's registry for one harness realm, wired as
// serve.go wires it: host collectors and the log collector sharing one
// worker index. It returns the registry and a function that waits until
// the log collector has counted n AS and TGS lines in all.
func daemon(t *testing.T, r *realm.Realm, kdcservice bool) (*prometheus.Registry, *kdcproc.Workers, func(n float64)) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := collector.DefaultConfig()
	cfg.KDCPidFile = r.KDCPidFile
	cfg.KadmindPidFile = r.KadmindPidFile
	cfg.KpropdPidFile = filepath.Join(r.Dir, "kpropd.pid")
	cfg.KDCConfPath, cfg.Krb5ConfPath = r.KDCConf, r.Krb5Conf
	cfg.Identity.SystemdDir = filepath.Join(r.Dir, "no-systemd")
	cfg.KDCService = kdcservice
	workers, err := kdcproc.NewWorkers("/proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workers = workers
	host, err := collector.New(log.NewNopLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	reg.MustRegister(host)
	logs, err := kdclog.NewManager(log.NewNopLogger(), reg, kdclog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	logs.SetWorkerIndex(workers)
	if err := logs.ApplyConfig(&config.Config{Logs: []config.LogSource{{Path: r.KDCLog, Type: "kdc", StartAt: "end"}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); logs.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; logs.Close() })
	<-logs.Ready()
	counted := func(n float64) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, "the log's request lines counted", func() bool {
			s := testutil.Gather(t, reg)
			return s.Sum(mRequests) >= n
		})
	}
	return reg, workers, counted
}

// TestRealKDCEstimate: against a real krb5kdc, unknown-principal AS
// requests (one log line each): no estimate before the minimum of
// requests, one after; and it is the rate the KDC's own CPU time per
// request allows, computed here from the kernel's count of its CPU time
// (/proc/PID/stat) and the replies the test received, within 10 % (the
// daemon counts the log's lines and clock ticks at its scrapes).
func TestRealKDCEstimate(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{Users: 5, Services: 2, NoKadmind: true})
	reg, workers, counted := daemon(t, r, false)
	c := &clock{t: time.Now()}
	g := New(reg, Config{Now: c.now, CPUs: AffinityCPUs(workers.PIDs)})
	pid := r.KDCPids()[0]
	cpu0, err := testutil.ProcCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Gather(t, g)
	replies := realmtest.PreauthLoad(t, r, 2, 50)
	counted(float64(replies))
	c.t = c.t.Add(10 * time.Second)
	if v, _, ok := capacityOf(t, g, "as"); ok {
		t.Fatalf("an estimate (%g/s) from %d requests, below the minimum of %d", v, replies, DefaultMinRequests)
	}
	replies += realmtest.PreauthLoad(t, r, 2, 3000)
	counted(float64(replies))
	cpu1, err := testutil.ProcCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(10 * time.Second)
	v, src, ok := capacityOf(t, g, "as")
	if !ok || src != SourceProc {
		t.Fatalf("no estimate from the proc source after %d requests", replies)
	}
	want := float64(replies) / (cpu1 - cpu0).Seconds() // one process: 1 / CPU per request
	t.Logf("%d AS requests, KDC CPU %v: estimate %.0f/s, 1 / CPU per request %.0f/s", replies, cpu1-cpu0, v, want)
	if v < 0.9*want || v > 1.1*want {
		t.Errorf("estimate %.0f/s, want %.0f/s ±10 %%", v, want)
	}
}

// TestRealKDCSlowDisk: MIT kinit logins against a KDC writing
// last_success, with the kdcservice collector: under strace alone, then
// with each fsync delayed 20 ms (the KDC blocked, as on a slow disk), the
// estimate falls by the delays, as the model says: one process serving
// one request at a time, each request blocked 20 ms more per sync. Run
// under flock /tmp/krb5x-bpf.lock.
func TestRealKDCSlowDisk(t *testing.T) {
	testutil.RequireProgram(t, "strace", "kinit", "kvno")
	r := realmtest.Realm(t, realm.Options{Users: 5, Services: 2, NoKadmind: true})
	reg, _, counted := daemon(t, r, true)
	if s := testutil.Gather(t, reg); s.Sum(mTracingUp) != 1 {
		if testutil.InCI() {
			t.Fatal("the kdcservice collector is not up")
		}
		t.Skip("the kdcservice collector cannot load its BPF program here")
	}
	kdc := r.KDCPids()[0]
	env := append(os.Environ(), r.Env()...)
	env = append(env, "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "cc"))
	lines := 0.0
	phase := func(inject bool) (mix, n float64, syncs int) {
		var delay time.Duration
		if inject {
			delay = 20 * time.Millisecond
		}
		stop := testutil.StraceSyncs(t, kdc, delay)
		c := &clock{t: time.Now()}
		g := New(reg, Config{Now: c.now, MinRequests: 20})
		testutil.Gather(t, g)
		for i := range 15 {
			for _, cmd := range [][]string{{"kinit", "-k", "-t", r.UserKeytab, r.User(i%r.Opts.Users + 1)}, {"kvno", r.Service(1), r.Service(2)}} {
				x := exec.Command(cmd[0], cmd[1:]...)
				x.Env = env
				if b, err := x.CombinedOutput(); err != nil {
					t.Fatalf("%s: %v %s", cmd[0], err, b)
				}
			}
		}
		lines += 15 * 4 // at least: two AS (NEEDED_PREAUTH, ISSUE) and two TGS
		counted(lines)
		c.t = c.t.Add(10 * time.Second)
		v, src, ok := capacityOf(t, g, "mix")
		if !ok || src != SourceKDCService {
			t.Fatalf("no kdcservice estimate (%v, %q)", ok, src)
		}
		n = testutil.Gather(t, g).Value(MetricWindowRequests, "request", "mix")
		return v, n, stop()
	}
	// The model: each request's own time grows by the delays it waited,
	// at least 10 ms of each 20, spread over the phase's requests. The
	// real disk's syncs vary on a shared machine: up to 3 pairs of
	// phases, one of which must show it.
	var fail string
	for pair := 1; pair <= 3; pair++ {
		plain, _, _ := phase(false)
		slow, n, syncs := phase(true)
		t.Logf("pair %d: mix capacity %.0f/s under strace alone, %.0f/s with %d fsyncs delayed 20 ms over %.0f requests", pair, plain, slow, syncs, n)
		if syncs < 10 {
			t.Fatalf("strace saw %d syncs in 15 logins with last_success on", syncs)
		}
		perReq := 10e-3 * float64(syncs) / n
		want := 1 / (1/plain + perReq)
		if slow <= want {
			return
		}
		fail = fmt.Sprintf("capacity %.0f/s with fsync delayed, %.0f/s without: want at most %.0f/s (%.2f ms more per request)", slow, plain, want, perReq*1e3)
		t.Logf("pair %d: %s", pair, fail)
	}
	t.Error(fail)
}
