package talkers

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/kdclog/attack"
)

// TestSpaceSavingBound feeds a heavy-tailed stream of 200,000 requests
// from 20,000 names, counted exactly beside it: every name exported is
// within its stated error of the truth, the error is at most N/(Slack*k),
// and the heaviest names are exported in order.
func TestSpaceSavingBound(t *testing.T) {
	const k, n = 10, 200000
	tr := New(k, time.Minute)
	t0 := time.Unix(0, 0).Add(time.Hour)
	tr.Tick(t0)
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.2, 1, 19999)
	truth := map[string]uint64{}
	for range n {
		// Every tenth request from a name never seen again: the churn.
		name := fmt.Sprintf("10.0.%d.%d", rng.IntN(256), rng.IntN(256))
		if rng.IntN(10) != 0 {
			name = fmt.Sprintf("host%d", zipf.Uint64())
		}
		truth[name]++
		tr.Request(false, false, []byte(name), []byte("c"), nil)
	}
	tr.Tick(t0.Add(time.Minute))
	got := tr.Last().Lists[RequestsAddressAS]
	if len(got) != k {
		t.Fatalf("%d names, want %d", len(got), k)
	}
	bound := uint64(n / (Slack * k))
	for _, g := range got {
		tv := truth[g.Name]
		if g.Count > tv || tv > g.Count+g.Error || g.Error > bound {
			t.Errorf("%s: exported %d (error %d), true %d, bound %d", g.Name, g.Count, g.Error, tv, bound)
		}
	}
	for i, want := range []string{"host0", "host1", "host2"} {
		if got[i].Name != want {
			t.Errorf("rank %d: %s, want %s (%v)", i+1, got[i].Name, want, got)
		}
	}
	if c := tr.Last().Lists[RequestsClientAS]; len(c) != 1 || c[0] != (Talker{Name: "c", Count: n}) {
		t.Errorf("one client: %v", c)
	}
}

// TestWindows: a window's counts are exported once it is over, an idle
// window exports nothing, and the windows are aligned to the clock.
func TestWindows(t *testing.T) {
	tr := New(3, time.Minute)
	t0 := time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)
	tr.Tick(t0)
	tr.Request(true, true, []byte("a"), []byte("c"), []byte("s"))
	tr.Retransmit([]byte("a"))
	tr.Tick(t0.Add(29 * time.Second))
	if l := tr.Last(); !l.Start.IsZero() || len(l.Lists[RequestsAddressTGS]) != 0 {
		t.Fatalf("a window not over exported: %+v", l)
	}
	tr.Tick(t0.Add(31 * time.Second)) // 10:01:01
	l := tr.Last()
	if !l.Start.Equal(t0.Truncate(time.Minute)) || l.Requests != [2]uint64{0, 1} || l.Failures != 1 || l.Retransmits != 1 {
		t.Errorf("last window %+v", l)
	}
	for _, list := range []List{RequestsAddressTGS, RequestsClientTGS, RequestsServiceTGS, FailuresAddress, FailuresClient, FailuresService, RetransmitsAddress} {
		if len(l.Lists[list]) != 1 || l.Lists[list][0].Count != 1 {
			t.Errorf("list %d: %v", list, l.Lists[list])
		}
	}
	// A request in 10:01, none in 10:02: at 10:03:30 the last complete
	// window is 10:02's, empty.
	tr.Request(true, false, []byte("b"), []byte("c"), []byte("s"))
	tr.Tick(t0.Add(3 * time.Minute))
	if l := tr.Last(); len(l.Lists[RequestsAddressTGS]) != 0 || l.Requests != [2]uint64{} || !l.Start.Equal(t0.Truncate(time.Minute).Add(2*time.Minute)) {
		t.Errorf("an idle window: %+v", l)
	}
}

// TestNamesCutAndEscaped: names are escaped and cut as the attack
// offenders' are, names cut alike are one, and the empty name is shown.
func TestNamesCutAndEscaped(t *testing.T) {
	tr := New(5, time.Minute)
	t0 := time.Unix(3600, 0)
	tr.Tick(t0)
	long := make([]byte, 100)
	for i := range long {
		long[i] = 'x'
	}
	other := append(append([]byte{}, long[:60]...), 'y')
	tr.Request(false, false, long, []byte("\x1b[2J\\"), nil)
	tr.Request(false, false, other, nil, nil)
	tr.Tick(t0.Add(time.Minute))
	l := tr.Last()
	if a := l.Lists[RequestsAddressAS]; len(a) != 1 || a[0].Name != string(long[:48])+"..." || a[0].Count != 2 {
		t.Errorf("addresses %v", a)
	}
	c := l.Lists[RequestsClientAS]
	if len(c) != 2 || c[0].Name != EmptyName || c[1].Name != `\x1b[2J\\` {
		t.Errorf("clients %v", c)
	}
}

// TestMemoKeepsCutApart: the address memo (most lines share the line
// before's) never makes a name of exactly MaxName bytes one with a
// longer name cut to it, in either order, nor a name one with the name
// of the line before; the clients, hashed every line, neither.
func TestMemoKeepsCutApart(t *testing.T) {
	tr := New(5, time.Minute)
	t0 := time.Unix(3600, 0)
	tr.Tick(t0)
	exact := bytes.Repeat([]byte{'x'}, attack.MaxName)
	long := bytes.Repeat([]byte{'x'}, 2*attack.MaxName)
	for _, n := range [][]byte{long, exact, exact, long, []byte("job@R"), []byte("job@S")} {
		tr.Request(false, false, n, n, nil)
	}
	tr.Tick(t0.Add(time.Minute))
	want := map[string]uint64{string(exact) + "...": 2, string(exact): 2, "job@R": 1, "job@S": 1}
	l := tr.Last()
	for _, list := range []List{RequestsAddressAS, RequestsClientAS} {
		got := map[string]uint64{}
		for _, n := range l.Lists[list] {
			got[n.Name] = n.Count
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", ListBy[list], got, want)
		}
	}
}

// TestMerged: the landing page's rows put lists together: a name in
// both has the sum of its counts and errors, the rows are ordered by
// count then name, and cut to n.
func TestMerged(t *testing.T) {
	var s Snapshot
	s.Lists[RequestsAddressAS] = []Talker{{"10.0.0.1", 50, 0}, {"10.0.0.2", 30, 2}, {"10.0.0.3", 7, 0}}
	s.Lists[RequestsAddressTGS] = []Talker{{"10.0.0.2", 25, 1}, {"10.0.0.9", 7, 0}, {"10.0.0.4", 6, 0}}
	s.Lists[FailuresAddress] = []Talker{{"10.0.0.1", 1000, 0}} // not asked for
	got := s.Merged(4, RequestsAddressAS, RequestsAddressTGS)
	want := []Talker{{"10.0.0.2", 55, 3}, {"10.0.0.1", 50, 0}, {"10.0.0.3", 7, 0}, {"10.0.0.9", 7, 0}}
	if !slices.Equal(got, want) {
		t.Errorf("merged %v\nwant   %v", got, want)
	}
	if got := s.Merged(10, RequestsServiceTGS); len(got) != 0 {
		t.Errorf("an empty list merged: %v", got)
	}
}
