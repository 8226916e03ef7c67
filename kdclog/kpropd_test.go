package kdclog

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

const kpropdFixture = "testdata/kpropd/mit-1.20-kpropd-debug.log"

// kpropdCases: lines of both forms, with MIT 1.20's message texts
// (src/kprop/kpropd.c): the syslog ones framed as rsyslog's traditional
// file format and journalctl -o short write them (ident kpropd, LOG_PID),
// and with an RFC 3339 time stamp.
var kpropdCases = []struct {
	line   string
	event  KpropdEvent
	err    KpropdErr
	reason Reason
}{
	{"Dec  1 02:41:27 kdc2 kpropd[812]: Incremental updates: 3 updates / 23397 us", KpropdUpdates, 0, 0},
	{"2026-12-01T02:41:27.123456+00:00 kdc2 kpropd[812]: Incremental updates: 1 updates / 7711 us", KpropdUpdates, 0, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: kpropd: Full resync needed.", KpropdFullResyncNeeded, 0, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: Full resync request granted.", KpropdFullResyncGranted, 0, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: Full resync, permission denied.", KpropdError, KpropdErrPermissionDenied, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]:  Full resync, error returned from primary KDC.", KpropdError, KpropdErrPrimary, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: Full resync, invalid return from primary KDC.", KpropdError, KpropdErrInvalidResult, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: get_updates, permission denied.", KpropdError, KpropdErrPermissionDenied, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: get_updates, error returned from primary KDC.", KpropdError, KpropdErrPrimary, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: get_updates, invalid return from primary KDC.", KpropdError, KpropdErrInvalidResult, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: ulog_replay failed (No space left on device), updates not registered.", KpropdError, KpropdErrReplay, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: ERROR returned by primary KDC, bailing.", KpropdNone, 0, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: Connection from kdc1.example.com", KpropdFullPropConnection, 0, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: Rejected connection from unauthorized principal host/evil.example.com@EXAMPLE.COM", KpropdError, KpropdErrUnauthorized, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: kpropd: Communication failure with server while attempting to connect to primary KDC ... retrying", KpropdError, KpropdErrConnect, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: kpropd: Operation not permitted do_iprop failed.", KpropdError, KpropdErrGaveUp, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: kpropd: /usr/sbin/kdb5_util returned a bad exit status (1)", KpropdError, KpropdErrLoad, 0},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: kpropd: Permission denied while opening database file, '/var/lib/krb5kdc/from_master.temp'", KpropdError, KpropdErrOther, 0},
	{"<14>Dec  1 02:41:27 kdc2 kpropd[812]: Incremental updates: 2 updates / 99 us", KpropdUpdates, 0, 0},
	{"<3>Dec  1 02:41:27 kdc2 kpropd[812]: get_updates, permission denied.", KpropdError, KpropdErrPermissionDenied, 0},
	{"<14>Dec  1 02:41:27 kdc2 sshd[9]: Incremental updates: 2 updates / 99 us", 0, 0, ReasonOtherProgram},
	// kpropd -d output, bare.
	{"/usr/sbin/kpropd: Communication failure with server while attempting to connect to primary KDC ... retrying", KpropdError, KpropdErrConnect, 0},
	{"KDC is synchronized with primary.", KpropdInSync, 0, 0},
	// Not kpropd's, or not known.
	{"Dec  1 02:41:27 kdc2 sshd[99]: Accepted publickey for root", 0, 0, ReasonOtherProgram},
	{"Dec  1 02:41:27 kdc2 kpropd-helper[99]: Incremental updates: 3 updates / 1 us", 0, 0, ReasonOtherProgram},
	{"Dec  1 02:41:27 kdc2 kpropd[812]: something new in 1.22", 0, 0, ReasonUnknownMessage},
	{"Incremental updates: many updates / 1 us", 0, 0, ReasonMalformed},
	{"Incremental updates: 3 updates / 1", 0, 0, ReasonMalformed},
	{"", 0, 0, ReasonUnknownMessage},
}

