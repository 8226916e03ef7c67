package talkers

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
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
		tr.Request(false, Issued, []byte(name), []byte("c"), nil)
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
	tr.Request(true, Refused, []byte("a"), []byte("c"), []byte("s"))
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
	tr.Request(true, Issued, []byte("b"), []byte("c"), []byte("s"))
	tr.Tick(t0.Add(3 * time.Minute))
	if l := tr.Last(); len(l.Lists[RequestsAddressTGS]) != 0 || l.Requests != [2]uint64{} || !l.Start.Equal(t0.Truncate(time.Minute).Add(2*time.Minute)) {
		t.Errorf("an idle window: %+v", l)
	}
}

// TestNamesCutAndEscaped: names are escaped as the attack offenders'
// are, a name longer than MaxName is shown cut to CutTo bytes with
// CutMark and 6 hex digits, names cut alike but different are apart, and
// the empty name is shown.
func TestNamesCutAndEscaped(t *testing.T) {
	tr := New(5, time.Minute)
	t0 := time.Unix(3600, 0)
	tr.Tick(t0)
	long := bytes.Repeat([]byte{'x'}, 100)
	other := append(append([]byte{}, long[:60]...), 'y')
	tr.Request(false, Issued, long, []byte("\x1b[2J\\"), nil)
	tr.Request(false, Issued, long, nil, nil)
	tr.Request(false, Issued, other, nil, nil)
	tr.Tick(t0.Add(time.Minute))
	l := tr.Last()
	cut := regexp.MustCompile(`^x{40}\.\.\.\\[0-9a-f]{6}$`)
	a := l.Lists[RequestsAddressAS]
	if len(a) != 2 || a[0].Count != 2 || a[1].Count != 1 || a[0].Name == a[1].Name || !cut.MatchString(a[0].Name) || !cut.MatchString(a[1].Name) {
		t.Errorf("addresses %v", a)
	}
	c := l.Lists[RequestsClientAS]
	if len(c) != 2 || c[0].Name != EmptyName || c[1].Name != `\x1b[2J\\` {
		t.Errorf("clients %v", c)
	}
}

// TestLongNamesApart: 8,000 distinct principals of 2 kB that share
// their first kilobyte are 8,000 names, not one: each exported name is
// within its error of its true count (1), and one of them sent 8,000 times
// more (above the guarantee's N/(Slack*k)) is ranked first, under a
// name no short one can be written as.
func TestLongNamesApart(t *testing.T) {
	tr := New(10, time.Minute)
	t0 := time.Unix(3600, 0)
	tr.Tick(t0)
	prefix := bytes.Repeat([]byte{'p'}, 1024)
	name := func(i int) []byte { return fmt.Appendf(append([]byte{}, prefix...), "%01024d", i) }
	for i := range 8000 {
		tr.Request(false, Issued, []byte("10.0.0.1"), name(i), nil)
		if i%20 == 0 {
			for range 20 {
				tr.Request(false, Issued, []byte("10.0.0.1"), name(4711), nil)
			}
		}
	}
	const heavy = 1 + 400*20 // its own turn, and 20 every 20 names
	tr.Tick(t0.Add(time.Minute))
	l := tr.Last().Lists[RequestsClientAS]
	if len(l) != 10 || l[0].Count > heavy || l[0].Count+l[0].Error < heavy {
		t.Fatalf("clients %v, want the first %d", l, heavy)
	}
	seen := map[string]bool{}
	for _, c := range l {
		if seen[c.Name] {
			t.Errorf("%q twice in %v", c.Name, l)
		}
		seen[c.Name] = true
		if c.Name != l[0].Name && (c.Count > 1 || c.Count+c.Error < 1) {
			t.Errorf("client %v of %v", c, l)
		}
	}
	if !strings.HasPrefix(l[0].Name, string(prefix[:CutTo])+CutMark) || len(l[0].Name) != CutTo+len(CutMark)+6 {
		t.Errorf("shown as %q", l[0].Name)
	}
	// The shown name as a short name's: its escape differs.
	if attack.Sanitize([]byte(l[0].Name)) == l[0].Name {
		t.Errorf("a short name is shown as the cut one: %q", l[0].Name)
	}
	if n := tr.Last().Requests[0]; n != 8000+400*20 {
		t.Errorf("%d requests", n)
	}
}

