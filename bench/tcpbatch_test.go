package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// tcpActiveOpens is the kernel's count of TCP connections this machine
// opened (/proc/net/snmp Tcp: ActiveOpens).
func tcpActiveOpens(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i++ {
		h, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(h) == 0 || h[0] != "Tcp:" || len(v) != len(h) || v[0] != "Tcp:" {
			continue
		}
		for j := range h {
			if h[j] == "ActiveOpens" {
				n, _ := strconv.ParseInt(v[j], 10, 64)
				return n
			}
		}
	}
	t.Fatal("no Tcp ActiveOpens in /proc/net/snmp")
	return 0
}

// The tcp load on the batched generator (the default): every login is a
// fresh kinit -k over TCP, one connection per round trip (the kernel's
// count of opened connections and the KDC's log are the witnesses), with
// encrypted timestamp and with SPAKE (three round trips), no errors, a
// few connections in flight and one wait per several round trips. The
// connections come from one socket per login in flight, reconnected for
// each round trip (connect(AF_UNSPEC) then connect), not a socket per
// connection. The suite's tcp test shows it in the report; the counts
// are checked on a load stopped after a number of logins (not after a
// time: how many a time allows depends on the machine's load).
func TestBatchedTCP(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true})
	sys := RealmSystem(r)
	if err := sys.validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		preauth krb5.PreauthMode
		trips   int
	}{{krb5.PreauthEncTimestamp, 2}, {krb5.PreauthSPAKE, 3}} {
		s := small("tcp")
		s.Preauth = string(tc.preauth)
		rep := runSuite(t, sys, s)
		if st := test(rep, "tcp"); st.Status == "error" {
			t.Fatalf("%s: %+v", tc.preauth, st)
		}
		l := rep.TCP.Load
		if l.Requests-l.Errors < 1 || l.Errors > 0 {
			t.Fatalf("%s: %d logins, %d errors: %v", tc.preauth, l.Requests, l.Errors, l.ErrorTexts)
		}
		if l.Transport != "tcp" || l.Clients != tcpMaxInflight {
			t.Errorf("%s: transport %s, %d in flight; want tcp, %d", tc.preauth, l.Transport, l.Clients, tcpMaxInflight)
		}
		if want := tc.preauth; !strings.Contains(rep.System.Preauth, string(want)) {
			t.Errorf("%s: report says the generator used %q", tc.preauth, rep.System.Preauth)
		}

		const n = 60
		ru := &run{sys: sys, set: Defaults(), prog: &progress{}, fleet: &fleet{sys: sys, preauth: tc.preauth}, sampler: newSampler(r.KDCPids), rep: &Report{}}
		drainKDC(t, r)
		from := logSize(t, r.KDCLog)
		opens := tcpActiveOpens(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		l, err := ru.batchedTCP(ctx, tcpMaxInflight, time.Minute, n)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tc.preauth, err)
		}
		drainKDC(t, r)
		ok := l.Requests - l.Errors
		if ok < n || l.Errors > 0 {
			t.Fatalf("%s: %d logins, %d errors: %v", tc.preauth, l.Requests, l.Errors, ru.errTexts)
		}
		if l.GeneratorWaits == 0 || l.GeneratorWaits > ok*tc.trips {
			t.Errorf("%s: %d waits for %d round trips", tc.preauth, l.GeneratorWaits, ok*tc.trips)
		}
		issued := logCount(t, r.KDCLog, from, asIssue)
		if issued < ok || issued > ok+tcpMaxInflight {
			t.Errorf("%s: %d logins counted, the KDC issued %d", tc.preauth, ok, issued)
		}
		if n := tcpActiveOpens(t) - opens; n < int64(ok*tc.trips) {
			t.Errorf("%s: %d logins of %d round trips, but only %d TCP connections opened", tc.preauth, ok, tc.trips, n)
		}
		if l.sockets < 1 || l.sockets > tcpMaxInflight {
			t.Errorf("%s: the generator opened %d sockets for %d connections, want one per login in flight (at most %d)", tc.preauth, l.sockets, ok*tc.trips, tcpMaxInflight)
		}
		t.Logf("%s: %d logins, %d waits, %d sockets", tc.preauth, ok, l.GeneratorWaits, l.sockets)
	}
}
