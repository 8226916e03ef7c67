package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/krb5-exporter/krb5-exporter/internal/metricsdoc"
)

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	KeepFiring  string            `yaml:"keep_firing_for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// unitFile is the part of a promtool test file the tests read.
type unitFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromqlExprTest []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

func ruleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.rules.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no *.rules.yml in alerts/: %v", err)
	}
	return files
}

func unitFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("tests", "*_test.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tests/*_test.yml in alerts/: %v", err)
	}
	return files
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// allRules returns every rule of every rule file.
func allRules(t *testing.T) []rule {
	t.Helper()
	var rules []rule
	for _, f := range ruleFiles(t) {
		var rf ruleFile
		readYAML(t, f, &rf)
		for _, g := range rf.Groups {
			rules = append(rules, g.Rules...)
		}
	}
	return rules
}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install the Debian package prometheus (make deps)")
	}
	return p
}

func TestPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(promtool(t), append([]string{"check", "rules"}, ruleFiles(t)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// TestPromtoolTestRules runs the unit tests of every rule file, one
// promtool per file so that the two cores of a CI machine share them.
func TestPromtoolTestRules(t *testing.T) {
	t.Parallel()
	pt := promtool(t)
	for _, f := range unitFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command(pt, "test", "rules", f).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool test rules %s: %v\n%s", f, err, out)
			}
		})
	}
}

// TestEveryRuleIsTested checks that each rule file has its test file, that
// every alert has a promtool case where it fires and one where it must
// not, and that every recording rule is evaluated by an expression test.
func TestEveryRuleIsTested(t *testing.T) {
	fires, silent := map[string]bool{}, map[string]bool{}
	var exprs []string
	tested := map[string]bool{}
	for _, f := range unitFiles(t) {
		var u unitFile
		readYAML(t, f, &u)
		for _, rf := range u.RuleFiles {
			tested[filepath.Base(rf)] = true
		}
		for _, tc := range u.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
			for _, e := range tc.PromqlExprTest {
				exprs = append(exprs, e.Expr)
			}
		}
	}
	for _, f := range ruleFiles(t) {
		if !tested[f] {
			t.Errorf("%s: no promtool test file loads it (tests/%s_test.yml)", f, strings.TrimSuffix(f, ".rules.yml"))
		}
	}
	for _, r := range allRules(t) {
		switch {
		case r.Alert != "":
			if !fires[r.Alert] {
				t.Errorf("alert %s: no promtool case where it fires", r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("alert %s: no promtool case where it must not fire", r.Alert)
			}
		case r.Record != "":
			found := false
			word := regexp.MustCompile(`(^|[^a-zA-Z0-9_:])` + regexp.QuoteMeta(r.Record) + `($|[^a-zA-Z0-9_:])`)
			for _, e := range exprs {
				if word.MatchString(e) {
					found = true
				}
			}
			if !found {
				t.Errorf("recording rule %s: no promql_expr_test evaluates it", r.Record)
			}
		}
	}
}

// TestAlertConventions checks what Alertmanager routes and people read on:
// a severity, a summary, a description and a runbook link to the alert's
// own section.
func TestAlertConventions(t *testing.T) {
	for _, r := range allRules(t) {
		if r.Alert == "" {
			continue
		}
		if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		want := "https://github.com/krb5-exporter/krb5-exporter/blob/main/alerts/runbook.md#" + strings.ToLower(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
	}
}

// TestRulesKeepTheRealm: every aggregation or match that keeps the
// instance keeps the realm too. alertmanager.yml routes by realm and lets
// KDCRealmUnavailable inhibit the alerts with its realm (equal: [job,
// realm]); a rule that summed the realm away (by (job, instance), or a
// one-to-one match on (job, instance), which keeps only those labels)
// paged on its own through a realm outage. (A set operation's on, "and
// on (job, instance)", matches on those labels and keeps the left side's
// whole.) The promtool tests give their input series a realm and expect
// it on every alert and recorded series.
func TestRulesKeepTheRealm(t *testing.T) {
	clause := regexp.MustCompile(`(\w+)?\s*\b(by|on)\s*\(([^)]*)\)`)
	for _, r := range allRules(t) {
		for _, m := range clause.FindAllStringSubmatch(r.Expr, -1) {
			if m[2] == "on" && slices.Contains([]string{"and", "or", "unless"}, m[1]) {
				continue
			}
			labels := strings.Split(m[3], ",")
			for i := range labels {
				labels[i] = strings.TrimSpace(labels[i])
			}
			if slices.Contains(labels, "instance") && !slices.Contains(labels, "realm") {
				t.Errorf("%s%s: %q drops the realm label", r.Alert, r.Record, m[0])
			}
		}
	}
}

// TestRunbook checks that every alert has a "## Name" section in
// runbook.md and every section names an alert.
func TestRunbook(t *testing.T) {
	b, err := os.ReadFile("runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			name = strings.TrimSpace(name)
			if sections[name] {
				t.Errorf("runbook.md: two sections %q", name)
			}
			sections[name] = true
		}
	}
	alerts := map[string]bool{}
	for _, r := range allRules(t) {
		if r.Alert == "" {
			continue
		}
		if alerts[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		alerts[r.Alert] = true
		if !sections[r.Alert] {
			t.Errorf("alert %s has no section \"## %s\" in runbook.md", r.Alert, r.Alert)
		}
	}
	for s := range sections {
		if !alerts[s] {
			t.Errorf("runbook.md section %q names no alert", s)
		}
	}
}

// TestRulesUseDocumentedMetrics checks that the rules read only metrics
// the exporter has (docs/metrics.md is kept complete by internal/metricsdoc).
func TestRulesUseDocumentedMetrics(t *testing.T) {
	docs, recorded := metricsdoc.Documented(t), metricsdoc.Recorded(t)
	for _, r := range allRules(t) {
		if bad := metricsdoc.Unknown(r.Expr, docs, recorded); len(bad) > 0 {
			t.Errorf("%s%s: metrics not in docs/metrics.md: %v", r.Alert, r.Record, bad)
		}
	}
}
