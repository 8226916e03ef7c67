package load

import (
	"context"
	"math"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// nthAddr hands the n-th user the n-th address of the --source prefix,
// wrapping inside it, so that no request leaves the prefix the operator
// named.
func TestNthAddr(t *testing.T) {
	p := netip.MustParsePrefix("127.0.1.4/30")
	want := []string{"127.0.1.4", "127.0.1.5", "127.0.1.6", "127.0.1.7", "127.0.1.4", "127.0.1.5"}
	for n, w := range want {
		if a := nthAddr(p, n); a.String() != w {
			t.Errorf("nthAddr(%s, %d) = %s, want %s", p, n, a, w)
		}
	}
	one := netip.MustParsePrefix("127.0.0.2/32")
	if a := nthAddr(one, 7); a.String() != "127.0.0.2" {
		t.Errorf("nthAddr(%s, 7) = %s, want the address itself", one, a)
	}
	if a := nthAddr(netip.Prefix{}, 3); a.IsValid() {
		t.Errorf("no source: %s, want the kernel's choice (no address)", a)
	}
}

// A Poisson load's logins start at independent random times: the gaps
// between starts are exponential (their coefficient of variation, 1 for
// an exponential distribution, 0 for fixed ticks), their mean the rate's,
// and a login still running does not hold back the next.
func TestPoissonArrivals(t *testing.T) {
	const n, every = 400, 5 * time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	inFlight, most := 0, 0
	got := poisson(context.Background(), every, n, func(int) {
		mu.Lock()
		starts = append(starts, time.Now())
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // 4 gaps on average
		mu.Lock()
		inFlight--
		mu.Unlock()
	})
	if got != n || len(starts) != n {
		t.Fatalf("%d logins started, %d ran; want %d", got, len(starts), n)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	var sum, sq float64
	for i := 1; i < n; i++ {
		g := starts[i].Sub(starts[i-1]).Seconds()
		sum += g
		sq += g * g
	}
	mean := sum / (n - 1)
	cv := math.Sqrt(sq/(n-1)-mean*mean) / mean
	t.Logf("%d gaps: mean %.2f ms, coefficient of variation %.2f; at most %d logins at once", n-1, mean*1e3, cv, most)
	if mean < 0.7*every.Seconds() || mean > 1.3*every.Seconds() {
		t.Errorf("mean gap %.2f ms, want about %v", mean*1e3, every)
	}
	if cv < 0.75 || cv > 1.25 {
		t.Errorf("coefficient of variation of the gaps %.2f, want about 1 (exponential)", cv)
	}
	if most < 4 {
		t.Errorf("at most %d logins at once, each lasting 4 mean gaps: the schedule waits for them", most)
	}
}
