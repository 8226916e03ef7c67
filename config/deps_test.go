package config

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestConfigDoesNotLinkTheEngine: the log parser imports config, so config
// must not pull in the Kerberos client (SPAKE, the AES assembly).
func TestConfigDoesNotLinkTheEngine(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".", "../kdclog").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasSuffix(p, "/internal/krb5") || strings.Contains(p, "/internal/krb5/") || strings.Contains(p, "gokrb5") {
			t.Errorf("config or kdclog depends on %s", p)
		}
	}
}

// TestDERIsALeaf: internal/der is shared by the engine and its SPAKE package,
// so it must import nothing of the project.
func TestDERIsALeaf(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", "../internal/der").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/krb5-exporter/krb5-exporter/"
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module) && p != module+"internal/der" {
			t.Errorf("internal/der depends on %s", p)
		}
	}
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
