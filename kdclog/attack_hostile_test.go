package kdclog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/kdclog/attack"
)

// TestAttackHostileLines feeds a source forged log lines: a spray from
// 100,000 addresses, principal names of up to 2 kB with escape sequences,
// NULs and invalid UTF-8, unknown principals and service tickets. The
// attack series stay at k offenders per signal, with printable label
// values of bounded length, and the heap grows no more than the offender
// tables' bound (attack.MaxBytes).
func TestAttackHostileLines(t *testing.T) {
	c := newCounts()
	cfg := config.AttackSignals{RecoveryWait: 1, FollowLogins: true, FollowServiceTickets: true}
	c.attack.apply(cfg)
	s := newSource(config.LogSource{Path: "t", Type: "kdc"}, c, &sourceStats{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(attackOnly{c.attack})
	junk := strings.Repeat("\x1b[2J\x00\xff\\\"\r", 250)
	feed := func(n int) {
		for i := range n {
			addr := fmt.Sprintf("10.%d.%d.%d%s", i>>16&255, i>>8&255, i&255, junk[:i%40])
			client := fmt.Sprintf("%s%d@PERF.TEST", junk[:i%len(junk)], i)
			s.handle([]byte(hdr+"preauth (spake) verify failure: Preauthentication failed"), false)
			s.handle([]byte(hdr+"AS_REQ ("+etypes4+") "+addr+": PREAUTH_FAILED: "+client+" for krbtgt/PERF.TEST@PERF.TEST, Preauthentication failed"), false)
			s.handle([]byte(hdr+"AS_REQ ("+etypes4+") "+addr+": CLIENT_NOT_FOUND: "+client+" for krbtgt/PERF.TEST@PERF.TEST, Client not found in Kerberos database"), false)
			s.handle([]byte(hdr+"AS_REQ ("+etypes4+") "+addr+": ISSUE: authtime 1, "+issueReps+", x"+client+" for krbtgt/PERF.TEST@PERF.TEST"), false)
			s.handle([]byte(hdr+"TGS_REQ ("+etypes4+") "+addr+": ISSUE: authtime 1, etypes {rep=23 tkt=23 ses=23}, "+client+" for "+client), false)
			if i%4096 == 0 {
				s.flush()
			}
		}
		s.flush()
	}
	n := boundedHeap(t, feed, 5, attack.MaxBytes(cfg))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	offenders := map[string]int{}
	for _, mf := range mfs {
		for _, me := range mf.GetMetric() {
			for _, lp := range me.GetLabel() {
				v := lp.GetValue()
				if lp.GetName() == "signal" && mf.GetName() == MetricAttackOffender {
					offenders[v]++
				}
				if len(v) > 4*attack.MaxName+3 {
					t.Errorf("%s: a label value of %d bytes", mf.GetName(), len(v))
				}
				for _, b := range []byte(v) {
					if b < 0x20 || b >= 0x7f {
						t.Fatalf("%s: label value %q holds byte %#x", mf.GetName(), v, b)
					}
				}
			}
			if mf.GetName() == MetricAttackEvents && me.GetLabel()[0].GetValue() == "unknown_client" && me.GetCounter().GetValue() != float64(2000+n) {
				t.Errorf("unknown clients %v, want %d", me.GetCounter().GetValue(), 2000+n)
			}
		}
	}
	for sig, n := range offenders {
		if n > config.DefaultAttackTopK {
			t.Errorf("%s: %d offender series", sig, n)
		}
	}
	if len(offenders) != 5 {
		t.Errorf("offenders of %d signals, want 5: %v", len(offenders), offenders)
	}
}

// attackOnly exports the attack series alone.
type attackOnly struct{ a *attackState }

func (a attackOnly) Describe(ch chan<- *prometheus.Desc) { describeAttack(ch) }
func (a attackOnly) Collect(ch chan<- prometheus.Metric) { a.a.collect(ch) }

// flatHeap feeds 100,000 forged names (10,000 under the race detector,
// ten times slower: still forty times each table's size) after 2,000 to
// warm up, linesPer lines each, and fails when the heap after a GC grew
// by more than 256 KiB: what the log holds must not grow the exporter.
// It returns how many it fed after the warm-up.
func flatHeap(t *testing.T, feed func(n int), linesPer float64) int {
	t.Helper()
	return boundedHeap(t, feed, linesPer, 0)
}

// boundedHeap is flatHeap with tables that may grow up to bound bytes
// (the attack signals' offender tables, attack.MaxBytes).
func boundedHeap(t *testing.T, feed func(n int), linesPer float64, bound int) int {
	t.Helper()
	n := 100000
	if testutil.Race {
		n = 10000
	}
	feed(2000)
	before := testutil.HeapAfterGC()
	feed(n)
	after := testutil.HeapAfterGC()
	growth := int64(after) - int64(before)
	t.Logf("heap %d -> %d bytes (%+d) over %d forged addresses and hostile names (%.0f lines)", before, after, growth, n, linesPer*float64(n))
	if growth > int64(bound)+256<<10 {
		t.Errorf("heap grew by %d bytes (tables' bound %d)", growth, bound)
	}
	return n
}
