package attack

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// documentedLines is N of the phrase around "N AS lines" in
// docs/metrics.md's attack signals section.
func documentedLines(t *testing.T, re string) int {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(re).FindSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/metrics.md: no %q", re)
	}
	n, err := strconv.Atoi(strings.ReplaceAll(string(m[1]), ",", ""))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRecoveryLines: a wrong key is recovered by an ISSUE of the same
// client and address within the next N AS lines that docs/metrics.md
// gives, not one line later; a ticket has pre-authentication when a step
// of its client is in the N AS lines before it. Other clients' lines
// fill the gap; the clock stands still.
func TestRecoveryLines(t *testing.T) {
	recover := documentedLines(t, `follows within `+"`recovery_wait`"+` \(default 5s\) or the next ([0-9,]+) AS\s+lines`)
	before := documentedLines(t, `in the ([0-9,]+) AS\s+lines before it`)
	fill := func(f *feeder, n int) {
		for i := range n {
			f.as(OutcomeUnknownClient, "x", strconv.Itoa(i%3))
		}
	}
	for _, tc := range []struct {
		at    int // the ISSUE is this AS line after the failure
		wrong uint64
	}{{1, 0}, {recover, 0}, {recover + 1, 1}} {
		f := newFeeder(config.AttackSignals{})
		f.as(OutcomeWrongKey, "alice@PERF.TEST", "10.0.0.1")
		fill(f, tc.at-1)
		f.as(OutcomeIssue, "alice@PERF.TEST", "10.0.0.1")
		f.wait(config.DefaultAttackRecoveryWait)
		if got := f.snap().Events[EventWrongPassword]; got != tc.wrong {
			t.Errorf("ISSUE %d AS lines after the failure: %d wrong passwords, want %d", tc.at, got, tc.wrong)
		}
	}
	for _, tc := range []struct {
		at        int // the ISSUE is this AS line after the step
		noPreauth uint64
	}{{1, 0}, {before, 0}, {before + 1, 1}} {
		f := newFeeder(config.AttackSignals{FollowLogins: true})
		f.as(OutcomeNeededPreauth, "alice@PERF.TEST", "10.0.0.1")
		fill(f, tc.at-1)
		f.as(OutcomeIssue, "alice@PERF.TEST", "10.0.0.1")
		if got := f.snap().Events[EventNoPreauthTicket]; got != tc.noPreauth {
			t.Errorf("ISSUE %d AS lines after NEEDED_PREAUTH: %d tickets without pre-authentication, want %d", tc.at, got, tc.noPreauth)
		}
	}
}

// TestWaiting: Waiting is true exactly while a failure awaits its
// recovery (kdclog feeds a login's ISSUE only then).
func TestWaiting(t *testing.T) {
	f := newFeeder(config.AttackSignals{})
	if f.d.Waiting() {
		t.Fatal("a new detector is waiting")
	}
	f.wrongPassword("alice@PERF.TEST", "10.0.0.1")
	if !f.d.Waiting() {
		t.Fatal("not waiting after a wrong key")
	}
	f.as(OutcomeIssue, "alice@PERF.TEST", "10.0.0.1")
	if f.d.Waiting() {
		t.Fatal("waiting after the failure recovered")
	}
	f.wrongPassword("bob@PERF.TEST", "10.0.0.1")
	f.wait(config.DefaultAttackRecoveryWait)
	if f.d.Waiting() || f.snap().Events[EventWrongPassword] != 1 {
		t.Fatalf("after the recovery wait: waiting %v, events %v", f.d.Waiting(), f.snap().Events)
	}
}

// TestSanitizeEveryByte: each byte alone is kept when it is printable
// ASCII (strconv.IsPrint below 0x80) and not the backslash, and written
// \xNN otherwise.
func TestSanitizeEveryByte(t *testing.T) {
	for c := range 256 {
		want := fmt.Sprintf(`\x%02x`, c)
		switch {
		case c == '\\':
			want = `\\`
		case c < 0x80 && strconv.IsPrint(rune(c)):
			want = string(rune(c))
		}
		if got := Sanitize([]byte{byte(c)}); got != want {
			t.Errorf("Sanitize(%#x) = %q, want %q", c, got, want)
		}
	}
}

// sameSet returns n client names whose hashes under seed fall in one set
// of a table of sets sets, with distinct pre-authentication keys.
func sameSet(seed maphash.Seed, sets uint64, n int, prefix string) []string {
	var names []string
	keys := map[uint32]bool{}
	set := uint64(0)
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprintf("%s%d@PERF.TEST", prefix, i)
		h := maphash.String(seed, name)
		if len(names) == 0 {
			set = h % sets
		}
		if h%sets == set && !keys[preauthKey(h)] {
			keys[preauthKey(h)] = true
			names = append(names, name)
		}
	}
	return names
}

// other returns a client name in another pre-authentication set than
// name's: its step moves the last step into the table.
func other(seed maphash.Seed, name string) string {
	for i := 0; ; i++ {
		o := fmt.Sprintf("other%d@PERF.TEST", i)
		if maphash.String(seed, o)%preauthSets != maphash.String(seed, name)%preauthSets {
			return o
		}
	}
}

