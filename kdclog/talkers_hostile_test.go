package kdclog

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/kdclog/attack"
	"github.com/krb5-exporter/krb5-exporter/kdclog/talkers"
)

// TestTopTalkersHostileLines feeds a source 100,000 forged addresses,
// principals and services of up to 2 kB with escape sequences, NULs and
// invalid UTF-8, an empty client and one named as the empty one is shown,
// in logins, failures, service tickets and retransmits, over a window
// closed after them. The heap does not grow with the lines, each list
// exports at most k names with printable label values of bounded
// length, unique (the pedantic registry refuses a duplicate), and the
// one steady client among them is ranked first with its exact count.
func TestTopTalkersHostileLines(t *testing.T) {
	c := newCounts()
	now := time.Now().Truncate(time.Minute)
	c.talkers.now = func() time.Time { return now }
	s := newSource(config.LogSource{Path: "t", Type: "kdc"}, c, &sourceStats{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(talkersOnly{c.talkers})
	junk := strings.Repeat("\x1b[2J\x00\xff\\\"\r", 250)
	steady := 0
	feed := func(n int) {
		for i := range n {
			addr := fmt.Sprintf("10.%d.%d.%d%s", i>>16&255, i>>8&255, i&255, junk[:i%40])
			client := fmt.Sprintf("%s%d@PERF.TEST", junk[:i%len(junk)], i)
			if i%3 == 0 {
				client = []string{"", talkers.EmptyName}[i%2] // the empty name, and one named as it is shown
			}
			s.handle([]byte(hdr+"AS_REQ ("+etypes4+") "+addr+": PREAUTH_FAILED: "+client+" for krbtgt/PERF.TEST@PERF.TEST, Preauthentication failed"), false)
			s.handle([]byte(hdr+"TGS_REQ ("+etypes4+") "+addr+": ISSUE: authtime 1, etypes {rep=18 tkt=18 ses=18}, "+client+" for "+client), false)
			s.handle([]byte(hdr+"TGS_REQ ("+etypes4+") "+addr+": UNKNOWN_SERVER: authtime 0,  "+client+" for x"+client+", Server not found in Kerberos database"), false)
			s.handle([]byte(hdr+"DISPATCH: repeated (retransmitted?) request from "+addr+", resending previous response"), false)
			if i%2 == 0 {
				s.handle([]byte(hdr+"AS_REQ ("+etypes4+") 192.0.2.1: ISSUE: authtime 1, "+issueReps+", job@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST"), false)
				steady++
			}
			if i%4096 == 0 {
				s.flush()
			}
		}
		s.flush()
	}
	flatHeap(t, feed, 4.5)
	now = now.Add(time.Minute)
	got := testutil.Gather(t, reg)
	lists := map[string]int{}
	for _, name := range []string{MetricTopRequests, MetricTopFailures, MetricTopRetransmits} {
		for _, me := range got.MFs[name].GetMetric() {
			list := name
			for _, lp := range me.GetLabel() {
				v := lp.GetValue()
				if lp.GetName() != "name" {
					list += "," + v
				}
				if len(v) > 4*attack.MaxName+3 {
					t.Errorf("%s: a label value of %d bytes", name, len(v))
				}
				for _, b := range []byte(v) {
					if b < 0x20 || b >= 0x7f {
						t.Fatalf("%s: label value %q holds byte %#x", name, v, b)
					}
				}
			}
			lists[list]++
		}
	}
	for l, n := range lists {
		if n > config.DefaultTopTalkersK {
			t.Errorf("%s: %d series", l, n)
		}
	}
	// requests by address, client (as, tgs) and service; failures by
	// address, client, service; retransmits.
	if len(lists) != 9 {
		t.Errorf("%d lists, want 9: %v", len(lists), lists)
	}
	if v := got.Value(MetricTopRequests, "by", "client", "request", "as", "name", "job@PERF.TEST"); v != float64(steady) {
		t.Errorf("the steady client's AS requests %v, want %d", v, steady)
	}
}

// talkersOnly exports the top talkers' series alone.
type talkersOnly struct{ s *talkersState }

func (a talkersOnly) Describe(ch chan<- *prometheus.Desc) { describeTalkers(ch) }
func (a talkersOnly) Collect(ch chan<- prometheus.Metric) { a.s.collect(ch) }
