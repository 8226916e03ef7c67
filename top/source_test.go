package top

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// A real krb5kdc -w 4 answers known requests: what top counts per worker
// adds up to what the client sent, every row is a real worker pid, and the
// workers' rows are gone once the KDC is stopped.
func TestSourceAgainstWorkers(t *testing.T) {
	r := testutil.Realm(t, realm.Options{Workers: 4, NoKadmind: true})
	src, err := NewSource([]string{r.KDCLog}, r.KDCPidFile, "/proc", log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	s := NewSampler(reg)
	if _, err := s.Sample(time.Now()); err != nil {
		t.Fatal(err)
	}
	// The tailer starts at the log's end: wait until it has opened it by
	// seeing one marker request counted, then send the known load.
	send := func(n int) int {
		conn, err := net.Dial("udp", r.KDCAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		answered := 0
		buf := make([]byte, 4096)
		for i := 0; i < n; i++ {
			req, err := realm.ASRequest(r.Realm, "nosuchuser"+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write(req); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Read(buf); err == nil {
				answered++ // the KDC logged it before answering
			}
		}
		return answered
	}
	total := func() float64 {
		var n float64
		for _, mf := range testutil.Gather(t, reg).MFs {
			if mf.GetName() == mWorkerRequests {
				for _, m := range mf.GetMetric() {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	testutil.Eventually(t, 30*time.Second, "top to follow the log", func() bool {
		send(1)
		time.Sleep(200 * time.Millisecond)
		return total() > 0
	})
	before := total()
	sent := send(200)
	testutil.Eventually(t, 30*time.Second, "every answered request counted", func() bool { return total()-before == float64(sent) })

	snap, err := s.Sample(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int]bool{}
	for _, p := range r.KDCPids() {
		pids[p] = true
	}
	workers := 0
	var sum float64
	for _, row := range snap.Rows {
		if row.Name == "supervisor" || row.Gone {
			continue
		}
		if _, err := strconv.Atoi(row.Name); err != nil {
			t.Errorf("row %q: not a worker index", row.Name)
			continue
		}
		workers++
		if !pids[row.PID] {
			t.Errorf("worker %s: pid %d is not one of the KDC's %v", row.Name, row.PID, r.KDCPids())
		}
		sum += row.ASErr * snap.Interval.Seconds()
	}
	if workers != 4 {
		t.Errorf("%d worker rows, want 4: %+v", workers, snap.Rows)
	}
	// Rates times the interval give back the counts sent since the first
	// sample (the markers included), within float rounding.
	if want := total(); sum < want-0.5 || sum > want+0.5 {
		t.Errorf("per-worker requests add up to %.1f, the log holds %.0f", sum, want)
	}

	// Another realm's KDC on the host (as a second test suite runs one)
	// is never taken for this one once its pid file is gone.
	testutil.Realm(t, realm.Options{NoKadmind: true})
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Sample(time.Now())
	gone := 0
	for _, row := range snap.Rows {
		if row.Gone {
			gone++
		}
	}
	if gone < 4 {
		t.Errorf("after the KDC stopped, %d rows gone: %+v", gone, snap.Rows)
	}
}
