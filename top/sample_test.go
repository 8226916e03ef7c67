package top

import (
	"bytes"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/metricsdoc"
)

// A registry with the series the view reads, moved by known amounts
// between two samples two seconds apart.
func TestSampleRates(t *testing.T) {
	reg := prometheus.NewRegistry()
	req := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mWorkerRequests, Help: "h"}, []string{"worker", "request", "status"})
	cpu := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mWorkerCPU, Help: "h"}, []string{"worker", "mode"})
	rss := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: mWorkerRSS, Help: "h"}, []string{"worker"})
	kadm := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mKadmind, Help: "h"}, []string{"operation", "result"})
	drops := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mUDPDrops, Help: "h"}, []string{"address"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: mProbeDuration, Help: "h"}, []string{"target", "exchange", "transport"})
	ok := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: mProbeSuccess, Help: "h"}, []string{"target", "exchange"})
	reg.MustRegister(req, cpu, rss, kadm, drops, dur, ok)
	dur.WithLabelValues("kdc1", "as", "udp").Observe(0.004)
	ok.WithLabelValues("kdc1", "as").Set(1)
	req.WithLabelValues("0", "as", "ISSUE").Add(5)
	req.WithLabelValues("1", "tgs", "ISSUE").Add(7)
	cpu.WithLabelValues("0", "user").Add(10)
	s := NewSampler(reg)
	t0 := time.Unix(1000, 0)
	first, err := s.Sample(t0)
	if err != nil || first.Interval != 0 || first.Total.Requests() != 0 {
		t.Fatalf("first sample: %+v, %v", first, err)
	}
	req.WithLabelValues("0", "as", "ISSUE").Add(40)
	req.WithLabelValues("0", "as", "NEEDED_PREAUTH").Add(40)
	req.WithLabelValues("0", "as", "PREAUTH_FAILED").Add(2)
	req.WithLabelValues("1", "tgs", "ISSUE").Add(100)
	req.WithLabelValues("1", "tgs", "S_PRINCIPAL_UNKNOWN").Add(6)
	cpu.WithLabelValues("0", "user").Add(0.6)
	cpu.WithLabelValues("0", "system").Add(0.4)
	cpu.WithLabelValues("1", "user").Add(1.2)
	rss.WithLabelValues("1").Set(8 << 20)
	kadm.WithLabelValues("kadm5_get_principal", "success").Add(8)
	kadm.WithLabelValues("kadm5_get_principal", "failure").Add(2)
	drops.WithLabelValues("127.0.0.1:88").Add(3)
	dur.WithLabelValues("kdc1", "as", "udp").Observe(0.010)
	dur.WithLabelValues("kdc1", "as", "tcp").Observe(0.020)
	snap, err := s.Sample(t0.Add(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Row{}
	for _, r := range snap.Rows {
		byName[r.Name] = r
	}
	w0, w1 := byName["0"], byName["1"]
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"w0 AS ok", w0.ASOK, 20}, {"w0 AS step", w0.ASStep, 20}, {"w0 AS err", w0.ASErr, 1},
		{"w0 cpu", w0.CPU, 0.5}, {"w1 tgs ok", w1.TGSOK, 50}, {"w1 tgs err", w1.TGSErr, 3},
		{"w1 cpu", w1.CPU, 0.6}, {"w1 rss", w1.RSS, 8 << 20}, {"total", snap.Total.Requests(), 20 + 20 + 1 + 50 + 3},
		{"error ratio", snap.Total.ErrorRatio(), 4.0 / 74}, {"kadmin", snap.KadminOps, 5}, {"kadmin err", snap.KadminErr, 1},
		{"drops", snap.UDPDrops, 1.5},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	// The probes completed in the interval: their mean latency; the one
	// before top started is not counted.
	if len(snap.Probes) != 1 || snap.Probes[0].Latency != 15*time.Millisecond || !snap.Probes[0].OK {
		t.Errorf("probes = %+v, want kdc1/as OK 15ms", snap.Probes)
	}
	// A worker whose series vanish is shown as gone.
	req.DeleteLabelValues("1", "tgs", "ISSUE")
	req.DeleteLabelValues("1", "tgs", "S_PRINCIPAL_UNKNOWN")
	cpu.DeleteLabelValues("1", "user")
	rss.DeleteLabelValues("1")
	snap, _ = s.Sample(t0.Add(3 * time.Second))
	var out bytes.Buffer
	Write(&out, snap, View{Sort: ByName})
	if !strings.Contains(out.String(), "kdc1/as OK 15ms") { // no new probe: the latest one stays
		t.Errorf("probe latency not kept:\n%s", out.String())
	}
	if !regexp.MustCompile(`(?m)^1 +gone `).MatchString(out.String()) {
		t.Errorf("worker 1 not shown as gone:\n%s", out.String())
	}
}

func TestSortAndFilter(t *testing.T) {
	rows := []Row{{Name: "10", CPU: 0.1}, {Name: "2", CPU: 0.9, ASErr: 1}, {Name: "main"}, {Name: "0", TGSOK: 5}}
	SortRows(rows, ByName)
	if got := names(rows); got != "main,0,2,10" {
		t.Errorf("by name: %s", got)
	}
	SortRows(rows, ByCPU)
	if got := names(rows); !strings.HasPrefix(got, "2,10") {
		t.Errorf("by cpu: %s", got)
	}
	SortRows(rows, ByRequests)
	if got := names(rows); !strings.HasPrefix(got, "0,2") {
		t.Errorf("by requests: %s", got)
	}
	vis := VisibleRows(Snapshot{Rows: rows}, View{Sort: ByName, Filter: "1"})
	if got := names(vis); got != "10" {
		t.Errorf("filter 1: %s", got)
	}
}

func names(rows []Row) string {
	var n []string
	for _, r := range rows {
		n = append(n, r.Name)
	}
	return strings.Join(n, ",")
}

// Every series the view is made of is one docs/metrics.md documents: the
// daemon's come from its collectors' constants, top's own Source's are
// declared here, so a renamed series fails this test or the build rather
// than leaving a column empty.
func TestSeriesNamesDocumented(t *testing.T) {
	doc := metricsdoc.Documented(t)
	for _, name := range []string{mWorkerRequests, mWorkerCPU, mWorkerRSS, mWorkerPID, mProcessCPU, mProcessRSS,
		mKadmind, mKadmindAuth, mUDPDrops, mTCPOverflows, mProbeSuccess, mProbeDuration, mAttackOffender,
		mServiceSeconds, mServiceSplit, mQueueSeconds, mWorkerService, mWorkerServed, mTracingUp, mTracingErrors,
		mTopRequests, mTopFailures, mTopRetransmits, mTopWindow} {
		if doc[name] == "" {
			t.Errorf("top reads %s, which docs/metrics.md does not document", name)
		}
	}
}