// TestPreauthSetKeepsFour: logins of clients that share one set of the
// step table, at most four of them between their first step and their
// ISSUE at a time, in a random order among other clients' steps, are all
// pre-authenticated, whichever ways their ISSUEs free and steps reuse.
// The oracle: every ISSUE follows its own client's step, well within
// RecoverLines.
func TestPreauthSetKeepsFour(t *testing.T) {
	f := newFeeder(config.AttackSignals{FollowLogins: true})
	names := sameSet(f.d.Seed(), preauthSets, 8, "same")
	mover := other(f.d.Seed(), names[0])
	rnd := rand.New(rand.NewPCG(1, 2))
	var inFlight []string
	issued := 0
	for line := 0; line < RecoverLines-10; line++ {
		switch op := rnd.IntN(4); {
		case op == 0 && len(inFlight) < 4:
			var free []string
			for _, n := range names {
				if !slices.Contains(inFlight, n) {
					free = append(free, n)
				}
			}
			n := free[rnd.IntN(len(free))]
			inFlight = append(inFlight, n)
			f.as(OutcomeNeededPreauth, n, "10.0.0.1")
		case op == 1 && len(inFlight) > 0:
			f.as(OutcomeMorePreauth, inFlight[rnd.IntN(len(inFlight))], "10.0.0.1")
		case op == 2 && len(inFlight) > 0:
			i := rnd.IntN(len(inFlight))
			f.as(OutcomeIssue, inFlight[i], "10.0.0.1")
			inFlight = append(inFlight[:i], inFlight[i+1:]...)
			issued++
		default:
			f.as(OutcomeNeededPreauth, mover, "10.0.0.9")
		}
	}
	if s := f.snap(); s.Events[EventNoPreauthTicket] != 0 || issued < 100 {
		t.Errorf("%d pre-authenticated logins, %d taken for tickets without pre-authentication", issued, s.Events[EventNoPreauthTicket])
	}
}

// setOfFive is five logins of clients in one set of the step table; the
// first four's steps in ways 0 to 3, oldest first.
type setOfFive struct {
	f     *feeder
	names []string
	mover string // a client of another set
}

func newSetOfFive() *setOfFive {
	f := newFeeder(config.AttackSignals{FollowLogins: true})
	names := sameSet(f.d.Seed(), preauthSets, 5, "same")
	s := &setOfFive{f: f, names: names, mover: other(f.d.Seed(), names[0])}
	for i := range 4 {
		s.step(i)
	}
	return s
}

// step is a step of login i, moved into the table by another client's.
func (s *setOfFive) step(i int) {
	s.f.as(OutcomeNeededPreauth, s.names[i], "10.0.0.1")
	s.f.as(OutcomeNeededPreauth, s.mover, "10.0.0.9")
}

func (s *setOfFive) issue(i int) { s.f.as(OutcomeIssue, s.names[i], "10.0.0.1") }

// issueAllBut ends every login but skip's and returns the tickets taken
// for ones without pre-authentication.
func (s *setOfFive) issueAllBut(skip int) uint64 {
	for i := range s.names {
		if i != skip {
			s.issue(i)
		}
	}
	return s.f.snap().Events[EventNoPreauthTicket]
}

// TestPreauthSetDropsOldest: a fifth step for a full set (four clients in
// flight, and a fifth stepping) takes the way of the oldest step,
// wherever it is: the other four logins stay pre-authenticated.
func TestPreauthSetDropsOldest(t *testing.T) {
	for oldest := range 4 {
		s := newSetOfFive()
		for i := range 4 { // every step younger than the oldest's
			if i != oldest {
				s.step(i)
			}
		}
		s.step(4)
		if got := s.issueAllBut(oldest); got != 0 {
			t.Errorf("oldest step in way %d: %d of the four younger logins taken for tickets without pre-authentication", oldest, got)
		}
	}
}

// TestPreauthSetFreeWayFirst: a step for a set with a free way takes
// that way, wherever it is and however recently it was freed: the three
// logins in flight in the other ways stay pre-authenticated.
func TestPreauthSetFreeWayFirst(t *testing.T) {
	for free := range 4 {
		s := newSetOfFive()
		s.step(free) // the youngest step, then its login ends
		s.issue(free)
		s.step(4)
		if got := s.issueAllBut(free); got != 0 {
			t.Errorf("way %d free: %d of the four logins in flight taken for tickets without pre-authentication", free, got)
		}
	}
}

// TestServiceSlotsApart: clients that share a set of the service table
// keep their services apart: with the threshold at 4, no client with 3
// distinct services is detected (a sketch never counts more than the
// distinct items it was given), and one with 40 is.
func TestServiceSlotsApart(t *testing.T) {
	f := newFeeder(config.AttackSignals{FollowServiceTickets: true, KerberoastingServices: 4})
	const clients = 3 * tgsSets // many clients to each set
	for s := range 3 {
		for c := range clients {
			f.tgs(user(c), fmt.Sprintf("HTTP/svc%d-%d@PERF.TEST", c, s), false)
		}
	}
	if s := f.snap(); s.Detections[Kerberoasting] != 0 {
		t.Fatalf("%d clients with 3 services each: %d detected, offenders %+v", clients, s.Detections[Kerberoasting], s.Offenders[Kerberoasting])
	}
	for i := range 40 {
		f.tgs("roaster@PERF.TEST", fmt.Sprintf("HTTP/web%d@PERF.TEST", i), false)
	}
	if s := f.snap(); s.Detections[Kerberoasting] != 1 || s.Offenders[Kerberoasting][0].Name != "roaster@PERF.TEST" {
		t.Errorf("a client with 40 services: detections %v offenders %+v", s.Detections, s.Offenders[Kerberoasting])
	}
}