func TestParseKpropd(t *testing.T) {
	for _, tc := range kpropdCases {
		l, reason := ParseKpropd([]byte(tc.line))
		if reason != tc.reason || l.Event != tc.event || l.Err != tc.err {
			t.Errorf("%q: event %s error %s reason %s, want %s %s %s", tc.line,
				kpropdEventNames[l.Event], kpropdErrNames[l.Err], reasonNames[reason],
				kpropdEventNames[tc.event], kpropdErrNames[tc.err], reasonNames[tc.reason])
		}
	}
	l, _ := ParseKpropd([]byte("Dec  1 02:41:27 kdc2 kpropd[812]: Incremental updates: 3 updates / 23397 us"))
	if l.Updates != 3 || l.Micros != 23397 {
		t.Errorf("updates line read as %+v", l)
	}
}

// kpropdFixtures are real kpropd output (testdata/kpropd): kpropd -d's
// stderr, and the syslog datagrams of a kpropd without -d as rsyslog
// writes them.
var kpropdFixtures = []string{kpropdFixture, "testdata/kpropd/mit-1.20-kpropd-syslog.log"}

// syslogPrefix is a separate reading of the syslog framing, for the test.
var syslogPrefix = regexp.MustCompile(`(?m)^[A-Z][a-z]{2} [ \d]\d [\d:]{8} \S+ kpropd\[\d+\]: `)

// TestKpropdFixture: every line of a real kpropd's output, both forms, is
// understood, and the counts agree with a separate reading of the files
// (regular expressions over MIT's message texts).
func TestKpropdFixture(t *testing.T) {
	for _, fixture := range kpropdFixtures {
		data, err := os.ReadFile(fixture)
		if err != nil {
			t.Fatal(err)
		}
		var k kpropdCounts
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if sc.Text() == "" {
				continue
			}
			if reason, ok := k.handle(sc.Bytes()); !ok {
				t.Errorf("%s: not understood (%s): %q", fixture, reasonNames[reason], sc.Text())
			}
		}
		text := syslogPrefix.ReplaceAllString(string(data), "")
		n := func(re string) uint64 { return uint64(len(regexp.MustCompile("(?m)"+re).FindAllString(text, -1))) }
		var updates, micros uint64
		for _, m := range regexp.MustCompile(`(?m)^Incremental updates: (\d+) updates / (\d+) us$`).FindAllStringSubmatch(text, -1) {
			u, _ := strconv.ParseUint(m[1], 10, 64)
			us, _ := strconv.ParseUint(m[2], 10, 64)
			updates, micros = updates+u, micros+us
		}
		for ev, want := range map[KpropdEvent]uint64{
			KpropdStart:              n(`^Incremental propagation enabled$`),
			KpropdPoll:               n(`^Calling iprop_get_updates_1 \(`),
			KpropdInSync:             n(`^KDC is synchronized with primary\.$`),
			KpropdUpdates:            n(`^Incremental updates: `),
			KpropdFullResyncNeeded:   n(`^(kpropd: )?Full resync needed\.?$`),
			KpropdFullResyncGranted:  n(`^Full resync request granted\.?$`),
			KpropdFullPropConnection: n(`^Connection from `),
			KpropdFullPropReceived:   n(`^Full propagation transfer finished\.$`),
			KpropdFullPropLoaded:     n(`^Database load process for full propagation completed\.$`),
		} {
			if got := k.events[ev].Load(); got != want {
				t.Errorf("%s: %s = %d, want %d", fixture, kpropdEventNames[ev], got, want)
			}
		}
		for e, want := range map[KpropdErr]uint64{
			KpropdErrConnect:          n(`while attempting to connect to primary KDC`),
			KpropdErrRPC:              n(`^iprop_get_updates call failed`),
			KpropdErrPermissionDenied: n(`^get_updates,? permission denied\.?$`),
			KpropdErrGaveUp:           n(`do_iprop failed\.$`),
		} {
			if got := k.errors[e].Load(); got != want || want == 0 && e != KpropdErrRPC {
				t.Errorf("%s: error %s = %d, want %d (and some)", fixture, kpropdErrNames[e], got, want)
			}
		}
		if got := k.events[KpropdError].Load(); got != n(`call failed|permission denied\.?$|attempting to connect|do_iprop failed`) {
			t.Errorf("%s: error events = %d", fixture, got)
		}
		if k.updates.Load() != updates || k.micros.Load() != micros || updates == 0 {
			t.Errorf("%s: updates %d / %d us, want %d / %d", fixture, k.updates.Load(), k.micros.Load(), updates, micros)
		}
		// What both forms carry.
		for _, ev := range []KpropdEvent{KpropdUpdates, KpropdFullResyncNeeded, KpropdFullResyncGranted, KpropdFullPropConnection} {
			if k.events[ev].Load() == 0 {
				t.Errorf("%s: no %s", fixture, kpropdEventNames[ev])
			}
		}
	}
}

