package top

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCapacityFromDaemon: the daemon's capacity estimate at the mix is
// shown in the header with the share of it the requests top counted from
// the log use: 500 requests/s of 2000 is 25 %; its source label printed
// escaped. The daemon's per-type estimates are not shown.
func TestCapacityFromDaemon(t *testing.T) {
	e := &exposition{}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	d := NewDaemon(srv.URL+"/metrics", 2*time.Second)
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "krb5_kdc_worker_requests_total", Help: "h"}, []string{"worker", "request", "status"})
	reg.MustRegister(reqs)
	s := NewSampler(prometheus.Gatherers{d, reg})
	s.ReadDaemon(d)
	e.set("# TYPE krb5_kdc_capacity_requests_per_second gauge\n" +
		`krb5_kdc_capacity_requests_per_second{request="mix",source="proc` + "\x1b[2J" + `"} 2000` + "\n" +
		`krb5_kdc_capacity_requests_per_second{request="as",source="proc` + "\x1b[2J" + `"} 900` + "\n")
	t0 := time.Unix(1000, 0)
	s.Sample(t0)
	reqs.WithLabelValues("0", "as", "ISSUE").Add(500)
	snap, err := s.Sample(t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Capacity != 2000 {
		t.Fatalf("capacity %g, want the mix's 2000", snap.Capacity)
	}
	var out bytes.Buffer
	Write(&out, snap, View{Sort: ByName})
	text := out.String()
	if !strings.Contains(text, "capacity ~2000.0/s (proc\\x1b[2J) used 25.0%") {
		t.Errorf("no capacity in the header:\n%s", text)
	}
	if strings.Contains(text, "\x1b") {
		t.Error("an escape sequence from the daemon reached the screen")
	}

	e.set("")
	snap, _ = s.Sample(t0.Add(2 * time.Second))
	out.Reset()
	Write(&out, snap, View{Sort: ByName})
	if strings.Contains(out.String(), "capacity") {
		t.Errorf("a capacity without the daemon's estimate:\n%s", out.String())
	}
}
