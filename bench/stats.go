package bench

import (
	"math"
	"slices"
	"time"
)

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// summarize sorts ds in place and returns its summary; percentiles are the
// nearest rank (the value at or below which p of the requests fell).
func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		i = max(0, min(i, len(ds)-1))
		return ms(ds[i])
	}
	return Latency{
		Count: len(ds), AvgMS: ms(sum) / float64(len(ds)),
		P50MS: q(0.50), P90MS: q(0.90), P95MS: q(0.95), P99MS: q(0.99), P999MS: q(0.999),
		MaxMS: ms(ds[len(ds)-1]),
	}
}

// slope is the least-squares slope of ys against 1, 2, ... len(ys).
func slope(ys []float64) float64 {
	n := float64(len(ys))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i, y := range ys {
		x := float64(i + 1)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}
