package alerts

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// statusClass is one row of the runbook's table "What the SLI counts": a
// KDC log status or a probe result, and its class.
type statusClass struct {
	source, class string // log or probe; success, step, server, client or spread
	// A spread status's owner gauge and threshold, from its row's
	// "`GAUGE >= N`": server while GAUGE reaches N, client otherwise.
	gauge, threshold string
}

// spreadRule is how a spread row's Why cell names its gauge and threshold.
var spreadRule = regexp.MustCompile("`(krb5_[a-z_]+) >= ([0-9]+)`")

// runbookStatusTable reads the table of runbook.md's "### What the SLI
// counts": name -> its source and class. A name in two rows fails the test.
func runbookStatusTable(t *testing.T) map[string]statusClass {
	t.Helper()
	b, err := os.ReadFile("runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### What the SLI counts\n")
	if !ok {
		t.Fatal(`runbook.md: no section "### What the SLI counts"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	names := regexp.MustCompile("`([^`]+)`")
	table := map[string]statusClass{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 6 || !strings.Contains(cells[1], "`") {
			continue
		}
		c := statusClass{source: strings.TrimSpace(cells[2]), class: strings.TrimSpace(cells[3])}
		if !slices.Contains([]string{"log", "probe"}, c.source) || !slices.Contains([]string{"success", "step", "server", "client", "spread"}, c.class) {
			t.Errorf("runbook.md: row %q: source %q, class %q", line, c.source, c.class)
		}
		if c.class == "spread" {
			m := spreadRule.FindStringSubmatch(cells[4])
			if m == nil {
				t.Errorf("runbook.md: spread row %q names no \"`GAUGE >= N`\"", line)
				continue
			}
			c.gauge, c.threshold = m[1], m[2]
		}
		for _, m := range names.FindAllStringSubmatch(cells[1], -1) {
			if _, dup := table[m[1]]; dup {
				t.Errorf("runbook.md: %s is in two rows of the status table", m[1])
			}
			table[m[1]] = c
		}
	}
	if len(table) == 0 {
		t.Fatal("runbook.md: the status table has no rows")
	}
	return table
}

// kdclogStatuses returns the status strings kdclog knows (knownStatuses in
// kdclog/status.go), read from its source: alerts does not import kdclog.
func kdclogStatuses(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../kdclog/status.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	var list *ast.CompositeLit
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i >= len(vs.Values) {
				break
			}
			switch v := vs.Values[i].(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(v.Value); err == nil {
					consts[name.Name] = s
				}
			case *ast.CompositeLit:
				if name.Name == "knownStatuses" {
					list = v
				}
			}
		}
		return true
	})
	if list == nil {
		t.Fatal("kdclog/status.go: no knownStatuses")
	}
	var out []string
	for _, e := range list.Elts {
		switch v := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(v.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		case *ast.Ident:
			s, ok := consts[v.Name]
			if !ok {
				t.Fatalf("kdclog/status.go: knownStatuses names %s, not a string constant of the file", v.Name)
			}
			out = append(out, s)
		default:
			t.Fatalf("kdclog/status.go: knownStatuses has an element this test cannot read: %T", e)
		}
	}
	return out
}

// matcherValues returns the alternatives of every label matcher label op
// "a|b|c" in expr.
func matcherValues(expr, label, op string) [][]string {
	re := regexp.MustCompile(`\b` + label + op + `"([^"]*)"`)
	var out [][]string
	for _, m := range re.FindAllStringSubmatch(expr, -1) {
		out = append(out, strings.Split(m[1], "|"))
	}
	return out
}

func namesOf(table map[string]statusClass, source string, classes ...string) []string {
	var out []string
	for name, c := range table {
		if c.source == source && slices.Contains(classes, c.class) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// minus returns the elements of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// TestSLIStatusesFollowRunbook checks the one table of which statuses are
// the KDC's failures: the runbook's table classifies every status kdclog
// knows and no other, and the availability SLI's rules count exactly its
// server rows (with ISSUE and the probes' successes on the valid side),
// and the client-error rule every status but the success, step and server
// rows.
func TestSLIStatusesFollowRunbook(t *testing.T) {
	table := runbookStatusTable(t)
	known := kdclogStatuses(t)
	for _, s := range known {
		if c, ok := table[s]; !ok || c.source != "log" {
			t.Errorf("kdclog's status %q is not a log row of runbook.md's table", s)
		}
	}
	for _, s := range namesOf(table, "log", "success", "step", "server", "client") {
		if !slices.Contains(known, s) {
			t.Errorf("runbook.md's table names %q, a status kdclog does not know", s)
		}
	}

	server := namesOf(table, "log", "server")
	probeServer := namesOf(table, "probe", "server")
	noFailure := namesOf(table, "log", "success", "step", "server", "spread")
	// A spread status counts apart from the lists: with its own matcher,
	// on the SLI's failed and valid sides while its gauge reaches the
	// threshold, as a client error while it does not.
	spread := func(r rule, op, window string) {
		for _, s := range namesOf(table, "log", "spread") {
			c := table[s]
			want := fmt.Sprintf(`(rate(krb5_kdc_requests_total{status=%q}[%s]) %s on (job, realm, instance) max_over_time(%s[%s]) >= %s)`, s, window, op, c.gauge, window, c.threshold)
			if n := strings.Count(r.Expr, want); n != 2 {
				t.Errorf("%s: %d times %s, want 2 (runbook.md's spread row)", r.Record, n, want)
			}
			if n := strings.Count(r.Expr, `"`+s+`"`); n != 2 {
				t.Errorf("%s: names %s %d times, want only in its 2 spread terms", r.Record, s, n)
			}
		}
	}
	var sli, clientErrors int
	for _, r := range allRules(t) {
		switch {
		case strings.HasPrefix(r.Record, "instance:krb5_kdc_availability_errors:"):
			sli++
			statuses, results := matcherValues(r.Expr, "status", "=~"), matcherValues(r.Expr, "result", "=~")
			if len(statuses) != 2 || len(results) != 2 {
				t.Errorf("%s: %d status and %d result lists, want 2 each (failed and valid)", r.Record, len(statuses), len(results))
				continue
			}
			check := func(what string, got, want []string) {
				if got := sorted(got); !slices.Equal(got, want) {
					t.Errorf("%s: %s: %v not in runbook.md's table, %v missing", r.Record, what, minus(got, want), minus(want, got))
				}
			}
			check("failed statuses", statuses[0], server)
			check("valid statuses", statuses[1], sorted(append(slices.Clone(server), "ISSUE")))
			check("failed probe results", results[0], probeServer)
			check("valid probe results", results[1], sorted(append(slices.Clone(probeServer), "success")))
			spread(r, "and", strings.TrimPrefix(r.Record, "instance:krb5_kdc_availability_errors:ratio_rate"))
		case r.Record == "instance:krb5_kdc_client_errors:rate5m":
			clientErrors++
			for _, l := range matcherValues(r.Expr, "status", "!~") {
				if got := sorted(l); !slices.Equal(got, noFailure) {
					t.Errorf("%s: excludes %v, which are not success, step, server or spread rows of runbook.md's table, and not %v", r.Record, minus(got, noFailure), minus(noFailure, got))
				}
			}
			spread(r, "unless", "5m")
		}
	}
	if sli != 7 || clientErrors != 1 {
		t.Errorf("%d SLI windows and %d client-error rules, want 7 and 1", sli, clientErrors)
	}
	t.Logf("%d statuses classified: %d server, %d probe results server", len(table), len(server), len(probeServer))
}
