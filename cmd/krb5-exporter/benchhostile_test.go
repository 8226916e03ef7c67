package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hostileRun copies the stored real run bench/compare/testdata/fast into
// a temporary directory, with edit applied to its report.json (decoded as
// plain JSON, so that any value can be written).
func hostileRun(t *testing.T, edit func(r map[string]any)) string {
	t.Helper()
	src := filepath.Join("..", "..", "bench", "compare", "testdata", "fast")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "raw"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"raw/as-requests.csv", "raw/tgs-requests.csv", "raw/latency-requests.csv"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(src, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	edit(r)
	if b, err = json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// allocated runs f and returns the bytes it allocated (every allocation,
// freed or not: a peak cannot hide between two readings).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// maxHostileAlloc: reading and comparing the stored pair of runs
// allocates about 20 MB; a crafted run may cost at most this much.
const maxHostileAlloc = 200 << 20

// A crafted results directory is input: bench compare, bench merge and
// bench --baseline exit 2 naming the file and the field, within
// bounded memory, instead of allocating what its numbers say (864 GB for
// a wall time of 9e18 ns), panicking (a negative wall time), computing a
// verdict from NaN or negative counts, or (30,000 repetitions) 7.2 GB of
// differences. Fails on the code before the validation (seen: the test
// binary killed by the allocation, a panic in makeslice, exit 1).
func TestBenchCompareHostileRun(t *testing.T) {
	fast := filepath.Join("..", "..", "bench", "compare", "testdata", "fast")
	metric := func(r map[string]any, i int) map[string]any { return r["metrics"].([]any)[i].(map[string]any) }
	repeats := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = 1000.0 + float64(i%7)
		}
		return out
	}
	for name, c := range map[string]struct {
		edit  func(r map[string]any)
		csv   string // the first request of raw/as-requests.csv
		want  string // in the error, with the file's path
		inCSV bool   // the error is raw/as-requests.csv's (always when csv is set)
	}{
		"huge wall":     {edit: func(r map[string]any) { r["as"].(map[string]any)["wall_ns"] = 9e18 }, want: "as.wall_ns"},
		"negative wall": {edit: func(r map[string]any) { r["as"].(map[string]any)["wall_ns"] = -5e9 }, want: "as.wall_ns"},
		"zero wall":     {edit: func(r map[string]any) { r["tgs"].(map[string]any)["wall_ns"] = 0 }, want: "tgs.wall_ns"},
		"30000 repeats": {edit: func(r map[string]any) {
			metric(r, 0)["repeats"] = repeats(30000)
		}, want: "metrics[0].repeats"},
		"more requests than made": {edit: func(r map[string]any) { r["as"].(map[string]any)["requests"] = 10 }, want: "line 12: more requests of load 1 than the 10 report.json says it made", inCSV: true},
		"negative count":          {edit: func(r map[string]any) { r["as"].(map[string]any)["requests"] = -3 }, want: "as.requests"},
		"NaN start":               {csv: "1,64,udp,as,NaN,1.0,success", want: "raw/as-requests.csv: line 2: start_s"},
		"Inf latency":             {csv: "1,64,udp,as,0.5,+Inf,success", want: "raw/as-requests.csv: line 2: latency_ms"},
		"negative latency":        {csv: "1,64,udp,as,0.5,-3,success", want: "raw/as-requests.csv: line 2: latency_ms"},
		"start past 24 h":         {csv: "1,64,udp,as,1e12,1,success", want: "raw/as-requests.csv: line 2: start_s"},
	} {
		t.Run(name, func(t *testing.T) {
			if c.edit == nil {
				c.edit = func(map[string]any) {}
			}
			dir := hostileRun(t, c.edit)
			file := filepath.Join(dir, "report.json")
			if c.csv != "" || c.inCSV {
				file = filepath.Join(dir, "raw", "as-requests.csv")
			}
			if c.csv != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.SplitN(string(b), "\n", 3)
				lines[1] = c.csv
				if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := t.TempDir()
			for _, args := range [][]string{
				{"bench", "compare", fast, dir}, {"bench", "compare", dir, fast}, {"bench", "compare", dir, dir},
				{"bench", "merge", "--output-dir", out, fast, dir},
				{"bench", "--once", "--output-dir", out, "--baseline", dir},
			} {
				var stdout, errb bytes.Buffer
				var code int
				n := allocated(func() { code = run(args, &stdout, &errb) })
				if code != 2 || !strings.Contains(errb.String(), file) || !strings.Contains(errb.String(), c.want) {
					t.Errorf("%v: exit %d, stderr %q, want 2 naming %s and %s", args, code, errb.String(), file, c.want)
				}
				if n > maxHostileAlloc {
					t.Errorf("%v: allocated %d MB", args, n>>20)
				}
				t.Logf("%s: %.1f MB allocated", args[1], float64(n)/(1<<20))
			}
		})
	}
}

