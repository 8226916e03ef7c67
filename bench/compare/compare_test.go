package compare_test

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/compare"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
)

// testdata/fast and testdata/slow are two real runs of `bench --once
// --tests as,tgs,latency,cpu,memory` (testdata/README): the same harness
// realm and settings but for disable_last_success (true in fast).

func load(t *testing.T, name string) *report.Report {
	t.Helper()
	rep, _, err := report.ReadRun(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// row is one request of a raw CSV, read here on its own.
type row struct {
	kind       string
	start, lat float64 // seconds
	ok         bool
}

func readCSV(t *testing.T, run, file string) []row {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", run, "raw", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for _, r := range recs[1:] {
		s, _ := strconv.ParseFloat(r[4], 64)
		l, _ := strconv.ParseFloat(r[5], 64)
		out = append(out, row{kind: r[3], start: s, lat: l / 1000, ok: r[6] == "success"})
	}
	return out
}

// wall is a load's wall time in report.json, in seconds.
func wall(t *testing.T, run string, path ...string) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", run, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, p := range path {
		v = v.(map[string]any)[p]
	}
	return v.(float64) / 1e9
}

// The documented blocks: loads under 8 s are cut into blocks of an eighth
// of the shorter one, to the millisecond; a block's samples are the full
// blocks within each load's wall time.
func blockLen(a, b float64) float64 {
	return math.Floor(min(a, b)/8*1000) / 1000
}

// perBlock gives f of the rows in each full block, rows placed by at.
func perBlock(rows []row, w, b float64, at func(row) float64, keep func(row) bool, f func([]row) (float64, bool)) []float64 {
	n := int(math.Floor(w/b + 1e-9))
	blocks := make([][]row, n)
	for _, r := range rows {
		if !keep(r) {
			continue
		}
		i := int(math.Floor(at(r) / b))
		if at(r) >= 0 && i < n {
			blocks[i] = append(blocks[i], r)
		}
	}
	var out []float64
	for _, bl := range blocks {
		if v, ok := f(bl); ok {
			out = append(out, v)
		}
	}
	return out
}

// bruteU counts the pairs in which ys's value is larger, ties half.
func bruteU(xs, ys []float64) float64 {
	u := 0.0
	for _, x := range xs {
		for _, y := range ys {
			switch {
			case y > x:
				u++
			case y == x:
				u += 0.5
			}
		}
	}
	return u
}

// permutationP is the two-sided p-value of U by every split of the pooled
// values into groups of the old and new sizes: twice the share of splits
// whose U (of the old group) is at most the smaller of the two observed
// (the exact test with ties).
func permutationP(xs, ys []float64) float64 {
	pool := append(slices.Clone(xs), ys...)
	n1 := len(xs)
	u1 := bruteU(ys, xs)
	usmall := min(u1, float64(len(xs)*len(ys))-u1)
	if u1 == float64(len(xs)*len(ys))-u1 {
		return 1
	}
	var le, all int
	idx := make([]int, n1)
	var rec func(start, k int)
	rec = func(start, k int) {
		if k == n1 {
			in := map[int]bool{}
			var a, b []float64
			for _, i := range idx {
				in[i] = true
				a = append(a, pool[i])
			}
			for i, v := range pool {
				if !in[i] {
					b = append(b, v)
				}
			}
			all++
			if bruteU(b, a) <= usmall+1e-9 {
				le++
			}
			return
		}
		for i := start; i <= len(pool)-(n1-k); i++ {
			idx[k] = i
			rec(i+1, k+1)
		}
	}
	rec(0, 0)
	return 2 * float64(le) / float64(all)
}

// countNoTies is how many orderings of n1 old and n2 new values (no ties)
// give U = u: new values larger than old ones in u pairs.
func countNoTies(n1, n2, u int, memo map[[3]int]float64) float64 {
	if u < 0 {
		return 0
	}
	if n1 == 0 || n2 == 0 {
		if u == 0 {
			return 1
		}
		return 0
	}
	k := [3]int{n1, n2, u}
	if v, ok := memo[k]; ok {
		return v
	}
	// The largest value is new (beats all n1 old ones) or old.
	v := countNoTies(n1, n2-1, u-n1, memo) + countNoTies(n1-1, n2, u, memo)
	memo[k] = v
	return v
}

