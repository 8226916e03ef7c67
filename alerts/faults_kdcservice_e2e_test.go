package alerts

import (
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestKDCServiceFaultsEndToEnd injects the two faults that only the KDC's
// own time tells apart into a realm watched by an exporter with
// --collector.kdcservice, a real Prometheus with every rule file (each
// for: divided by faultForScale, as TestAlertFaultsEndToEnd) and
// Alertmanager with the shipped alertmanager.yml. Until its fault the KDC
// runs SCHED_FIFO, ahead of every other task, so that the machine's other
// load is no fault here (unpinned beside a loaded machine's neighbours a
// healthy KDC's AS requests waited 40-50 % of their service time for a
// CPU). A healthy stretch sends nothing; then each fault sends its own
// ticket, never the other's, and no page:
//   - a slow disk (strace holds each of the KDC's fsyncs, which it makes
//     writing a login's last_success, 20 ms): KDCServiceBlockedHigh;
//   - a crowded CPU (the KDC, an ordinary task again, pinned to CPU 0,
//     where a real-time job takes 2 ms of every 2.5, bounded in time):
//     KDCServiceRunQueueHigh (KDCRequestsQueueing too where requests
//     wait in the socket while the job runs).
//
// Each fault has a realm, exporter, Prometheus and Alertmanager of its own
// (the 5-minute windows of the shares would otherwise hold the fault
// before). The shares of the KDC's service time are logged when each
// ticket comes, and the table of what each fault sent. It compares loads
// on the machine's CPUs and loads a BPF program: it runs alone
// (make test-faults), under /tmp/krb5x-bpf.lock and /tmp/krb5x-quiet.lock.
func TestKDCServiceFaultsEndToEnd(t *testing.T) {
	// 2 minutes of faults that take a CPU: kept out of make test, run by
	// make test-faults (in .ci/run, after make test).
	if os.Getenv("KRB5X_FAULTS_TEST") == "" {
		t.Skip("make test-faults runs it (KRB5X_FAULTS_TEST=1): a slow disk and a crowded CPU through Prometheus and Alertmanager, as root, about 2 min")
	}
	testutil.Alone(t)
	promBin, amBin := needAlertmanager(t)
	for _, p := range []string{"strace", "taskset", "chrt", "perl"} {
		testutil.RequireProgram(t, p)
	}
	lockQuiet(t)
	faults := []serviceFault{
		{name: "slow disk (fsync +20 ms)", want: "KDCServiceBlockedHigh", not: "KDCServiceRunQueueHigh", inject: slowDisk},
		// The KDC's waits for the CPU that its service time counts are
		// those inside a request (the wait of a request for the KDC to
		// wake is queue time, before its receive): the job's bursts that
		// begin inside one.
		{name: "crowded CPU (a real-time job on the KDC's CPU)", want: "KDCServiceRunQueueHigh", not: "KDCServiceBlockedHigh", inject: crowdedCPU},
	}
	t.Run("faults", func(t *testing.T) {
		for i := range faults {
			t.Run(faults[i].want, func(t *testing.T) {
				t.Parallel()
				faults[i].run(t, promBin, amBin)
			})
		}
	})
	var table []string
	for _, f := range faults {
		table = append(table, f.table...)
	}
	t.Logf("fault | alerts fired | notifications (receiver status [alert{instance target}=status]):\n%s", strings.Join(table, "\n"))
}

// serviceFault is one fault of TestKDCServiceFaultsEndToEnd: inject must
// send alert want and never not.
type serviceFault struct {
	name, want, not string
	inject          func(*testing.T, *e2e, *realm.Realm)
	table           []string // what it sent
}

// run runs the fault in a realm, exporter, Prometheus and Alertmanager of
// its own and records its lines of the fault table.
func (f *serviceFault) run(t *testing.T, promBin, amBin string) {
	fault, want, not := f.name, f.want, f.not
	e := newE2E(t, 4*time.Minute)
	begin := time.Now()
	// last_success written: each login the KDC answers with a ticket
	// makes it fsync its database.
	r := realmtest.Realm(t, realm.Options{Users: 3, Services: 1, Fillers: -1, NoKadmind: true})
	kdcPolicy(t, r, "-f", "1")
	am, hook, _ := startAlertmanager(t, e.ctx, amBin, e.tmp, r.Realm)
	x := e.exporter("modules:\n"+probeModule(r, "udp", 2*time.Second)+fmt.Sprintf(`probes:
  - {name: kdc, address: "%s", module: udp, interval: 1s}
`, r.KDCAddr)+logConfig(r),
		"--collector.kdcservice", "--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf,
		"--no-collector.replication")
	w := watchFaults(t, e.ctx, promBin, e.tmp, am, hook, x, r.Realm)
	requireTracing(t, e.ctx, w.prom, x)
	waitQuery(t, e.ctx, w.prom, `krb5_probe_success{exchange="tgs"} == 1`)
	t.Logf("realm, exporter, Prometheus and Alertmanager ready after %.1fs", time.Since(begin).Seconds())
	w.healthy()
	t.Logf("healthy: %s", serviceShares(t, w, time.Since(begin)))

	mark := w.mark()
	injected := time.Now()
	f.inject(t, e, r)
	deadline := time.Now().Add(150 * time.Second)
	for !fired(hook.since(mark.sent), want) {
		if time.Now().After(deadline) || e.ctx.Err() != nil {
			t.Fatalf("%s: no %s ticket within 150s (%s); sent: %v", fault, want, serviceShares(t, w, time.Since(injected)), hook.since(mark.sent))
		}
		sleep(e.ctx, 500*time.Millisecond)
	}
	t.Logf("%s: %s sent after %.0fs; %s", fault, want, time.Since(injected).Seconds(), serviceShares(t, w, time.Since(injected)))
	sent := w.settle(fault, mark)
	t.Logf("%s, the whole fault: %s", fault, serviceShares(t, w, time.Since(injected)))
	if s := alertState(t, e.ctx, w.prom, want); s != "firing" {
		t.Errorf("%s: %s %q at the end, want firing still", fault, want, s)
	}
	if fired(sent, not) || alertState(t, e.ctx, w.prom, not) != "" {
		t.Errorf("%s: %s %s as well: %v", fault, not, alertState(t, e.ctx, w.prom, not), sent)
	}
	for _, n := range sent {
		if strings.HasPrefix(n.Receiver, "pager") {
			t.Errorf("%s: paged: %v", fault, n)
		}
	}
	f.table = w.table
}

// kdcPolicy sets the scheduling policy of r's KDC processes' threads
// (chrt's: "-f" with priority "1" for SCHED_FIFO, "-o" with "0" for an
// ordinary task).
func kdcPolicy(t *testing.T, r *realm.Realm, policy, priority string) {
	t.Helper()
	for _, p := range r.KDCPids() {
		if out, err := exec.Command("chrt", "-a", policy, "-p", priority, strconv.Itoa(p)).CombinedOutput(); err != nil {
			t.Fatalf("chrt: %v %s", err, out)
		}
	}
}

// fired tells whether sent holds alert firing.
func fired(sent []notification, alert string) bool {
	for _, n := range sent {
		for _, a := range n.Alerts {
			if a.Labels["alertname"] == alert && a.Status == "firing" {
				return true
			}
		}
	}
	return false
}

// serviceShares is the split of the KDC's service time by request type,
// and the mean service time, over the last window (whole seconds).
func serviceShares(t *testing.T, w *faultWatch, window time.Duration) string {
	t.Helper()
	byRequest := map[string][]string{}
	over := fmt.Sprintf("[%ds]", int(window.Seconds()))
	for _, q := range []string{
		`sum by (request, state) (increase(krb5_kdc_request_service_split_seconds_total` + over + `))
		/ on (request) group_left () sum by (request) (increase(krb5_kdc_request_service_split_seconds_total` + over + `))`,
		`sum by (request) (increase(krb5_kdc_request_service_seconds_sum` + over + `))
		/ sum by (request) (increase(krb5_kdc_request_service_seconds_count` + over + `))`,
	} {
		for _, r := range vector(t, w.ctx, w.prom, q) {
			if math.IsNaN(r.Value) { // no request of the type in 5 minutes
				continue
			}
			s := fmt.Sprintf("mean %.2f ms", 1000*r.Value)
			if state, ok := r.Metric["state"]; ok {
				s = fmt.Sprintf("%s %.2f", state, r.Value)
			}
			byRequest[r.Metric["request"]] = append(byRequest[r.Metric["request"]], s)
		}
	}
	var out []string
	for _, req := range slices.Sorted(maps.Keys(byRequest)) {
		slices.Sort(byRequest[req])
		out = append(out, req+": "+strings.Join(byRequest[req], ", "))
	}
	return fmt.Sprintf("service time over %s: %s", window.Round(time.Second), strings.Join(out, "; "))
}

// slowDisk delays each of the KDC's fsyncs 20 ms for the rest of the test.
func slowDisk(t *testing.T, e *e2e, r *realm.Realm) { delayFsyncs(t, e, r, 20*time.Millisecond) }

// crowdedCPU makes the KDC an ordinary task again (nice 0), pins it to
// CPU 0 and starts a real-time job there: one process at SCHED_FIFO 1,
// pinned to CPU 0, busy hogBusy then asleep hogGap, over and over (ending
// by itself after 4 minutes at the latest). A request that has started
// waits for the end of each burst that begins inside it: the KDC's waits
// for the CPU inside its requests come from the job's own clock, whatever
// else the machine runs (busy loops of its own class were a fault that
// EEVDF let a woken KDC jump, unlike a real-time task). The gap is
// shorter than the CPU time of a login's AS request (a SPAKE exchange and
// its last_success write), so that nearly each is cut by a burst.
func crowdedCPU(t *testing.T, e *e2e, r *realm.Realm) {
	t.Helper()
	kdcPolicy(t, r, "-o", "0")
	for _, p := range r.KDCPids() {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", strconv.Itoa(p)).CombinedOutput(); err != nil {
			t.Fatalf("taskset: %v %s", err, out)
		}
	}
	cmd := exec.CommandContext(e.ctx, "chrt", "-f", "1", "taskset", "-c", "0", "perl", "-MTime::HiRes=time,sleep", "-e", hogScript,
		strconv.FormatFloat(hogBusy.Seconds(), 'f', -1, 64), strconv.FormatFloat(hogGap.Seconds(), 'f', -1, 64), "240")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	t.Cleanup(func() {
		ran, _, err := testutil.Schedstat(cmd.Process.Pid)
		cmd.Process.Kill()
		cmd.Wait()
		if err == nil {
			t.Logf("the real-time job ran %.0f%% of CPU 0 over %.0fs", 100*ran.Seconds()/time.Since(began).Seconds(), time.Since(began).Seconds())
		}
	})
}

// The real-time job of crowdedCPU: busy hogBusy, asleep hogGap.
const (
	hogBusy   = 2 * time.Millisecond
	hogGap    = 500 * time.Microsecond
	hogScript = `my ($busy, $gap, $bound) = @ARGV; my $end = time + $bound;
while (time < $end) { my $t = time + $busy; 1 while time < $t; sleep $gap; }`
)
