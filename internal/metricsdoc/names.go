package metricsdoc

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var documentedRow = regexp.MustCompile("(?m)^\\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` \\| *([a-z]+)")

// root is the repository's top directory: the nearest parent of the
// test's directory with a go.mod.
func root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Documented returns every metric with a row in docs/metrics.md, in any
// section, with the first word of its type column (gauge, counter,
// histogram, …).
func Documented(t testing.TB) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, m := range documentedRow.FindAllStringSubmatch(string(doc), -1) {
		names[m[1]] = m[2]
	}
	return names
}

// Recorded returns the names the recording rules of alerts/*.rules.yml
// record.
func Recorded(t testing.TB) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t), "alerts", "*.rules.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no alerts/*.rules.yml: %v", err)
	}
	names := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rf struct {
			Groups []struct {
				Rules []struct {
					Record string `yaml:"record"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					names[r.Record] = true
				}
			}
		}
	}
	return names
}

var (
	// quoted are PromQL string literals: label values, not names.
	quoted = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	// identifier is a PromQL identifier not preceded by a name character
	// (nor by ":", which starts a subquery's step).
	identifier = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])([a-zA-Z_][a-zA-Z0-9_:]*)`)
)

// Names returns the metric names a PromQL expression reads: identifiers
// outside string literals that start with krb5_ or probe_ (the exporter's
// series) or hold a ":" (recorded series, level:metric:operations), in
// order of first use. Label names, functions and keywords are left out.
func Names(expr string) []string {
	expr = quoted.ReplaceAllString(expr, `""`)
	var out []string
	for _, m := range identifier.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		if !strings.HasPrefix(name, "krb5_") && !strings.HasPrefix(name, "probe_") && !strings.Contains(name, ":") {
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// Unknown returns the names of Names(expr) that are neither documented (a
// histogram also by its _bucket, _count and _sum series, a summary by its
// _count and _sum) nor recorded.
func Unknown(expr string, documented map[string]string, recorded map[string]bool) []string {
	var bad []string
	for _, name := range Names(expr) {
		if documented[name] != "" || recorded[name] {
			continue
		}
		known := false
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			base, ok := strings.CutSuffix(name, suffix)
			switch {
			case !ok:
			case documented[base] == "histogram", documented[base] == "summary" && suffix != "_bucket":
				known = true
			}
		}
		if !known {
			bad = append(bad, name)
		}
	}
	return bad
}
