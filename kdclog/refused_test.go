package kdclog

import (
	"fmt"
	"testing"
	"time"
)

// TestRefusedClientsExact checks the gauge's count against the clients a
// sequence refused: exact up to the cap whatever the repeats, capped
// beyond, and only the window's.
func TestRefusedClientsExact(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	for _, n := range []int{0, 1, 4, 5, 6, 63, 64, 65, 200} {
		r := newRefusedClients()
		// Each client refused three times, interleaved, like retrying tools.
		for rep := range 3 {
			for i := range n {
				r.observe(fmt.Appendf(nil, "user%d@EXAMPLE.COM", i), t0.Add(time.Duration(rep)*time.Second))
			}
		}
		if got, want := r.count(t0.Add(10*time.Second)), min(n, refusedClientsCap); got != want {
			t.Errorf("%d clients refused 3 times each: count %d, want %d", n, got, want)
		}
	}

	r := newRefusedClients()
	for range 750 { // one Kerberoasting client
		r.observe([]byte("roaster@EXAMPLE.COM"), t0)
	}
	if got := r.count(t0); got != 1 {
		t.Errorf("one client refused 750 times: count %d, want 1", got)
	}
	// Window: clients refused more than 5 minutes ago no longer count; a
	// client refused again does.
	for i := range 3 {
		r.observe(fmt.Appendf(nil, "u%d", i), t0.Add(time.Minute))
	}
	r.observe([]byte("roaster@EXAMPLE.COM"), t0.Add(2*time.Minute))
	if got := r.count(t0.Add(refusedClientsWindow + time.Minute)); got != 1 {
		t.Errorf("6 minutes after the three, 4 after the roaster's last: count %d, want 1", got)
	}
	if got := r.count(t0.Add(refusedClientsWindow + 30*time.Second)); got != 4 {
		t.Errorf("5.5 minutes after: count %d, want 4", got)
	}
}

// TestRefusedClientsHostileFlood sends a million distinct names, then a
// few real clients: the set's size does not change, the count stays at
// the cap while the flood is in the window, and once it is out the few
// newer clients are counted exactly.
func TestRefusedClientsHostileFlood(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	r := newRefusedClients()
	for i := range 1_000_000 {
		r.observe(fmt.Appendf(nil, "flood%d@EXAMPLE.COM", i), t0)
	}
	if got := r.count(t0); got != refusedClientsCap {
		t.Errorf("after the flood: count %d, want %d", got, refusedClientsCap)
	}
	for i := range 3 {
		r.observe(fmt.Appendf(nil, "late%d", i), t0.Add(4*time.Minute))
	}
	if got := r.count(t0.Add(refusedClientsWindow + time.Second)); got != 3 {
		t.Errorf("flood out of the window: count %d, want the 3 later clients", got)
	}
	if r.n > refusedClientsCap {
		t.Errorf("set grew: %d entries", r.n)
	}
	// The set is fixed arrays: a new name costs no allocation.
	i := 0
	names := make([][]byte, 1000)
	for j := range names {
		names[j] = fmt.Appendf(nil, "more%d", j)
	}
	if a := testing.AllocsPerRun(len(names)-1, func() { r.observe(names[i], t0); i++ }); a != 0 {
		t.Errorf("observe allocates %.1f times a name", a)
	}
}

// BenchmarkRefusedClientsObserve is the cost of one BAD_ENCRYPTION_TYPE
// line's observation on a full set: new names each time (a flood, the
// worst case: a whole scan and a replacement) and one name again.
func BenchmarkRefusedClientsObserve(b *testing.B) {
	names := make([][]byte, 1024)
	for i := range names {
		names[i] = fmt.Appendf(nil, "flood%d@EXAMPLE.COM", i)
	}
	now := time.Unix(1_800_000_000, 0)
	b.Run("flood", func(b *testing.B) {
		r := newRefusedClients()
		for i := 0; b.Loop(); i++ {
			r.observe(names[i%len(names)], now)
		}
	})
	b.Run("one", func(b *testing.B) {
		r := newRefusedClients()
		for _, n := range names[:refusedClientsCap] {
			r.observe(n, now)
		}
		for b.Loop() {
			r.observe(names[0], now)
		}
	})
}