// TestMemoKeepsCutApart: the address memo (most lines share the line
// before's) never makes a name of exactly MaxName bytes one with a
// longer name, in either order, nor a name one with the name of the line
// before; the clients, hashed every line, neither.
func TestMemoKeepsCutApart(t *testing.T) {
	tr := New(5, time.Minute)
	t0 := time.Unix(3600, 0)
	tr.Tick(t0)
	exact := bytes.Repeat([]byte{'x'}, attack.MaxName)
	long := bytes.Repeat([]byte{'x'}, 2*attack.MaxName)
	for _, n := range [][]byte{long, exact, exact, long, []byte("job@R"), []byte("job@S")} {
		tr.Request(false, Issued, n, n, nil)
	}
	tr.Tick(t0.Add(time.Minute))
	l := tr.Last()
	for _, list := range []List{RequestsAddressAS, RequestsClientAS} {
		got := map[string]uint64{}
		for _, n := range l.Lists[list] {
			if strings.HasPrefix(n.Name, string(exact[:CutTo])+CutMark) {
				n.Name = "long"
			}
			got[n.Name] = n.Count
		}
		want := map[string]uint64{"long": 2, string(exact): 2, "job@R": 1, "job@S": 1}
		if !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", ListBy[list], got, want)
		}
	}
}