// FuzzParseKpropd: nothing panics, an updates line always carries its
// numbers, and event and error stay in their enums.
//
//	go test ./kdclog -run '^$' -fuzz FuzzParseKpropd -fuzztime 60s
func FuzzParseKpropd(f *testing.F) {
	for _, tc := range kpropdCases {
		f.Add([]byte(tc.line))
	}
	for _, fixture := range kpropdFixtures {
		if data, err := os.ReadFile(fixture); err == nil {
			for _, l := range strings.Split(string(data), "\n") {
				f.Add([]byte(l))
			}
		}
	}
	var k kpropdCounts
	f.Fuzz(func(t *testing.T, line []byte) {
		l, reason := ParseKpropd(line)
		if reason >= numReasons || l.Event >= numKpropdEvents || l.Err >= numKpropdErrs {
			t.Fatalf("out of range: %+v %d", l, reason)
		}
		if reason != ReasonNone && (l != KpropdLine{}) {
			t.Fatalf("not understood but %+v", l)
		}
		if (l.Err != KpropdErrNone) != (l.Event == KpropdError) {
			t.Fatalf("event %d with error %d", l.Event, l.Err)
		}
		if l.Event == KpropdUpdates && !bytes.Contains(line, []byte(" updates / ")) {
			t.Fatalf("updates from %q", line)
		}
		k.handle(line)
	})
}

// TestKpropdLogE2E follows a real replica's kpropd output through a
// Manager: 20 principals added on the primary are 20 updates counted.
func TestKpropdLogE2E(t *testing.T) {
	ctx := context.Background()
	p := realmtest.Realm(t, realm.Options{Users: 2, Services: 1})
	r := realmtest.Replica(t, p)
	s := src(r.Replica.Log)
	s.Type = "kpropd"
	tm := startManager(t, "", s)
	// The initial full resync.
	waitValue(t, tm.reg, 1, "krb5_kpropd_events_total", "event", "full_propagation_loaded")
	var adds []string
	for i := range 20 {
		adds = append(adds, fmt.Sprintf("addprinc -randkey -clearpolicy e2e%02d", i))
	}
	if _, err := p.KadminLocal(ctx, adds...); err != nil {
		t.Fatal(err)
	}
	waitValue(t, tm.reg, 20, "krb5_kpropd_updates_total")
	if v := value(t, tm.reg, "krb5_kdc_log_lines_unparsed_total", "path", r.Replica.Log, "reason", "unknown_message"); v != 0 {
		t.Errorf("%v lines of the real kpropd not understood", v)
	}
	if v := value(t, tm.reg, "krb5_kdc_requests_total"); v != -1 {
		t.Errorf("a kpropd log alone exports KDC request series")
	}
}
