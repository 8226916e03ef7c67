// Package web holds the daemon's HTTP handlers that serve any registry:
// it knows no collector and no Kerberos, and cmd wires it to the
// registry the collectors fill.
package web

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler is promhttp.HandlerFor with the reply gzipped at
// gzip.BestSpeed instead of promhttp's default level: at -w 64 the
// default level costs about a third of the HTTP reply's CPU for a body
// a few percent smaller (collector/testdata/README.md, round 3). The
// gzip is klauspost/compress's (the same format): at BestSpeed it takes
// a third of compress/gzip's CPU for a 20 kB reply, and its output is
// smaller (round 6). Since round 8 the body is gathered whole and
// compressed in one call by its stateless compressor: BestSpeed keeps a
// 128 KiB match table that each reply touches all over and that is cold
// again by the next scrape; the stateless one has a 16 KiB table on the
// stack per block of at most 32 kB (a 20 kB reply with cold caches: 69
// against 90 µs, 2 % more bytes). The body is the same after
// decompression; clients that do not offer gzip get it uncompressed, as
// from promhttp.
func MetricsHandler(g prometheus.Gatherer, opts promhttp.HandlerOpts) http.Handler {
	opts.DisableCompression = true
	next := promhttp.HandlerFor(g, opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Values("Accept-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		gw := &gzipResponse{ResponseWriter: w}
		w.Header().Set("Content-Encoding", "gzip")
		next.ServeHTTP(gw, r)
		gw.close()
	})
}

var gzipWriters = sync.Pool{New: func() any {
	z, _ := gzip.NewWriterLevel(nil, gzip.StatelessCompression)
	return z
}}

var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// gzipResponse compresses what the handler writes, unless the handler
// took the Content-Encoding back (an error reply written by
// http.Error), in which case it passes the body through.
type gzipResponse struct {
	http.ResponseWriter
	z       *gzip.Writer
	buf     *bytes.Buffer
	decided bool
}

func (g *gzipResponse) WriteHeader(code int) {
	if !g.decided {
		g.decided = true
		h := g.ResponseWriter.Header()
		if h.Get("Content-Encoding") == "gzip" {
			h.Del("Content-Length")
			g.z = gzipWriters.Get().(*gzip.Writer)
			g.z.Reset(g.ResponseWriter)
			g.buf = bodyBufs.Get().(*bytes.Buffer)
			g.buf.Reset()
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipResponse) Write(p []byte) (int, error) {
	if !g.decided {
		g.WriteHeader(http.StatusOK)
	}
	if g.z == nil {
		return g.ResponseWriter.Write(p)
	}
	return g.buf.Write(p)
}

func (g *gzipResponse) close() {
	if !g.decided {
		// Nothing written: an empty gzip stream still decodes.
		g.WriteHeader(http.StatusOK)
	}
	if g.z != nil {
		g.z.Write(g.buf.Bytes())
		if g.buf.Cap() <= 1<<20 {
			bodyBufs.Put(g.buf)
		}
		g.buf = nil
		g.z.Close()
		g.z.Reset(nil)
		gzipWriters.Put(g.z)
		g.z = nil
	}
}

// acceptsGzip negotiates Accept-Encoding (RFC 9110 §12.5.3): gzip is
// acceptable when named, or matched by "*", with a q-value above 0.
func acceptsGzip(values []string) bool {
	gzipQ, starQ := -1.0, -1.0
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
					if err != nil {
						f = 0
					}
					q = f
				}
			}
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "gzip", "x-gzip":
				gzipQ = q
			case "*":
				starQ = q
			}
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}
