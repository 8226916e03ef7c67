package capacity

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestWakeupsPerRequest measures why the estimate taken at a light load
// falls below the saturated ceiling (docs/metrics.md, "Capacity"): the
// KDC's CPU per request and the times the kernel put it on a CPU per
// request (schedstat), paced (one request every 4 ms), closed loop (one
// client back to back) and flooded (16 clients). The premise is asserted
// from the kernel's counts: a paced or one-client KDC wakes once per
// request, a flooded one serves many per wake-up. The CPU figures are
// logged (docs/bench.md has them): KRB5X_KDC_CPU=N pins the KDC to CPU
// N; run the test itself on another (taskset -c).
func TestWakeupsPerRequest(t *testing.T) {
	testutil.Alone(t) // a busy neighbour keeps the flood from filling the KDC's queue
	r := realmtest.Realm(t, realm.Options{Users: 5, Services: 2, NoKadmind: true, DisableLastSuccess: true})
	pid := r.KDCPids()[0]
	if c := os.Getenv("KRB5X_KDC_CPU"); c != "" {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", c, strconv.Itoa(pid)).CombinedOutput(); err != nil {
			t.Fatalf("taskset: %v: %s", err, out)
		}
	}
	measure := func(name string, load func() int) (cpu, wakeups float64) {
		c0, s0, err := testutil.Schedstat(pid)
		if err != nil {
			t.Fatal(err)
		}
		n := load()
		c1, s1, err := testutil.Schedstat(pid)
		if err != nil {
			t.Fatal(err)
		}
		cpu, wakeups = (c1-c0).Seconds()/float64(n), float64(s1-s0)/float64(n)
		t.Logf("%-21s %5d replies: %5.1f µs CPU a request, on a CPU %.2f times a request", name, n, cpu*1e6, wakeups)
		return cpu, wakeups
	}
	paced, pacedW := measure("paced, 4 ms apart", func() int { return pacedLoad(t, r, 4*time.Millisecond, 2*time.Second) })
	closed, closedW := measure("closed loop, 1 client", func() int { return realmtest.PreauthLoad(t, r, 1, 1500) })
	flood, floodW := measure("flood, 16 clients", func() int { return realmtest.PreauthLoad(t, r, 16, 200) })
	if pacedW < 0.8 || closedW < 0.8 || floodW > 0.5 {
		t.Errorf("on a CPU %.2f, %.2f and %.2f times a request paced, closed loop and flooded: want at least 0.8, 0.8 and at most 0.5", pacedW, closedW, floodW)
	}
	if closedW > floodW {
		t.Logf("per wake-up (closed loop against flood, the cache alike hot): %.0f µs; the idle gap adds %.0f µs a request (paced against closed loop)",
			(closed-flood)/(closedW-floodW)*1e6, (paced-closed)*1e6)
	}
}
