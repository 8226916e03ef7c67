package compare

import (
	"math"
	"slices"

	"github.com/aclements/go-moremath/stats"
	"golang.org/x/perf/benchmath"
)

// exactLimit: up to this many samples a side the interval's order
// statistic comes from the exact distribution of U, beyond it from the
// normal approximation (as go-moremath's U test does above 50).
const exactLimit = 50

// test is the comparison of two samples: the Mann-Whitney U test that
// decides, and the Hodges-Lehmann estimate of the shift with its
// distribution-free confidence interval (Moses), both from U's
// distribution.
type test struct {
	u, p              float64
	est, lo, hi, conf float64
	interval          bool // false: too few samples for an interval at the level asked
}

// uTest compares ys (new) with xs (old). U counts the pairs in which the
// new sample is larger (ties half); P is benchmath's (benchstat's)
// two-sided p-value: its AssumeNothing runs go-moremath's
// MannWhitneyUTest, exact for small samples, with the tie correction.
func uTest(xs, ys []float64, alpha float64) test {
	var t test
	thr := benchmath.Thresholds{CompareAlpha: alpha}
	t.p = benchmath.AssumeNothing.Compare(benchmath.NewSample(slices.Clone(xs), &thr), benchmath.NewSample(slices.Clone(ys), &thr)).P
	if r, err := stats.MannWhitneyUTest(ys, xs, stats.LocationDiffers); err == nil {
		t.u = r.U
	} else {
		t.u = float64(len(xs)*len(ys)) / 2 // all equal: half the pairs tie
	}
	return t
}

// shift fills in the Hodges-Lehmann estimate of how far ys lie above xs
// (the median of every difference y - x) and its interval [d(c+1),
// d(N-c)] among the N sorted differences, where c is the largest count
// with P(U <= c) <= alpha/2 under no difference: the interval holds the
// shifts the U test would not reject at level alpha, so it excludes zero
// when the test rejects (up to ties, which the interval's distribution
// leaves out).
func (t *test) shift(xs, ys []float64, confidence float64) {
	d := make([]float64, 0, len(xs)*len(ys))
	for _, x := range xs {
		for _, y := range ys {
			d = append(d, y-x)
		}
	}
	slices.Sort(d)
	n := len(d)
	if n == 0 {
		return
	}
	if n%2 == 1 {
		t.est = d[n/2]
	} else {
		t.est = (d[n/2-1] + d[n/2]) / 2
	}
	c, ok := criticalU(len(xs), len(ys), 1-confidence)
	if !ok {
		return
	}
	t.lo, t.hi, t.interval = d[c], d[n-1-c], true
	t.conf = 1 - 2*uCDF(len(xs), len(ys), c)
}

// criticalU is the largest c with P(U <= c) <= alpha/2 for samples of n1
// and n2 without ties; false when even P(U = 0) is larger (too few
// samples for an interval at that level).
func criticalU(n1, n2 int, alpha float64) (int, bool) {
	// The CDF rises with u: search for the last u at or below alpha/2.
	lo, hi := -1, n1*n2/2 // uCDF(lo) <= alpha/2 (-1: none), uCDF(hi+1) > alpha/2 is not known
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if uCDF(n1, n2, mid) <= alpha/2 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, lo >= 0
}

// uCDF is P(U <= u) for samples of n1 and n2 without ties.
func uCDF(n1, n2, u int) float64 {
	if n1 <= exactLimit && n2 <= exactLimit {
		return stats.UDist{N1: n1, N2: n2}.CDF(float64(u))
	}
	mu := float64(n1*n2) / 2
	sigma := math.Sqrt(float64(n1*n2*(n1+n2+1)) / 12)
	return stats.NormalDist{Mu: mu, Sigma: sigma}.CDF(float64(u) + 0.5)
}