// Each run's blocks are sized from its own load: a load of 8 ms (blocks
// of 1 ms) against one of a day does not cut the day into 86 million
// blocks. Fails with both runs' blocks sized from the shorter load (seen:
// 2 GB allocated).
func TestBenchCompareShortAgainstLong(t *testing.T) {
	wall := func(ns float64) func(r map[string]any) {
		return func(r map[string]any) { r["as"].(map[string]any)["wall_ns"] = ns }
	}
	short, long := hostileRun(t, wall(8e6)), hostileRun(t, wall(86400e9))
	var out, errb bytes.Buffer
	var code int
	n := allocated(func() { code = run([]string{"bench", "compare", short, long}, &out, &errb) })
	if code == 2 {
		t.Errorf("exit 2: %s", errb.String())
	}
	if n > maxHostileAlloc {
		t.Errorf("allocated %d MB", n>>20)
	}
	t.Logf("%.1f MB allocated", float64(n)/(1<<20))
}

// A sparse 2 GiB raw/as-requests.csv (no disk used) is refused within
// bounded memory: the CSV is streamed, a line and a load's records are
// bounded. Fails on the code that read the whole file (seen: 2 GiB
// allocated, then 6 GB resident).
func TestBenchCompareHugeRequestsCSV(t *testing.T) {
	fast := filepath.Join("..", "..", "bench", "compare", "testdata", "fast")
	dir := hostileRun(t, func(map[string]any) {})
	f := filepath.Join(dir, "raw", "as-requests.csv")
	if err := os.Truncate(f, 2<<30); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	var code int
	n := allocated(func() { code = run([]string{"bench", "compare", fast, dir}, &out, &errb) })
	if code != 2 || !strings.Contains(errb.String(), f) {
		t.Errorf("exit %d, stderr %q, want 2 naming %s", code, errb.String(), f)
	}
	if n > maxHostileAlloc {
		t.Errorf("allocated %d MB", n>>20)
	}
	t.Logf("%.1f MB allocated", float64(n)/(1<<20))
}

// Finite values whose change is not (a metric of 1e-300 then 1e300):
// --format json prints a comparison that decodes, or exits 2 saying why,
// never an empty line and exit 0. Fails on the code that dropped
// json.MarshalIndent's error (seen: "\n", exit 0).
func TestBenchCompareInfiniteChange(t *testing.T) {
	old := hostileRun(t, func(r map[string]any) { r["metrics"].([]any)[8].(map[string]any)["value"] = 1e-300 })
	cur := hostileRun(t, func(r map[string]any) { r["metrics"].([]any)[8].(map[string]any)["value"] = 1e300 })
	var out, errb bytes.Buffer
	code := run([]string{"bench", "compare", "--format", "json", old, cur}, &out, &errb)
	if code == 2 && strings.TrimSpace(errb.String()) != "" {
		return
	}
	var c map[string]any
	if err := json.Unmarshal(out.Bytes(), &c); err != nil || code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q: %v", code, out.String(), errb.String(), err)
	}
	for _, m := range c["metrics"].([]any) {
		if v, _ := m.(map[string]any)["change_pct"].(float64); math.IsInf(v, 0) || math.IsNaN(v) {
			t.Errorf("change %v", v)
		}
	}
}
