package bench

import (
	"math"
	"testing"
	"time"
)

// Nearest-rank percentiles of 1..1000 ms are the ranks themselves.
func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := summarize(ds)
	want := Latency{Count: 1000, AvgMS: 500.5, P50MS: 500, P90MS: 900, P95MS: 950, P99MS: 990, P999MS: 999, MaxMS: 1000}
	if l != want {
		t.Errorf("got %+v, want %+v", l, want)
	}
	if summarize(nil) != (Latency{}) {
		t.Error("empty input")
	}
}

func TestSlope(t *testing.T) {
	if s := slope([]float64{10, 12, 14, 16}); math.Abs(s-2) > 1e-9 {
		t.Errorf("slope %v, want 2", s)
	}
	if s := slope([]float64{5}); s != 0 {
		t.Errorf("one round: %v", s)
	}
}

func TestParseShardAndTests(t *testing.T) {
	for _, tc := range []struct {
		in   string
		i, n int
		ok   bool
	}{{"", 1, 1, true}, {"2/4", 2, 4, true}, {"0/2", 0, 0, false}, {"3/2", 0, 0, false}, {"1/2x", 0, 0, false}, {"a", 0, 0, false}} {
		i, n, err := ParseShard(tc.in)
		if (err == nil) != tc.ok || i != tc.i || n != tc.n {
			t.Errorf("ParseShard(%q) = %d, %d, %v", tc.in, i, n, err)
		}
	}
	if got, err := ParseTests("tgs, as,tgs"); err != nil || len(got) != 2 || got[0] != "tgs" || got[1] != "as" {
		t.Errorf("ParseTests: %v %v", got, err)
	}
	if _, err := ParseTests("as,bogus"); err == nil {
		t.Error("unknown test accepted")
	}
}
