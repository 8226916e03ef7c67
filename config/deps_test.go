package config

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/krb5-exporter/krb5-exporter/"

// deps lists the packages pkgs (paths relative to config) link.
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

// engine: the Kerberos client (SPAKE, the AES assembly) or gokrb5.
func engine(p string) bool {
	return strings.HasSuffix(p, "/internal/krb5") || strings.Contains(p, "/internal/krb5/") || strings.Contains(p, "gokrb5")
}

// leaf fails t when pkg (a module path under internal/) imports any other
// package of the project.
func leaf(t *testing.T, pkg string) {
	t.Helper()
	for _, p := range deps(t, "../"+pkg) {
		if strings.HasPrefix(p, module) && p != module+pkg {
			t.Errorf("%s depends on %s", pkg, p)
		}
	}
}

// TestConfigDoesNotLinkTheEngine: the log parser imports config, so config
// must not pull in the Kerberos client (SPAKE, the AES assembly).
func TestConfigDoesNotLinkTheEngine(t *testing.T) {
	for _, p := range deps(t, ".", "../kdclog") {
		if engine(p) {
			t.Errorf("config or kdclog depends on %s", p)
		}
	}
}

// TestDERIsALeaf: internal/der is shared by the engine and its SPAKE package,
// so it must import nothing of the project.
func TestDERIsALeaf(t *testing.T) {
	leaf(t, "internal/der")
}

// TestRecordsDoNotLinkTheEngine: bench/report and bench/compare keep, render
// and read back records, so they link internal/record (a leaf) and never
// the generator or the Kerberos engine.
func TestRecordsDoNotLinkTheEngine(t *testing.T) {
	for _, p := range deps(t, "../bench/report", "../bench/compare") {
		if engine(p) || p == module+"internal/loadgen" {
			t.Errorf("bench/report or bench/compare depends on %s", p)
		}
	}
	leaf(t, "internal/record")
}

// TestTestCoreDoesNotLinkTheHarness: internal/testutil is the test core
// (Eventually, Gather, Logger, InCI, Race, Alone) and internal/realmtest
// the helpers that run the harness, so that tests which start no KDC
// (the enctype, keytab and tailer ones) do not link realm or the engine.
func TestTestCoreDoesNotLinkTheHarness(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-test", "-f", "{{.ImportPath}} {{join .Deps \" \"}}",
		"../internal/testutil", "../internal/enctype", "../internal/keytab", "../tailer").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/krb5-exporter/krb5-exporter/"
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 4 {
		t.Fatalf("go list listed %d packages: %s", len(lines), out)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		for _, p := range f[1:] {
			if p == module+"realm" || strings.HasPrefix(p, module+"realm/") || p == module+"internal/realmtest" ||
				p == module+"internal/krb5" || strings.HasPrefix(p, module+"internal/krb5/") {
				t.Errorf("%s depends on %s", f[0], p)
			}
		}
	}
}
