package web

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// fixedRegistry has many series of fixed values, so that two scrapes
// give the same body.
func fixedRegistry(t testing.TB) *prometheus.Registry { return fixedRegistryN(t, 64) }

// fixedRegistryN is fixedRegistry with 3 series for each of workers.
func fixedRegistryN(t testing.TB, workers int) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_requests_total", Help: "h"}, []string{"worker", "state"})
	for w := 0; w < workers; w++ {
		for _, s := range []string{"R", "S", "D"} {
			v.WithLabelValues(fmt.Sprint(w), s).Add(float64(w*3 + len(s)))
		}
	}
	reg.MustRegister(v)
	return reg
}

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// DisableCompression: see the reply's encoding as sent.
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestMetricsHandlerGzip: the reply, gzipped or not as Accept-Encoding
// asks, is promhttp's own uncompressed body; for a small body (8 kB) and
// one of 290 kB, which the stateless compressor writes in several blocks
// (at most 32 kB each), compressed to less than a fifth.
func TestMetricsHandlerGzip(t *testing.T) {
	for _, workers := range []int{64, 2000} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) { testMetricsHandlerGzip(t, fixedRegistryN(t, workers)) })
	}
}

func testMetricsHandlerGzip(t *testing.T, reg *prometheus.Registry) {
	ours := httptest.NewServer(MetricsHandler(reg, promhttp.HandlerOpts{}))
	defer ours.Close()
	theirs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true}))
	defer theirs.Close()
	// The independent truth: promhttp's own uncompressed reply.
	_, want := get(t, theirs.URL, nil)
	if !bytes.Contains(want, []byte(`test_requests_total{state="R",worker="63"} 190`)) {
		t.Fatalf("reference body lacks a series:\n%.300s", want)
	}
	promAccept := "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
	for _, tc := range []struct {
		enc  string
		gzip bool
	}{
		{"gzip", true}, // as Prometheus sends it
		{"", false},
		{"identity", false},
		{"gzip;q=0", false},
		{"br, gzip;q=0.5", true},
		{"*", true},
		{"*;q=0.3, gzip;q=0", false},
		{"deflate", false},
	} {
		hdr := map[string]string{"Accept": promAccept}
		if tc.enc != "" {
			hdr["Accept-Encoding"] = tc.enc
		}
		resp, body := get(t, ours.URL, hdr)
		if resp.StatusCode != 200 {
			t.Fatalf("%q: status %d", tc.enc, resp.StatusCode)
		}
		ce := resp.Header.Get("Content-Encoding")
		if tc.gzip {
			if ce != "gzip" {
				t.Fatalf("%q: Content-Encoding %q, want gzip", tc.enc, ce)
			}
			if len(body) > len(want)/5 {
				t.Errorf("%q: %d bytes gzipped for %d", tc.enc, len(body), len(want))
			}
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("%q: %v", tc.enc, err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatalf("%q: %v", tc.enc, err)
			}
		} else if ce != "" {
			t.Fatalf("%q: Content-Encoding %q, want none", tc.enc, ce)
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("%q: body differs from promhttp's:\n%.300s", tc.enc, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct == "" {
			t.Fatalf("%q: no Content-Type", tc.enc)
		}
	}
}

// BenchmarkMetricsHandler compares promhttp's default gzip with ours on
// the same body, side by side in one run.
func BenchmarkMetricsHandler(b *testing.B) {
	reg := fixedRegistry(b)
	for _, h := range []struct {
		name string
		h    http.Handler
	}{
		{"promhttp-default", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})},
		{"bestspeed", MetricsHandler(reg, promhttp.HandlerOpts{})},
	} {
		b.Run(h.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.Header.Set("Accept-Encoding", "gzip")
			b.ReportAllocs()
			var n int
			for b.Loop() {
				w := httptest.NewRecorder()
				h.h.ServeHTTP(w, req)
				if w.Header().Get("Content-Encoding") != "gzip" {
					b.Fatal("not gzipped")
				}
				n = w.Body.Len()
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}
