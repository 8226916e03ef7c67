package bench

import (
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// targetFields maps a target's flag name (--target.as-min-rate) to its
// field in Targets, by the yaml key the flag is spelled from.
func targetFields(t *testing.T) map[string]reflect.Value {
	t.Helper()
	def := reflect.ValueOf(Defaults().Targets)
	out := map[string]reflect.Value{}
	for i := range def.NumField() {
		key := def.Type().Field(i).Tag.Get("yaml")
		out[strings.ReplaceAll(key, "_", "-")] = def.Field(i)
	}
	return out
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseNumber(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// benchDocTargets reads the targets of docs/bench.md's test table
// ("`as-min-rate` 500") and its latency row, and the warning factors
// quoted in its text.
func benchDocTargets(t *testing.T) map[string]float64 {
	t.Helper()
	doc := readDoc(t, "../docs/bench.md")
	out := map[string]float64{}
	for _, m := range regexp.MustCompile("`([a-z0-9-]+-(?:min|max)-[a-z]+)` \\(?(\\d+(?:\\.\\d+)?)").FindAllStringSubmatch(doc, -1) {
		out[m[1]] = parseNumber(t, m[2])
	}
	lat := regexp.MustCompile(`login p95/p99 ≤ (\d+)/(\d+) ms, ticket p95/p99 ≤ (\d+)/(\d+) ms, errors ≤ (\d+(?:\.\d+)?) %`).FindStringSubmatch(doc)
	if lat == nil {
		t.Fatal("docs/bench.md: no latency targets row")
	}
	for i, n := range []string{"login-p95-max-ms", "login-p99-max-ms", "ticket-p95-max-ms", "ticket-p99-max-ms", "error-max-pct"} {
		out[n] = parseNumber(t, lat[i+1])
	}
	for _, m := range regexp.MustCompile("`((?:generator|kdc-busy)-warn-[a-z]+)` \\((\\d+(?:\\.\\d+)?)").FindAllStringSubmatch(doc, -1) {
		out[m[1]] = parseNumber(t, m[2])
	}
	return out
}

// The default targets are the numbers docs/bench.md quotes, every one of
// them (docs/commands.md is generated from the flags' own help).
func TestDefaultTargetsAreTheDocumented(t *testing.T) {
	fields := targetFields(t)
	for doc, targets := range map[string]map[string]float64{"docs/bench.md": benchDocTargets(t)} {
		if len(targets) != len(fields) {
			t.Errorf("%s quotes %d targets, Targets has %d fields: %v", doc, len(targets), len(fields), targets)
		}
		for name, want := range targets {
			f, ok := fields[name]
			if !ok {
				t.Errorf("%s: target %s is no setting", doc, name)
				continue
			}
			if got := f.Float(); got != want {
				t.Errorf("%s says %s %v, the default is %v", doc, name, want, got)
			}
		}
	}
}

// A metric passes at its target and on the right side of it, and fails
// the smallest step beyond: ">=" for the rates and shares with a minimum
// (-min-), "<=" for the times, sizes and shares with a maximum (-max-).
// Checked at each default target as the docs quote it.
func TestVerdictAtTheEdge(t *testing.T) {
	for name, target := range benchDocTargets(t) {
		op := ""
		switch {
		case strings.Contains(name, "-min-"):
			op = ">="
		case strings.Contains(name, "-max-"):
			op = "<="
		default:
			continue // the warning thresholds give no verdict
		}
		above, below := math.Nextafter(target, math.Inf(1)), math.Nextafter(target, math.Inf(-1))
		for _, tc := range []struct {
			value float64
			pass  bool
		}{
			{target, true},
			{above, op == ">="},
			{below, op == "<="},
			{target * 2, op == ">="},
			{target / 2, op == "<="},
			{0, op == "<="},
		} {
			r := &run{rep: &Report{}}
			r.metric("t", name, name, "u", tc.value, op, target, 1)
			m := r.rep.Metrics[0]
			want := Fail
			if tc.pass {
				want = Pass
			}
			if m.Verdict != want || m.Value != tc.value || m.Target != target || m.Op != op {
				t.Errorf("%s: %v %s %v gave %s (value %v, target %v, op %s), want %s", name, tc.value, op, target, m.Verdict, m.Value, m.Target, m.Op, want)
			}
		}
	}
}

// Base is the value in base units: the display value times the scale.
func TestMetricBaseValue(t *testing.T) {
	r := &run{rep: &Report{}}
	r.metric("latency", "login_p95_seconds", "Login latency p95", "ms", 20, "<=", 20, 1e-3)
	r.metric("memory", "kdc_rss_peak_bytes", "KDC memory", "MB", 3, "<=", 256, 1<<20)
	if got := r.rep.Metrics[0].Base; math.Abs(got-0.020) > 1e-12 {
		t.Errorf("20 ms in seconds = %v", got)
	}
	if got := r.rep.Metrics[1].Base; got != 3<<20 {
		t.Errorf("3 MB in bytes = %v", got)
	}
	if m := r.rep.Metrics[1]; m.Test != "memory" || m.Name != "kdc_rss_peak_bytes" || m.Label != "KDC memory" || m.Unit != "MB" {
		t.Errorf("metric %+v", m)
	}
}
