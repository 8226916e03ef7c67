package krb5profile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// Each spec form of MIT's kdc.conf [logging] (krb5_klog_init in
// lib/kadm5/logger.c, which the expectations follow), garbage included.
func TestParseLogSpec(t *testing.T) {
	for _, c := range []struct {
		spec string
		kind TargetKind
		path string
	}{
		{"FILE:/var/log/krb5kdc.log", TargetFile, "/var/log/krb5kdc.log"},
		{"  FILE=/var/log/krb5kdc.log \t", TargetFile, "/var/log/krb5kdc.log"},
		{"file:/srv/kdc log.txt", TargetFile, "/srv/kdc log.txt"},
		{"SYSLOG", TargetSyslog, ""},
		{"syslog:info:daemon", TargetSyslog, ""},
		{"SYSLOG:ERR", TargetSyslog, ""},
		{"SYSLOG:INFO:NOSUCHFACILITY", TargetSyslog, ""}, // an unknown facility is ignored
		{"SYSLOGX", TargetSyslog, ""},                    // MIT compares the first six letters
		{"STDERR", TargetStderr, ""},
		{"console", TargetConsole, ""},
		{"DEVICE=/dev/tty1", TargetDevice, "/dev/tty1"},
		// Not valid: MIT skips them (and says so on standard error).
		{"FILE", 0, ""},
		{"FILE:", 0, ""},
		{"FILE/var/log/x", 0, ""},
		{"SYSLOG:LOUD", 0, ""},
		{"SYSLOG:", 0, ""},
		{"STDERR:x", 0, ""},
		{"DEVICE:/dev/tty1", 0, ""},
		{"DEVICE=", 0, ""},
		{"", 0, ""},
		{"/var/log/krb5kdc.log", 0, ""},
		{"\x00\xff{{{", 0, ""},
	} {
		got, ok := ParseLogSpec(c.spec)
		if ok != (c.kind != 0) || got.Kind != c.kind || got.Path != c.path {
			t.Errorf("ParseLogSpec(%q) = %+v, %v; want kind %d path %q", c.spec, got, ok, c.kind, c.path)
		}
	}
}

func TestLogging(t *testing.T) {
	type want struct {
		targets string // kind:path, ...
		bad     int
	}
	show := func(ts []LogTarget) string {
		var s []string
		for _, t := range ts {
			s = append(s, fmt.Sprintf("%d:%s", t.Kind, t.Path))
		}
		return strings.Join(s, ",")
	}
	for name, c := range map[string]struct {
		kdc, krb5 string
		entity    string
		want      want
	}{
		"no section (Debian)": {"[realms]\n\tA = {\n\t}\n", "", "kdc", want{"2:", 0}},
		"RHEL: in krb5.conf": {"[realms]\n", "[logging]\n default = FILE:/var/log/krb5libs.log\n kdc = FILE:/var/log/krb5kdc.log\n admin_server = FILE:/var/log/kadmind.log\n",
			"admin_server", want{"1:/var/log/kadmind.log", 0}},
		"default only":       {"[logging]\n\tdefault = FILE:/var/log/all.log\n", "", "kdc", want{"1:/var/log/all.log", 0}},
		"several, in order":  {"[logging]\n\tkdc = SYSLOG:INFO:DAEMON\n\tkdc = FILE=/var/log/k.log\n", "", "kdc", want{"2:,1:/var/log/k.log", 0}},
		"kdc.conf and krb5":  {"[logging]\n\tkdc = FILE:/a\n", "[logging]\n\tkdc = FILE:/b\n", "kdc", want{"1:/a,1:/b", 0}},
		"final in kdc.conf":  {"[logging]\n\tkdc* = FILE:/a\n", "[logging]\n\tkdc = FILE:/b\n", "kdc", want{"1:/a", 0}},
		"default not merged": {"[logging]\n\tkdc = CONSOLE\n\tdefault = FILE:/d\n", "", "kdc", want{"4:", 0}},
		// All of the entity's specs invalid: MIT does not fall back to
		// default but to syslog.
		"garbage":       {"[logging]\n\tkdc = FILE\n\tkdc = what?\n\tdefault = FILE:/d\n", "", "kdc", want{"2:", 2}},
		"one of two ok": {"[logging]\n\tkdc = nonsense\n\tkdc = STDERR\n", "", "kdc", want{"3:", 1}},
		"other entity":  {"[logging]\n\tadmin_server = FILE:/a\n", "", "kdc", want{"2:", 0}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			paths := []string{testutil.WriteFile(t, dir, "kdc.conf", c.kdc)}
			if c.krb5 != "" {
				paths = append(paths, testutil.WriteFile(t, dir, "krb5.conf", c.krb5))
			}
			targets, bad := Logging(mustProfile(t, paths...), c.entity)
			if got := (want{show(targets), len(bad)}); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			for _, tg := range targets {
				if tg.From.Value != "" && (tg.From.Line == 0 || !strings.HasPrefix(tg.From.File, dir)) {
					t.Errorf("target %+v: no file and line", tg)
				}
			}
		})
	}
}
