package collector

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
)

// TestServiceHistogramEncoding: the histogram the kdcservice collector
// writes from the program's bucket counts is the one client_golang's own
// histogram writes for the same observations, classic buckets (powers of
// two, 2^-16 to 2 s) and native ones (schema 3, zero threshold 2^-20 s)
// alike: count, sum, zero bucket, spans and deltas. The buckets come
// from bucketOf, a copy of the program's arithmetic: the program's own
// bucketing is checked by TestKDCServiceKnownTimes.
func TestServiceHistogramEncoding(t *testing.T) {
	var bounds []float64
	for e := classicMin; e <= classicMax; e++ {
		bounds = append(bounds, math.Ldexp(1, e))
	}
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ref", Help: "ref", Buckets: bounds,
		NativeHistogramBucketFactor:    math.Pow(2, 1.0/8),
		NativeHistogramZeroThreshold:   kdcbpf.ZeroThreshold,
		NativeHistogramMaxBucketNumber: 1000,
	})
	var h kdcbpf.Hist
	// Observations in whole nanoseconds, as the program has them, over the
	// whole range: below the zero threshold, on bucket bounds, between.
	obs := []uint64{0, 500, 953, 954, 1_000, 15_258, 15_259, 20_000, 20_001, 61_035, 100_000, 250_000, 999_999, 3_000_000, 1_000_000_000, 1_999_999_999}
	for i := 0; i < 200; i++ {
		obs = append(obs, uint64(20_000+i*i*397))
	}
	for _, ns := range obs {
		v := float64(ns) / 1e9
		ref.Observe(v)
		h.Buckets[bucketOf(v)]++
		h.Count++
		h.Sum += ns
	}
	var want dto.Metric
	if err := ref.Write(&want); err != nil {
		t.Fatal(err)
	}
	var got dto.Metric
	m := &histMetric{h: &h}
	if err := m.Write(&got); err != nil {
		t.Fatal(err)
	}
	w, g := want.GetHistogram(), got.GetHistogram()
	if g.GetSampleCount() != w.GetSampleCount() || math.Abs(g.GetSampleSum()-w.GetSampleSum()) > 1e-9 {
		t.Errorf("count/sum %d/%g, client_golang %d/%g", g.GetSampleCount(), g.GetSampleSum(), w.GetSampleCount(), w.GetSampleSum())
	}
	for i, b := range w.GetBucket() {
		if gb := g.GetBucket()[i]; gb.GetUpperBound() != b.GetUpperBound() || gb.GetCumulativeCount() != b.GetCumulativeCount() {
			t.Errorf("classic bucket %d: le %g count %d, client_golang le %g count %d", i, gb.GetUpperBound(), gb.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
	if g.GetSchema() != w.GetSchema() || g.GetZeroThreshold() != w.GetZeroThreshold() || g.GetZeroCount() != w.GetZeroCount() {
		t.Errorf("schema %d zero threshold %g zero count %d; client_golang %d %g %d", g.GetSchema(), g.GetZeroThreshold(), g.GetZeroCount(), w.GetSchema(), w.GetZeroThreshold(), w.GetZeroCount())
	}
	if a, b := expand(g), expand(w); !equalMaps(a, b) {
		t.Errorf("native buckets\n got %v\nwant %v", a, b)
	}
}

// bucketOf is the program's bucket for v seconds (bucket.c's arithmetic
// in floating point): the b with v in (UpperBound(b-1), UpperBound(b)].
func bucketOf(v float64) int {
	if v <= kdcbpf.ZeroThreshold {
		return 0
	}
	i := int(math.Ceil(math.Log2(v) * 8))
	if math.Pow(2, float64(i-1)/8) >= v { // rounding at a bound
		i--
	}
	return min(max(i-kdcbpf.MinIndex, 0), kdcbpf.NumBuckets-1)
}

// expand turns spans and deltas into index -> count, empty buckets left
// out.
func expand(h *dto.Histogram) map[int]int64 {
	m := map[int]int64{}
	idx, n := 0, int64(0)
	d := 0
	for i, s := range h.GetPositiveSpan() {
		if i == 0 {
			idx = int(s.GetOffset())
		} else {
			idx += int(s.GetOffset())
		}
		for range s.GetLength() {
			n += h.GetPositiveDelta()[d]
			d++
			if n != 0 { // client_golang fills short gaps with empty buckets
				m[idx] = n
			}
			idx++
		}
	}
	return m
}

func equalMaps(a, b map[int]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
