package main

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// readmeExposure is the `systemd-analyze security` exposure level the
// README quotes for the unit.
func readmeExposure(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`systemd-analyze security` exposure ([0-9]+\\.[0-9])").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md quotes no `systemd-analyze security` exposure level")
	}
	return string(m[1])
}

var reExposure = regexp.MustCompile(`Overall exposure level for krb5-exporter.service: ([0-9.]+)`)

// checkExposure compares systemd-analyze security's verdict on a unit
// file with the README's figure: the same level, not merely at most it.
func checkExposure(t *testing.T, unit string) {
	t.Helper()
	sec, _ := exec.Command("systemd-analyze", "security", "--offline=true", unit).CombinedOutput()
	m := reExposure.FindSubmatch(sec)
	if m == nil {
		t.Errorf("systemd-analyze security printed no exposure level:\n%s", sec)
	} else if want := readmeExposure(t); string(m[1]) != want {
		t.Errorf("exposure level %s, README.md says %s:\n%s", m[1], want, sec)
	} else {
		t.Logf("systemd-analyze security: exposure %s", m[1])
	}
}

// TestUnitExposure: the unit as shipped (not installed) has the exposure
// level the README quotes. TestDebInstall checks the installed unit too.
func TestUnitExposure(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not installed (make deps installs systemd)")
		}
		t.Skip(err)
	}
	checkExposure(t, "files/krb5-exporter.service")
}