// hodgesLehmann is the median of every log ratio new/old and the interval
// between the (c+1)-th smallest and largest of them, c the largest count
// with P(U <= c) <= 2.5 % without ties; in % change.
func hodgesLehmann(xs, ys []float64) (est, lo, hi float64) {
	var d []float64
	for _, x := range xs {
		for _, y := range ys {
			d = append(d, math.Log(y)-math.Log(x))
		}
	}
	slices.Sort(d)
	n := len(d)
	med := d[n/2]
	if n%2 == 0 {
		med = (d[n/2-1] + d[n/2]) / 2
	}
	memo := map[[3]int]float64{}
	total, cum := 0.0, 0.0
	for u := 0; u <= len(xs)*len(ys); u++ {
		total += countNoTies(len(xs), len(ys), u, memo)
	}
	c := -1
	for u := 0; ; u++ {
		cum += countNoTies(len(xs), len(ys), u, memo)
		if cum/total > 0.025 {
			break
		}
		c = u
	}
	pct := func(v float64) float64 { return 100 * (math.Exp(v) - 1) }
	return pct(med), pct(d[c]), pct(d[n-1-c])
}

// checkStats checks a change's U, P, estimate and interval against the
// brute-force computations above on the samples xs (old) and ys (new).
func checkStats(t *testing.T, name string, m report.Change, xs, ys []float64) {
	t.Helper()
	if u := bruteU(xs, ys); m.U != u {
		t.Errorf("%s: U %g, counted %g", name, m.U, u)
	}
	if p := permutationP(xs, ys); !near(m.P, p) {
		t.Errorf("%s: P %g, by permutation %g", name, m.P, p)
	}
	est, lo, hi := hodgesLehmann(xs, ys)
	if !near(m.ChangePct, est) || !near(m.LowPct, lo) || !near(m.HighPct, hi) {
		t.Errorf("%s: change %g [%g, %g] %%, computed %g [%g, %g]", name, m.ChangePct, m.LowPct, m.HighPct, est, lo, hi)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) }

