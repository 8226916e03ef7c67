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
