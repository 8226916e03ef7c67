package top

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// exposition serves the text exposition it holds, as a daemon's /metrics
// does; set replaces it between two samples.
type exposition struct {
	mu   sync.Mutex
	text string
}

func (e *exposition) set(text string) { e.mu.Lock(); e.text = text; e.mu.Unlock() }

func (e *exposition) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	io.WriteString(w, e.text)
}

// daemonSampler samples the daemon at e's server as top does: through
// Daemon, which takes only the families top does not read itself.
func daemonSampler(t *testing.T, e *exposition) *Sampler {
	t.Helper()
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	d := NewDaemon(srv.URL+"/metrics", 2*time.Second)
	s := NewSampler(prometheus.Gatherers{d})
	s.ReadDaemon(d)
	return s
}

// serviceText is a kdcservice collector's exposition: as over UDP and TCP
// and tgs over UDP, buckets 64 us, 1 ms, 4 ms; the split of as; queue
// time over UDP; two workers; tracing attached. Each value is given.
func serviceText(asUDP, asTCP, tgs, queue [4]float64, asSum, tcpSum, tgsSum, queueSum float64, split [4]float64, workers [4]float64) string {
	var b strings.Builder
	b.WriteString("# TYPE krb5_kdc_request_service_seconds histogram\n")
	h := func(name, labels string, counts [4]float64, sum float64) {
		for i, le := range []string{"6.4e-05", "0.001", "0.004", "+Inf"} {
			b.WriteString(name + `_bucket{` + labels + `,le="` + le + `"} ` + ftoa(counts[i]) + "\n")
		}
		b.WriteString(name + "_sum{" + labels + "} " + ftoa(sum) + "\n")
		b.WriteString(name + "_count{" + labels + "} " + ftoa(counts[3]) + "\n")
	}
	h("krb5_kdc_request_service_seconds", `request="as",transport="udp"`, asUDP, asSum)
	h("krb5_kdc_request_service_seconds", `request="as",transport="tcp"`, asTCP, tcpSum)
	h("krb5_kdc_request_service_seconds", `request="tgs",transport="udp"`, tgs, tgsSum)
	// No other request in the interval: no line for it.
	h("krb5_kdc_request_service_seconds", `request="other",transport="udp"`, [4]float64{0, 1, 1, 1}, 0.0001)
	// A request type top does not know is left out, not a line per value.
	h("krb5_kdc_request_service_seconds", "request=\"bogus\x1b[2J\",transport=\"udp\"", asUDP, asSum)
	b.WriteString("# TYPE krb5_kdc_request_queue_seconds histogram\n")
	h("krb5_kdc_request_queue_seconds", `transport="udp"`, queue, queueSum)
	b.WriteString("# TYPE krb5_kdc_request_service_split_seconds_total counter\n")
	for i, st := range []string{"cpu", "runqueue", "blocked", "stolen"} {
		b.WriteString(`krb5_kdc_request_service_split_seconds_total{request="as",state="` + st + `"} ` + ftoa(split[i]) + "\n")
	}
	b.WriteString("# TYPE krb5_kdc_worker_service_seconds_total counter\n")
	b.WriteString(`krb5_kdc_worker_service_seconds_total{worker="0"} ` + ftoa(workers[0]) + "\n")
	b.WriteString(`krb5_kdc_worker_service_seconds_total{worker="1"} ` + ftoa(workers[1]) + "\n")
	b.WriteString("# TYPE krb5_kdc_worker_service_requests_total counter\n")
	b.WriteString(`krb5_kdc_worker_service_requests_total{worker="0"} ` + ftoa(workers[2]) + "\n")
	b.WriteString(`krb5_kdc_worker_service_requests_total{worker="1"} ` + ftoa(workers[3]) + "\n")
	b.WriteString("# TYPE krb5_kdc_service_tracing_up gauge\nkrb5_kdc_service_tracing_up 1\n")
	// The daemon's own request counters are not taken: top reads the log.
	b.WriteString("# TYPE krb5_kdc_worker_requests_total counter\n" + `krb5_kdc_worker_requests_total{worker="0",request="as",status="ISSUE"} 1e6` + "\n")
	return b.String()
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// TestServiceFromDaemon: two scrapes of a daemon's kdcservice series two
// seconds apart. The expected figures are worked out by hand from the
// changes between the two: as 100 requests over UDP (90 within 1 ms, 10
// within 4 ms) and 100 over TCP (all within 1 ms): p95 at rank 190 of
// 200, the top of the 1 ms bucket, where UDP alone would give 2.5 ms; the
// sums 0.1 s + 0.05 s, a mean of 750 us; 100 requests/s. tgs 50 within
// 64 us: p95 0.95 x 64 us = 61 us. The as split 0.09/0.015/0.045 s: 60,
// 10, 30 %. Queue over UDP 100 reads, 20 within 1 ms, 100 within 4 ms:
// rank 95, 1 ms + 3 ms x 75/80 = 3.81 ms; mean 0.25 s / 100 = 2.5 ms.
// Worker 0 0.1 s for 150 requests (667 us), worker 1 0.0515 s for 100
// (515 us), together 606 us.
func TestServiceFromDaemon(t *testing.T) {
	e := &exposition{}
	s := daemonSampler(t, e)
	e.set(serviceText([4]float64{0, 10, 10, 10}, [4]float64{0, 5, 5, 5}, [4]float64{7, 7, 7, 7}, [4]float64{0, 10, 10, 10},
		0.005, 0.0025, 0.0002, 0.01, [4]float64{1, 1, 1, 1}, [4]float64{1, 2, 100, 200}))
	t0 := time.Unix(1000, 0)
	if _, err := s.Sample(t0); err != nil {
		t.Fatal(err)
	}
	e.set(serviceText([4]float64{0, 100, 110, 110}, [4]float64{0, 105, 105, 105}, [4]float64{57, 57, 57, 57}, [4]float64{0, 30, 110, 110},
		0.105, 0.0525, 0.0017, 0.26, [4]float64{1.09, 1.015, 1.03, 1.015}, [4]float64{1.1, 2.0515, 250, 300}))
	snap, err := s.Sample(t0.Add(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if snap.DaemonErr != nil {
		t.Fatal(snap.DaemonErr)
	}
	if len(snap.Service) != 3 || snap.Service[0].Request != "as" || snap.Service[1].Request != "tgs" || snap.Service[2].Rate != 0 {
		t.Fatalf("service rows %+v, want as, tgs and other without requests", snap.Service)
	}
	as, tgs := snap.Service[0], snap.Service[1]
	byName := map[string]Row{}
	for _, r := range snap.Rows {
		byName[r.Name] = r
	}
	w0, w1 := byName["0"], byName["1"]
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"as rate", as.Rate, 100}, {"as p95", as.P95, 0.001}, {"as mean", as.Mean, 0.00075},
		{"as cpu", as.CPU, 0.6}, {"as runqueue", as.RunQueue, 0.1}, {"as blocked", as.Blocked, 0.2}, {"as stolen", as.Stolen, 0.1},
		{"tgs rate", tgs.Rate, 25}, {"tgs p95", tgs.P95, 0.0000608}, {"tgs mean", tgs.Mean, 0.00003},
		{"worker 0", w0.ServiceMean(), 0.1 / 150}, {"worker 1", w1.ServiceMean(), 0.0515 / 100},
		{"total", snap.Total.ServiceMean(), 0.1515 / 250},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if !math.IsNaN(tgs.CPU) {
		t.Errorf("tgs split %v without its series, want NaN", tgs.CPU)
	}
	if len(snap.Queue) != 1 || snap.Queue[0].Transport != "udp" || math.Abs(snap.Queue[0].P95-0.0038125) > 1e-9 || math.Abs(snap.Queue[0].Mean-0.0025) > 1e-9 {
		t.Errorf("queue %+v, want udp p95 3.8125ms mean 2.5ms", snap.Queue)
	}
	if snap.Total.Requests() != 0 {
		t.Errorf("the daemon's request counters were taken: %v/s", snap.Total.Requests())
	}
	var out bytes.Buffer
	Write(&out, snap, View{Sort: ByName})
	text := out.String()
	for _, want := range []string{
		"\n" + ServiceHeader + "\n",
		"\nas           100.0    1.00ms     750us    60.0   10.0   20.0   10.0\n",
		"\ntgs           25.0      61us      30us       -      -      -      -\n",
		"queue (wait in the socket)  udp p95 3.81ms mean 2.50ms\n",
		"\n" + header(columnsFor(true)) + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		for name, want := range map[string]string{"0 ": "667us", "1 ": "515us", "total ": "606us"} {
			if strings.HasPrefix(line, name) && !strings.HasSuffix(line, " "+want) {
				t.Errorf("row %q: want it to end in %s", line, want)
			}
		}
	}
	if strings.Contains(text, "\nother ") || strings.Contains(text, "bogus") || strings.Contains(text, "\x1b") || strings.Contains(text, "not attached") {
		t.Errorf("other without requests, an unknown request type, an escape or a tracing error shown:\n%q", text)
	}

	// The daemon restarted: its histogram counts from zero again, 10 as
	// requests within 4 ms (p95 at rank 9.5: 1 ms + 3 ms x 9.5/10), TCP
	// unchanged.
	e.set(serviceText([4]float64{0, 0, 10, 10}, [4]float64{0, 105, 105, 105}, [4]float64{57, 57, 57, 57}, [4]float64{0, 30, 110, 110},
		0.03, 0.0525, 0.0017, 0.26, [4]float64{1.09, 1.015, 1.03, 1.015}, [4]float64{1.1, 2.0515, 250, 300}))
	snap, _ = s.Sample(t0.Add(3 * time.Second))
	if as := snap.Service[0]; math.Abs(as.P95-0.00385) > 1e-9 || math.Abs(as.Mean-0.003) > 1e-9 || as.Rate != 10 {
		t.Errorf("after a reset: as %+v, want p95 3.85ms, mean 3ms, 10/s", as)
	}
}

// Without the kdcservice collector's series there are no service lines
// and no service column: nothing shows a 0 for what is not measured.
func TestServiceAbsent(t *testing.T) {
	e := &exposition{}
	s := daemonSampler(t, e)
	e.set("# TYPE krb5_probe_success gauge\nkrb5_probe_success{target=\"kdc1\",exchange=\"as\"} 1\n")
	t0 := time.Unix(1000, 0)
	s.Sample(t0)
	snap, err := s.Sample(t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if snap.HasService || snap.Service != nil || snap.Queue != nil || snap.Tracing != nil {
		t.Errorf("service fields without their series: %+v %+v %+v %+v", snap.HasService, snap.Service, snap.Queue, snap.Tracing)
	}
	var out bytes.Buffer
	Write(&out, snap, View{Sort: ByName})
	text := out.String()
	if !strings.Contains(text, "\n"+header(columnsFor(false))+"\n") {
		t.Errorf("no plain header in:\n%s", text)
	}
	for _, no := range []string{"SVC", "SERVICE", "queue", "tracing"} {
		if strings.Contains(text, no) {
			t.Errorf("%q without the kdcservice series:\n%s", no, text)
		}
	}
}

// A collector that is on but not attached says so, with its reasons.
func TestServiceTracingDown(t *testing.T) {
	e := &exposition{}
	s := daemonSampler(t, e)
	e.set("# TYPE krb5_kdc_service_tracing_up gauge\nkrb5_kdc_service_tracing_up 0\n" +
		"# TYPE krb5_kdc_service_tracing_errors_total counter\n" +
		"krb5_kdc_service_tracing_errors_total{reason=\"permission\"} 3\nkrb5_kdc_service_tracing_errors_total{reason=\"attach\"} 0\n" +
		"krb5_kdc_service_tracing_errors_total{reason=\"no_btf\x1b\"} 1\n")
	snap, err := s.Sample(time.Unix(1000, 0))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	Write(&out, snap, View{Sort: ByName})
	if want := "service tracing: not attached (errors: no_btf\\x1b, permission)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("no %q in:\n%s", want, out.String())
	}
}