// The comparison of the stored pair, value by value, against the samples
// cut from the raw CSVs here and the statistics computed by brute force:
// per-block rates and quantiles, U by counting pairs, P by every
// permutation, the Hodges-Lehmann estimate and its interval from the
// exact distribution of U counted by recursion.
func TestStoredPairValueByValue(t *testing.T) {
	old, cur := load(t, "fast"), load(t, "slow")
	c := compare.Compare(old, cur, compare.Options{})
	if c.FloorPct != 5 || c.Confidence != 0.95 || c.Alpha != 0.05 {
		t.Errorf("defaults: floor %g, confidence %g, alpha %g", c.FloorPct, c.Confidence, c.Alpha)
	}
	// The one setting that differs comes first.
	if c.Differ != 1 || c.Settings[0].Name != "disable_last_success" || c.Settings[0].Old != "true" || c.Settings[0].New != "false" || !c.Settings[0].Differ {
		t.Errorf("settings: %d differ, first %+v", c.Differ, c.Settings[0])
	}
	for _, s := range c.Settings[1:] {
		if s.Differ {
			t.Errorf("setting %s differs: %q vs %q", s.Name, s.Old, s.New)
		}
	}
	got := map[string]report.Change{}
	for _, m := range c.Metrics {
		got[m.Name] = m
	}

	count := func(b float64) func([]row) (float64, bool) {
		return func(rs []row) (float64, bool) {
			n := 0
			for _, r := range rs {
				if r.ok {
					n++
				}
			}
			return float64(n) / b, true
		}
	}
	quant := func(q float64) func([]row) (float64, bool) {
		return func(rs []row) (float64, bool) {
			var ms []float64
			for _, r := range rs {
				if r.ok {
					ms = append(ms, r.lat*1000)
				}
			}
			if len(ms) == 0 {
				return 0, false
			}
			slices.Sort(ms)
			// nearest rank: the smallest value with at least q of them at or below
			k := int(math.Ceil(q*float64(len(ms)))) - 1
			return ms[max(k, 0)], true
		}
	}
	done := func(r row) float64 { return r.start + r.lat }
	due := func(r row) float64 { return r.start }
	kind := func(k string) func(row) bool { return func(r row) bool { return r.kind == k } }

	type want struct {
		name    string
		xs, ys  []float64
		verdict string
	}
	var wants []want
	for _, l := range []struct{ name, file, json string }{
		{"as_logins_per_second", "as-requests.csv", "as"},
		{"tgs_tickets_per_second", "tgs-requests.csv", "tgs"},
	} {
		wo, wn := wall(t, "fast", l.json, "wall_ns"), wall(t, "slow", l.json, "wall_ns")
		b := blockLen(wo, wn)
		k := map[string]string{"as": "as", "tgs": "tgs"}[l.json]
		wants = append(wants, want{name: l.name,
			xs: perBlock(readCSV(t, "fast", l.file), wo, b, done, kind(k), count(b)),
			ys: perBlock(readCSV(t, "slow", l.file), wn, b, done, kind(k), count(b))})
	}
	wo, wn := wall(t, "fast", "latency", "logins", "wall_ns"), wall(t, "slow", "latency", "logins", "wall_ns")
	b := blockLen(wo, wn)
	for _, q := range []struct {
		name, kind string
		q          float64
	}{{"login_p95_seconds", "as", 0.95}, {"login_p99_seconds", "as", 0.99}, {"ticket_p95_seconds", "tgs", 0.95}, {"ticket_p99_seconds", "tgs", 0.99}} {
		wants = append(wants, want{name: q.name,
			xs: perBlock(readCSV(t, "fast", "latency-requests.csv"), wo, b, due, kind(q.kind), quant(q.q)),
			ys: perBlock(readCSV(t, "slow", "latency-requests.csv"), wn, b, due, kind(q.kind), quant(q.q))})
	}
	// What the stored pair shows: logins 3.3x slower with a database
	// write per login; tickets (no write) not called; the old run's
	// latency load was disturbed by the shared machine, so its
	// latencies were higher (called faster in the new).
	verdicts := map[string]string{"as_logins_per_second": report.Slower, "tgs_tickets_per_second": report.NoChange,
		"login_p95_seconds": report.Faster, "login_p99_seconds": report.Faster, "ticket_p95_seconds": report.Faster, "ticket_p99_seconds": report.Faster}
	for _, w := range wants {
		m := got[w.name]
		if len(w.xs) != 8 || len(w.ys) != 8 {
			t.Fatalf("%s: %d and %d blocks here, want 8 each", w.name, len(w.xs), len(w.ys))
		}
		if m.OldN != len(w.xs) || m.NewN != len(w.ys) {
			t.Errorf("%s: %d + %d samples, computed %d + %d", w.name, m.OldN, m.NewN, len(w.xs), len(w.ys))
		}
		checkStats(t, w.name, m, w.xs, w.ys)
		if !m.Tested || m.Confidence < 0.95 {
			t.Errorf("%s: tested %v at %g", w.name, m.Tested, m.Confidence)
		}
		if m.Verdict != verdicts[w.name] || m.IsWorse != (m.Verdict == report.Slower) {
			t.Errorf("%s: verdict %q (worse %v), want %q", w.name, m.Verdict, m.IsWorse, verdicts[w.name])
		}
		t.Logf("%s: %.1f%% [%.1f, %.1f] U=%g p=%.4g %s", w.name, m.ChangePct, m.LowPct, m.HighPct, m.U, m.P, m.Verdict)
	}
	// Errors: none in either run; memory: one value per run.
	if m := got["error_ratio"]; m.Verdict != report.NoChange || m.ChangePct != 0 {
		t.Errorf("error_ratio: %+v", m)
	}
	if m := got["kdc_rss_peak_bytes"]; m.Tested || m.Verdict != report.NoChange || !near(m.ChangePct, 100*(m.New-m.Old)/m.Old) {
		t.Errorf("kdc_rss_peak_bytes: %+v", m)
	}
	if c.Worse != 1 {
		t.Errorf("%d metrics worse, want 1 (as)", c.Worse)
	}
	_ = time.Second
}

// Blocks: a second for loads of 8 to 300 s, an eighth of a shorter one,
// whole seconds making at most 300 of a longer one.
func TestBlockLength(t *testing.T) {
	for _, tc := range []struct{ wall, want time.Duration }{
		{2004 * time.Millisecond, 250 * time.Millisecond},
		{8 * time.Millisecond, time.Millisecond},
		{10 * time.Second, time.Second},
		{300 * time.Second, time.Second},
		{3600 * time.Second, 12 * time.Second},
		{24 * time.Hour, 288 * time.Second},
	} {
		if got := compare.BlockOf(tc.wall); got != tc.want {
			t.Errorf("a load of %s: blocks of %s, want %s", tc.wall, got, tc.want)
		}
	}
}
