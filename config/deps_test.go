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
