// Package layering holds the module's dependency rules: which packages
// must never link which. Its test reads what each package really links
// (go list -deps), so an import added anywhere below a package, directly
// or through another, breaks the rule here.
package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/krb5-exporter/krb5-exporter/"

// rules: each package (with "/..." every package below it) and what it
// must never link. "*" is every package of the module but itself.
var rules = []struct {
	pkg   string
	never []string
	why   string
}{
	{"internal/statuspage", []string{"internal/krb5", "prober", "internal/loadgen"}, "the landing page reads statuses, not Kerberos"},
	{"top", []string{"internal/krb5", "prober", "internal/loadgen"}, "top reads a daemon's series and the logs, not Kerberos"},
	{"collector", []string{"internal/krb5", "prober", "internal/loadgen"}, "the host collectors read /proc and sockets"},
	{"kdclog/...", []string{"internal/krb5", "prober", "internal/loadgen"}, "the log counters parse text"},
	{"tailer", []string{"internal/krb5", "prober", "kdclog"}, "the tailer follows files, whatever they hold"},
	{"bench/report", []string{"internal/krb5", "internal/loadgen", "prober", "bench"}, "a report is read without the engine that made it"},
	{"bench/compare", []string{"internal/krb5", "internal/loadgen", "prober", "bench"}, "comparing reports needs no engine"},
	{"internal/probestatus", []string{"*"}, "a leaf: what the pages read of the probes"},
	{"internal/der", []string{"*"}, "the DER codec imports nothing of the project"},
	{"internal/record", []string{"*"}, "what one bench request is, without the engine"},
	{"internal/web", []string{"*"}, "the /metrics handler serves any registry: cmd wires it to the collectors"},
	{"internal/testutil", []string{"realm", "internal/realmtest"}, "helpers every test shares, without the harness"},
	{"realm", []string{"internal/krb5"}, "the harness runs MIT's programs, and internal/krb5's own tests run it; what drives the engine at a realm is below it (realm/load)"},
}

// deps lists the packages of the module that pkg links, pkg included.
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "./"+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps ./%s: %v", pkg, err)
	}
	m := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		if strings.HasPrefix(l, module) {
			m[strings.TrimPrefix(l, module)] = true
		}
	}
	return m
}

func packages(t *testing.T, pattern string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "./"+pattern).Output()
	if err != nil {
		t.Fatalf("go list ./%s: %v", pattern, err)
	}
	var ps []string
	for _, l := range strings.Fields(string(out)) {
		ps = append(ps, strings.TrimPrefix(l, module))
	}
	return ps
}

func TestLayering(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	for _, r := range rules {
		for _, pkg := range packages(t, "../../"+r.pkg) {
			linked := deps(t, "../../"+pkg)
			for _, never := range r.never {
				for dep := range linked {
					if dep == pkg {
						continue
					}
					if never == "*" || dep == never {
						t.Errorf("%s links %s: %s", pkg, dep, r.why)
					}
				}
			}
		}
	}
}
