package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A first start with an invalid configuration says what is wrong, with
// the file and line, in one line that does not pretend a previous one is
// kept, and exits with EX_CONFIG, on which the packaged unit does not
// restart (a loop of restarts would fail the same way). Both kinds: the
// file itself, and what the log collector refuses once kdc.conf is read
// (one file named twice).
func TestFirstStartBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kdcConf := filepath.Join(dir, "kdc.conf")
	os.WriteFile(kdcConf, []byte("[logging]\n\tkdc = FILE:"+filepath.Join(dir, "krb5kdc.log")+"\n"), 0o644)
	for name, c := range map[string]struct{ text, want string }{
		"unknown key": {"logs:\n  - type: kdc\n    severity: high\n", "exporter.yml:3: "},
		"twice":       {"logs:\n  - type: kdc\n  - path: " + filepath.Join(dir, "krb5kdc.log") + "\n    type: kdc\n", "listed twice"},
	} {
		cfg := filepath.Join(dir, name+"-exporter.yml")
		os.WriteFile(cfg, []byte(c.text), 0o600)
		_, stderr, code := exporter(t, "--config.file", cfg, "--web.listen-address", "127.0.0.1:0",
			"--collector.kdcconf.path", kdcConf, "--collector.kdcconf.krb5-config", filepath.Join(dir, "none"))
		if code != exitConfig {
			t.Errorf("%s: exit %d, want %d\n%s", name, code, exitConfig, stderr)
		}
		if !strings.Contains(stderr, `msg="invalid configuration: not starting"`) || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "previous") {
			t.Errorf("%s: want one line naming %q and no previous configuration:\n%s", name, c.want, stderr)
		}
	}
	unit, err := os.ReadFile("../../packaging/files/krb5-exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^RestartPreventExitStatus=(\d+)$`).FindSubmatch(unit); m == nil || string(m[1]) != "78" || exitConfig != 78 {
		t.Errorf("the unit's RestartPreventExitStatus= is %q, the daemon exits %d", m, exitConfig)
	}
}
