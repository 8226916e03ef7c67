package attack

import (
	"fmt"
	"hash/maphash"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// feeder drives a detector with a clock that moves only when told.
type feeder struct {
	d   *Detector
	now time.Time
}

func newFeeder(c config.AttackSignals) *feeder {
	f := &feeder{d: New(c), now: t0}
	f.d.Tick(f.now)
	return f
}

func (f *feeder) as(o Outcome, client, addr string) {
	f.d.Observe(&Request{Outcome: o, Client: []byte(client), Hash: maphash.String(f.d.Seed(), client), Addr: []byte(addr)})
}

// spakeFailed is a PREAUTH_FAILED after SPAKE's verify failure.
func (f *feeder) spakeFailed(client, addr string) {
	f.d.Observe(&Request{Outcome: OutcomeWrongKey, Client: []byte(client), Hash: maphash.String(f.d.Seed(), client), Addr: []byte(addr), SPAKE: true})
}

func (f *feeder) tgs(client, server string, rc4 bool) {
	f.d.Observe(&Request{TGS: true, Outcome: OutcomeIssue, Client: []byte(client), Addr: []byte("10.0.0.1"), Server: []byte(server), RC4: rc4})
}

// wrongPassword is an MIT kinit with a wrong password against a SPAKE KDC.
func (f *feeder) wrongPassword(client, addr string) {
	f.as(OutcomeNeededPreauth, client, addr)
	f.as(OutcomeMorePreauth, client, addr)
	f.spakeFailed(client, addr)
}

func (f *feeder) wait(d time.Duration) { f.now = f.now.Add(d); f.d.Tick(f.now) }

func (f *feeder) snap() *Snapshot {
	var s Snapshot
	f.d.Snapshot(&s)
	return &s
}

func user(i int) string { return fmt.Sprintf("user%04d@PERF.TEST", i) }

func TestSpraying(t *testing.T) {
	f := newFeeder(config.AttackSignals{})
	for i := range 15 {
		f.wrongPassword(user(i), "10.1.2.3")
	}
	// Healthy logins from elsewhere, and one typo that recovers.
	for i := range 5 {
		f.as(OutcomeNeededPreauth, user(i), "10.0.0.9")
		f.as(OutcomeIssue, user(i), "10.0.0.9")
	}
	f.wrongPassword(user(99), "10.0.0.8")
	f.as(OutcomeNeededPreauth, user(99), "10.0.0.8")
	f.as(OutcomeIssue, user(99), "10.0.0.8")
	if s := f.snap(); s.Events[EventWrongPassword] != 0 {
		t.Fatalf("wrong passwords counted before the recovery wait: %d", s.Events[EventWrongPassword])
	}
	f.wait(config.DefaultAttackRecoveryWait)
	s := f.snap()
	if got := s.Events[EventWrongPassword]; got != 15 {
		t.Errorf("wrong passwords %d, want 15", got)
	}
	if s.Detections[PasswordSpraying] != 1 {
		t.Errorf("spraying detections %d, want 1", s.Detections[PasswordSpraying])
	}
	if s.Detections[BruteForce] != 0 {
		t.Errorf("brute force detections %d, want 0 (one failure per principal)", s.Detections[BruteForce])
	}
	top := s.Offenders[PasswordSpraying]
	if len(top) == 0 || top[0].Name != "10.1.2.3" || top[0].Score < 14 || top[0].Score > 16 || !top[0].Detected {
		t.Errorf("spraying offenders %+v, want 10.1.2.3 with about 15 principals first", top)
	}
}

// TestFallbackIsNoGuess: a SPAKE group the KDC lacks fails and recovers
// (no wrong password); a P-256-only client with a wrong password fails
// twice in one attempt (SPAKE, then encrypted timestamp): one guess per
// attempt.
func TestFallbackIsNoGuess(t *testing.T) {
	f := newFeeder(config.AttackSignals{SprayingPrincipals: 1, BruteForceFailures: 1})
	for i := range 20 {
		f.as(OutcomeNeededPreauth, user(i), "10.1.2.3")
		f.spakeFailed(user(i), "10.1.2.3")
		f.as(OutcomeIssue, user(i), "10.1.2.3")
	}
	f.wait(time.Minute)
	if s := f.snap(); s.Events[EventWrongPassword] != 0 || s.Detections != [NumSignals]uint64{} {
		t.Fatalf("group fallbacks counted: events %v detections %v", s.Events, s.Detections)
	}
	for range 3 { // three attempts, each with two methods
		f.as(OutcomeNeededPreauth, user(1), "10.1.2.3")
		f.spakeFailed(user(1), "10.1.2.3")
		f.as(OutcomeWrongKey, user(1), "10.1.2.3")
	}
	f.wait(time.Minute)
	if s := f.snap(); s.Events[EventWrongPassword] != 3 {
		t.Errorf("three attempts with two methods: %d wrong passwords, want 3", s.Events[EventWrongPassword])
	}
	for range 2 { // encrypted timestamp only: every failure an attempt
		f.as(OutcomeNeededPreauth, user(2), "10.1.2.3")
		f.as(OutcomeWrongKey, user(2), "10.1.2.3")
	}
	f.wait(time.Minute)
	if s := f.snap(); s.Events[EventWrongPassword] != 5 {
		t.Errorf("then two timestamp failures: %d wrong passwords, want 5", s.Events[EventWrongPassword])
	}
}

func TestBruteForce(t *testing.T) {
	f := newFeeder(config.AttackSignals{})
	for i := range 9 {
		f.wrongPassword("alice@PERF.TEST", fmt.Sprintf("10.0.0.%d", i%3))
	}
	f.as(OutcomeLockedOut, "alice@PERF.TEST", "10.0.0.1")
	f.wait(time.Minute)
	s := f.snap()
	if s.Detections[BruteForce] != 0 || s.Events[EventWrongPassword] != 9 || s.Events[EventLockout] != 1 {
		t.Fatalf("after 9 failures: detections %v events %v", s.Detections, s.Events)
	}
	f.wrongPassword("alice@PERF.TEST", "10.0.0.7")
	f.wait(time.Minute)
	s = f.snap()
	if s.Detections[BruteForce] != 1 || s.Offenders[BruteForce][0].Name != "alice@PERF.TEST" || s.Offenders[BruteForce][0].Score != 10 {
		t.Errorf("after 10 failures: detections %v offenders %+v", s.Detections, s.Offenders[BruteForce])
	}
}

func TestEnumeration(t *testing.T) {
	f := newFeeder(config.AttackSignals{})
	for i := range 15 {
		f.as(OutcomeUnknownClient, fmt.Sprintf("guess%d@PERF.TEST", i), "10.9.9.9")
		f.as(OutcomeUnknownClient, "typo@PERF.TEST", "10.0.0.1") // one name again and again: no enumeration
	}
	s := f.snap()
	if s.Events[EventUnknownClient] != 30 || s.Detections[UserEnumeration] != 1 || s.Offenders[UserEnumeration][0].Name != "10.9.9.9" {
		t.Errorf("events %v detections %v offenders %+v", s.Events, s.Detections, s.Offenders[UserEnumeration])
	}
}

func TestKerberoasting(t *testing.T) {
	f := newFeeder(config.AttackSignals{FollowServiceTickets: true})
	for range 50 { // a busy healthy client: few services
		f.tgs("web@PERF.TEST", "HTTP/a@PERF.TEST", false)
		f.tgs("web@PERF.TEST", "ldap/b@PERF.TEST", false)
	}
	for i := range 3 {
		f.tgs("roaster@PERF.TEST", fmt.Sprintf("HTTP/web%d@PERF.TEST", i), true)
	}
	s := f.snap()
	if s.Events[EventRC4ServiceTicket] != 3 {
		t.Errorf("events %v", s.Events)
	}
	// Three RC4 services may share a bit; six may not all collide.
	for i := 3; i < 6; i++ {
		f.tgs("roaster@PERF.TEST", fmt.Sprintf("HTTP/web%d@PERF.TEST", i), true)
	}
	s = f.snap()
	if s.Detections[Kerberoasting] != 1 || s.Offenders[Kerberoasting][0].Name != "roaster@PERF.TEST" {
		t.Errorf("RC4: detections %v offenders %+v", s.Detections, s.Offenders[Kerberoasting])
	}
	for i := range 40 { // AES, many services
		f.tgs("aes@PERF.TEST", fmt.Sprintf("HTTP/web%d@PERF.TEST", i), false)
	}
	if s = f.snap(); s.Detections[Kerberoasting] != 2 {
		t.Errorf("AES, 40 services: detections %v", s.Detections)
	}
}

func TestASREPRoasting(t *testing.T) {
	f := newFeeder(config.AttackSignals{FollowLogins: true})
	for i := range 20 { // kinit -k: NEEDED_PREAUTH first; SPAKE: a round trip more
		f.as(OutcomeNeededPreauth, user(i), "10.0.0.1")
		if i%2 == 0 {
			f.as(OutcomeMorePreauth, user(i), "10.0.0.1")
		}
		f.as(OutcomeIssue, user(i), "10.0.0.1")
	}
	if s := f.snap(); s.Events[EventNoPreauthTicket] != 0 {
		t.Fatalf("pre-authenticated logins counted: %v", s.Events)
	}
	// A NEEDED_PREAUTH more than RecoverLines AS lines before is not this login's.
	f.as(OutcomeNeededPreauth, "svc-nopreauth@PERF.TEST", "10.6.6.6")
	for i := range RecoverLines {
		f.as(OutcomeUnknownClient, "x", fmt.Sprint(i%3))
	}
	f.as(OutcomeIssue, "svc-nopreauth@PERF.TEST", "10.6.6.6")
	s := f.snap()
	if s.Events[EventNoPreauthTicket] != 1 || s.Detections[ASREPRoasting] != 1 || s.Offenders[ASREPRoasting][0].Name != "10.6.6.6" {
		t.Errorf("events %v detections %v offenders %+v", s.Events, s.Detections, s.Offenders[ASREPRoasting])
	}
}

// TestASREPRoastingInterleaved: logins whose steps and ISSUEs interleave
// with others' (several workers, several clients at once) are
// pre-authenticated; a step a login has used up does not cover a later
// ISSUE without one, whether the step waited as the last one or behind
// others'.
func TestASREPRoastingInterleaved(t *testing.T) {
	f := newFeeder(config.AttackSignals{FollowLogins: true})
	const n = 50
	for i := range n {
		f.as(OutcomeNeededPreauth, user(i), "10.0.0.1")
	}
	for i := range n {
		f.as(OutcomeMorePreauth, user(i), "10.0.0.1")
	}
	for i := range n {
		f.as(OutcomeIssue, user(n-1-i), "10.0.0.1")
	}
	if s := f.snap(); s.Events[EventNoPreauthTicket] != 0 {
		t.Fatalf("interleaved pre-authenticated logins counted: %v", s.Events)
	}
	// a's step goes behind b's, a steps again and logs in: both of a's
	// steps are used up, and a's next ISSUE has none.
	f.as(OutcomeNeededPreauth, "a@PERF.TEST", "10.0.0.2")
	f.as(OutcomeNeededPreauth, "b@PERF.TEST", "10.0.0.3")
	f.as(OutcomeMorePreauth, "a@PERF.TEST", "10.0.0.2")
	f.as(OutcomeIssue, "a@PERF.TEST", "10.0.0.2")
	f.as(OutcomeIssue, "a@PERF.TEST", "10.0.0.2")
	// b's step, behind a's, still covers its ISSUE once.
	f.as(OutcomeIssue, "b@PERF.TEST", "10.0.0.3")
	f.as(OutcomeIssue, "b@PERF.TEST", "10.0.0.3")
	s := f.snap()
	if s.Events[EventNoPreauthTicket] != 2 {
		t.Errorf("no-preauth tickets %d, want 2 (a's and b's second ISSUE)", s.Events[EventNoPreauthTicket])
	}
	// Steps older than RecoverLines are swept from the table: its marks
	// go with them, and a late ISSUE is one without pre-authentication.
	f.as(OutcomeNeededPreauth, "c@PERF.TEST", "10.0.0.4")
	f.as(OutcomeNeededPreauth, "d@PERF.TEST", "10.0.0.5")
	for range 2 * RecoverLines {
		f.as(OutcomeNeededPreauth, "e@PERF.TEST", "10.0.0.1")
	}
	if live := f.d.steps.live; live != [len(live)]uint64{} {
		t.Errorf("sets marked after %d AS lines of one client: %x", 2*RecoverLines, live)
	}
	f.as(OutcomeIssue, "c@PERF.TEST", "10.0.0.4")
	if s := f.snap(); s.Events[EventNoPreauthTicket] != 3 {
		t.Errorf("no-preauth tickets %d, want 3 (c's step is too old)", s.Events[EventNoPreauthTicket])
	}
}

// TestWindow: counts per offender start again with each window; the
// exact counters do not.
func TestWindow(t *testing.T) {
	f := newFeeder(config.AttackSignals{Window: time.Minute, RecoveryWait: time.Second})
	for i := range 6 {
		f.as(OutcomeUnknownClient, fmt.Sprintf("g%d", i), "10.9.9.9")
	}
	f.wait(time.Minute)
	for i := 6; i < 12; i++ {
		f.as(OutcomeUnknownClient, fmt.Sprintf("g%d", i), "10.9.9.9")
	}
	s := f.snap()
	if s.Detections[UserEnumeration] != 0 || s.Events[EventUnknownClient] != 12 || s.Offenders[UserEnumeration][0].Score != 6 {
		t.Errorf("6 + 6 in two windows: detections %v events %v offenders %+v", s.Detections, s.Events, s.Offenders[UserEnumeration])
	}
}

// TestHeavyHitterKept: an offender with more than 1/k of the events stays
// in the top k whatever the noise around it.
func TestHeavyHitterKept(t *testing.T) {
	f := newFeeder(config.AttackSignals{TopK: 5})
	for i := range 10000 {
		f.as(OutcomeUnknownClient, fmt.Sprintf("n%d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		if i >= 1000 && i%3 == 0 { // arriving late, when every slot is taken
			f.as(OutcomeUnknownClient, fmt.Sprintf("n%d", i), "192.0.2.1")
		}
	}
	s := f.snap()
	if len(s.Offenders[UserEnumeration]) != 5 || s.Offenders[UserEnumeration][0].Name != "192.0.2.1" {
		t.Errorf("offenders %+v, want 5 with 192.0.2.1 first", s.Offenders[UserEnumeration])
	}
}

// TestHostileInput: 100,000 forged addresses and principal names of up to
// 1 kB full of control characters keep k offenders per signal, label
// values of at most 4*MaxName+3 printable bytes, and the heap where it
// was.
func TestHostileInput(t *testing.T) {
	f := newFeeder(config.AttackSignals{FollowLogins: true, FollowServiceTickets: true})
	long := strings.Repeat("\x1b[31m\r\n\x00\xff\\", 100)
	feed := func(n int) {
		for i := range n {
			addr := fmt.Sprintf("10.%d.%d.%d%s", i>>16&255, i>>8&255, i&255, long[:i%64])
			client := fmt.Sprintf("%s%d@PERF.TEST", long[:i%len(long)], i)
			f.wrongPassword(client, addr)
			f.as(OutcomeUnknownClient, client, addr)
			f.as(OutcomeIssue, "np"+client, addr) // without pre-authentication
			f.tgs(client, client, true)
			if i%1000 == 0 {
				f.wait(time.Second)
			}
		}
		f.wait(time.Minute)
	}
	n := 100000
	if testutil.Race { // ten times slower; still far beyond every table's size
		n = 10000
	}
	feed(1000) // warm up
	before := testutil.HeapAfterGC()
	feed(n)
	after := testutil.HeapAfterGC()
	growth := int64(after) - int64(before)
	t.Logf("heap %d -> %d bytes (%+d) over %d forged addresses and hostile names; tables %d bytes, at most %d", before, after, growth, n, f.d.Bytes(), f.d.MaxBytes())
	if growth > int64(f.d.MaxBytes())+64<<10 || f.d.Bytes() > f.d.MaxBytes() {
		t.Errorf("heap grew by %d bytes, tables %d: more than their bound %d", growth, f.d.Bytes(), f.d.MaxBytes())
	}
	s := f.snap()
	if w := uint64(1000 + n); s.Events[EventWrongPassword] != w || s.Events[EventUnknownClient] != w || s.Events[EventNoPreauthTicket] != w || s.Events[EventRC4ServiceTicket] != w {
		t.Errorf("events %v, want every one counted", s.Events)
	}
	for sig, offs := range s.Offenders {
		if len(offs) > config.DefaultAttackTopK {
			t.Errorf("%s: %d offenders", SignalNames[sig], len(offs))
		}
		for _, o := range offs {
			if len(o.Name) > 4*MaxName+3 {
				t.Errorf("%s: offender name of %d bytes", SignalNames[sig], len(o.Name))
			}
			for _, c := range []byte(o.Name) {
				if c < 0x20 || c >= 0x7f {
					t.Fatalf("%s: offender %q holds byte %#x", SignalNames[sig], o.Name, c)
				}
			}
		}
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"user@PERF.TEST":                "user@PERF.TEST",
		"a\x1b[2Jb":                     `a\x1b[2Jb`,
		`back\slash`:                    `back\\slash`,
		"\xff\xfe":                      `\xff\xfe`,
		strings.Repeat("x", 49):         strings.Repeat("x", 48) + "...",
		strings.Repeat("\n", 1000):      strings.Repeat(`\x0a`, 48) + "...",
		"résumé":                        `r\xc3\xa9sum\xc3\xa9`,
		strings.Repeat("y", 48):         strings.Repeat("y", 48),
		strings.Repeat("y", 45) + "...": strings.Repeat("y", 45) + "...",
	} {
		if got := Sanitize([]byte(in)); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDefaultsCheap: by default only failures and RC4 service tickets are
// followed; a login without pre-authentication and AES service tickets
// need follow_logins and follow_service_tickets.
func TestDefaultsCheap(t *testing.T) {
	f := newFeeder(config.AttackSignals{})
	f.as(OutcomeIssue, "svc-nopreauth@PERF.TEST", "10.6.6.6")
	for i := range 40 {
		f.tgs("aes@PERF.TEST", fmt.Sprintf("HTTP/web%d@PERF.TEST", i), false)
	}
	for i := range 6 {
		f.tgs("roaster@PERF.TEST", fmt.Sprintf("HTTP/web%d@PERF.TEST", i), true)
	}
	s := f.snap()
	if s.Events[EventNoPreauthTicket] != 0 || s.Detections[ASREPRoasting] != 0 {
		t.Errorf("no-preauth tickets followed by default: %v %v", s.Events, s.Detections)
	}
	if s.Detections[Kerberoasting] != 1 || len(s.Offenders[Kerberoasting]) != 1 || s.Offenders[Kerberoasting][0].Name != "roaster@PERF.TEST" {
		t.Errorf("kerberoasting by default: %v %+v, want the RC4 client only", s.Detections, s.Offenders[Kerberoasting])
	}
}