// TestEvictsSmallest: a crafted stream whose summary is worked out here
// from the algorithm's definition. k = 2, so 8 counters: A sends 300,
// seven fillers 10 each, then X 300 and 200 names once each. Every name
// above N/(Slack*k) = 108 (A and X) must be exported, within its error
// of the truth: X takes a filler's place (the smallest counter) after
// its bucket reached the fillers' 10, so it is exported as 290 (300 less
// its error 10); A, never evicted, exactly. Evicting the largest counter instead
// loses A; dropping the error carried into a replaced counter exports X
// above its true count.
func TestEvictsSmallest(t *testing.T) {
	tr := New(2, time.Minute)
	t0 := time.Unix(3600, 0)
	tr.Tick(t0)
	truth := map[string]uint64{}
	send := func(name string, n int) {
		for range n {
			truth[name]++
			tr.Request(false, Issued, []byte(name), nil, nil)
		}
	}
	send("A", 300)
	for i := range 7 {
		send(fmt.Sprintf("filler%d", i), 10)
	}
	send("X", 300)
	for i := range 200 {
		send(fmt.Sprintf("once%d", i), 1)
	}
	tr.Tick(t0.Add(time.Minute))
	got := tr.Last().Lists[RequestsAddressAS]
	var n uint64
	for _, v := range truth {
		n += v
	}
	bound := n / (Slack * 2)
	shown := map[string]Talker{}
	for _, g := range got {
		shown[g.Name] = g
		if tv := truth[g.Name]; g.Count > tv || tv > g.Count+g.Error || g.Error > bound {
			t.Errorf("%s: exported %d (error %d), true %d, bound %d", g.Name, g.Count, g.Error, tv, bound)
		}
	}
	for name, tv := range truth {
		if _, ok := shown[name]; tv > bound && !ok {
			t.Errorf("%s sent %d > %d but is not exported: %v", name, tv, bound, got)
		}
	}
	want := []Talker{{"A", 300, 0}, {"X", 290, 10}}
	if !slices.Equal(got, want) {
		t.Errorf("exported %v, want %v", got, want)
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

// TestLoginIsOneRequest: a login is one request whatever its round trips
// (the lines MIT's KDC writes for each, kdclog/testdata): SPAKE
// (NEEDED_PREAUTH, a round trip, ISSUE), encrypted timestamp
// (NEEDED_PREAUTH, ISSUE), a wrong password (one request, one failure),
// a login given up after NEEDED_PREAUTH, logins of one client from one
// address at once, one without pre-authentication; another client or
// address never goes on a login, nor a line after LoginWait.
func TestLoginIsOneRequest(t *testing.T) {
	type line struct {
		st           Status
		addr, client string
		after        time.Duration
	}
	N, M, I, R := NeededPreauth, MorePreauth, Issued, Refused
	for _, c := range []struct {
		name           string
		lines          []line
		requests, fail uint64
	}{
		{"spake", []line{{N, "a", "c", 0}, {M, "a", "c", 0}, {I, "a", "c", 0}}, 1, 0},
		{"encrypted timestamp", []line{{N, "a", "c", 0}, {I, "a", "c", 0}}, 1, 0},
		{"wrong password", []line{{N, "a", "c", 0}, {M, "a", "c", 0}, {R, "a", "c", 0}}, 1, 1},
		{"given up", []line{{N, "a", "c", 0}, {N, "a", "c", 0}, {N, "a", "c", 0}}, 3, 0},
		{"at once", []line{{N, "a", "c", 0}, {N, "a", "c", 0}, {M, "a", "c", 0}, {M, "a", "c", 0}, {I, "a", "c", 0}, {I, "a", "c", 0}}, 2, 0},
		{"no preauth", []line{{I, "a", "c", 0}, {I, "a", "c", 0}}, 2, 0},
		{"unknown client", []line{{R, "a", "c", 0}, {R, "a", "c", 0}}, 2, 2},
		{"start unseen", []line{{M, "a", "c", 0}, {I, "a", "c", 0}}, 1, 0},
		{"another client", []line{{N, "a", "c", 0}, {I, "a", "d", 0}}, 2, 0},
		{"another address", []line{{N, "a", "c", 0}, {I, "b", "c", 0}}, 2, 0},
		{"too late", []line{{N, "a", "c", 0}, {I, "a", "c", LoginWait * time.Second}}, 2, 0},
		{"just in time", []line{{N, "a", "c", 0}, {M, "a", "c", (LoginWait - 1) * time.Second}, {I, "a", "c", (LoginWait - 1) * time.Second}}, 1, 0},
	} {
		tr := New(5, time.Hour)
		now := time.Unix(3600, 0)
		tr.Tick(now)
		for _, l := range c.lines {
			now = now.Add(l.after)
			tr.Tick(now)
			tr.Request(false, l.st, []byte(l.addr), []byte(l.client), nil)
		}
		tr.Tick(time.Unix(2*3600, 0))
		s := tr.Last()
		var byClient uint64
		for _, n := range s.Lists[RequestsClientAS] {
			byClient += n.Count
		}
		if s.Requests[0] != c.requests || byClient != c.requests || s.Failures != c.fail {
			t.Errorf("%s: %d requests (%d by client), %d failures; want %d, %d", c.name, s.Requests[0], byClient, s.Failures, c.requests, c.fail)
		}
	}
}

// TestLoginsEvictOldest: the table of logins going on, one set filled by
// hand (keys whose set is 0): a login finished frees its way for the next
// one; with none free, the oldest login goes, and its next line starts a
// request again while the others' go on.
func TestLoginsEvictOldest(t *testing.T) {
	l := &logins{}
	k := func(j int) uint64 { return uint64(j) << 42 } // set 0, address 0
	for j := 1; j <= 4; j++ {
		if !l.starts(0, k(j), NeededPreauth, uint32(j)) {
			t.Fatalf("login %d: NEEDED_PREAUTH is no request", j)
		}
	}
	if l.starts(0, k(3), Issued, 5) {
		t.Error("login 3's ISSUE counted again")
	}
	l.starts(0, k(5), NeededPreauth, 6) // login 3's way
	l.starts(0, k(6), NeededPreauth, 7) // none free: login 1's, the oldest
	for j, want := range map[int]bool{1: true, 2: false, 4: false, 5: false, 6: false} {
		if got := l.starts(0, k(j), Issued, 8); got != want {
			t.Errorf("login %d's ISSUE starts a request: %v, want %v", j, got, want)
		}
	}
}
