package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLogSources(t *testing.T) {
	cfg, err := Parse([]byte(`
logs:
  - path: /var/log/krb5kdc.log
    type: kdc
    start_at: beginning
    probe_principals: [krb5-exporter-probe@EXAMPLE.COM, synthetic]
    poll_interval: 250ms
    rotate_wait: 1m
  - path: /var/log/kadmind.log
    type: kadmind
  - path: /var/log/auth.log
    type: any
`), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Logs) != 3 {
		t.Fatalf("%d log sources", len(cfg.Logs))
	}
	k := cfg.Logs[0]
	if !k.FromBeginning() || k.Poll() != 250*time.Millisecond || k.RotationWait() != time.Minute || len(k.ProbePrincipals) != 2 {
		t.Errorf("kdc source: %+v", k)
	}
	a := cfg.Logs[1]
	if a.FromBeginning() || a.Poll() != DefaultLogPollInterval || a.RotationWait() != DefaultLogRotateWait {
		t.Errorf("defaults: %+v", a)
	}
}

func TestLogSourceErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"logs:\n  - type: any\n", `test.yml:2: logs.0.path: type "any" (one file both daemons write) needs a path`},
		{"logs:\n  - type: kdc\n    path: \" \"\n", "test.yml:3: logs.0.path: path is blank"},
		{"logs:\n  - {}\n", "type is required"},
		{"logs:\n  - path: /x\n    type: kdc\n    journal: {}\n", "path and journal are exclusive"},
		{"logs:\n  - type: kdc\n    journal: {identifiers: [\"a=b\"]}\n", "not an identifier or unit name"},
		{"logs:\n  - type: kdc\n    journal: {units: [\"\"]}\n", "not an identifier or unit name"},
		{"logs:\n  - type: kdc\n    journal: {directory: /d, files: [/f]}\n", "directory and files are exclusive"},
		{"logs:\n  - type: kdc\n    journal:\n      user: no-such-user-here\n", `test.yml:4: logs.0.journal.user: user "no-such-user-here"`},
		{"logs:\n  - type: kdc\n    journal: {user: \"-1\"}\n", `logs.0.journal.user: user "-1"`},
		{"logs:\n  - type: kdc\n    journal: {}\n  - type: kdc\n    journal: {}\n", "journal source listed twice"},
		{"logs:\n  - path: /x\n", `type is required`},
		{"logs:\n  - path: /x\n    type: heimdal\n", `test.yml:3: logs.0.type: type "heimdal": must be "kdc", "kadmind", "any" or "kpropd"`},
		{"logs:\n  - path: /x\n    type: kdc\n    start_at: middle\n", `start_at "middle"`},
		{"logs:\n  - path: /x\n    type: kdc\n    probe_principals: [\"a b@R\"]\n", "contains a space"},
		{"logs:\n  - path: /x\n    type: kdc\n    probe_principals: [\"@R\"]\n", "want name@REALM or name"},
		{"logs:\n  - path: /x\n    type: kdc\n    probe_principals: [p, p]\n", "listed twice"},
		{"logs:\n  - path: /x\n    type: kdc\n    poll_interval: 1ms\n", "between 10ms and 1m"},
		{"logs:\n  - path: /x\n    type: kdc\n    rotate_wait: -1s\n", "between 0 and 1h"},
		{"logs:\n  - path: /x\n    type: kdc\n  - path: /x\n    type: kadmind\n", "listed twice"},
		{"logs:\n  - path: /x\n    type: kdc\n    severity: high\n", `unknown key "severity"`},
		{"logs:\n  - path: /x\n    type: kdc\n    poll_interval: soon\n", "test.yml:4"},
	} {
		_, err := Parse([]byte(c.yaml), "test.yml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.yaml, err, c.want)
		}
	}
}

func TestJournalSourceKey(t *testing.T) {
	for _, c := range []struct {
		src  LogSource
		want string
	}{
		{LogSource{Type: "kdc", Journal: &JournalSource{}}, "journal:system:krb5kdc"},
		{LogSource{Type: "any", Journal: &JournalSource{Directory: "/j"}}, "journal:/j:krb5kdc,kadmind"},
		{LogSource{Type: "kadmind", Journal: &JournalSource{Units: []string{"krb5-admin-server.service"}}}, "journal:system:krb5-admin-server.service"},
		{LogSource{Type: "kdc", Path: "/var/log/krb5kdc.log"}, "/var/log/krb5kdc.log"},
	} {
		if got := c.src.Key(); got != c.want {
			t.Errorf("%+v: key %q, want %q", c.src, got, c.want)
		}
	}
}

// TestOneLogFileTwoSpellings: one file under two names would be counted
// twice; the second is refused with its line.
// The journal's trust rule: the programs of the type or the identifiers,
// and root plus the user, given as a name or a uid.
func TestJournalProgramsAndUIDs(t *testing.T) {
	for _, c := range []struct {
		src      LogSource
		programs []string
		uids     []uint32
	}{
		{LogSource{Type: "kdc", Journal: &JournalSource{}}, []string{"krb5kdc"}, nil},
		{LogSource{Type: "kadmind", Journal: &JournalSource{Units: []string{"krb5-admin-server.service"}, User: "nobody"}}, []string{"kadmind"}, []uint32{65534}},
		{LogSource{Type: "any", Journal: &JournalSource{Identifiers: []string{"krb5kdc"}, User: "107"}}, []string{"krb5kdc"}, []uint32{107}},
	} {
		uids, err := c.src.JournalUIDs()
		if err != nil || !slices.Equal(uids, c.uids) || !slices.Equal(c.src.JournalPrograms(), c.programs) {
			t.Errorf("%+v: programs %q, uids %v (%v), want %q, %v", c.src.Journal, c.src.JournalPrograms(), uids, err, c.programs, c.uids)
		}
	}
}

func TestOneLogFileTwoSpellings(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "krb5kdc.log")
	if err := os.WriteFile(real, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink(real, filepath.Join(dir, "link.log"))
	os.Link(real, filepath.Join(dir, "hard.log"))
	for _, second := range []string{
		dir + "/sub/../krb5kdc.log",
		dir + "//krb5kdc.log",
		filepath.Join(dir, "link.log"),
		filepath.Join(dir, "hard.log"),
		dir + "/sub/../absent.log/../krb5kdc.log",
	} {
		_, err := Parse([]byte("logs:\n  - path: "+real+"\n    type: kdc\n  - path: "+second+"\n    type: kdc\n"), "c.yml")
		if err == nil || !strings.Contains(err.Error(), "c.yml:4:") || !strings.Contains(err.Error(), "counted twice") {
			t.Errorf("%s: %v", second, err)
		}
	}
	// Two files that do not exist yet, spelled alike.
	_, err := Parse([]byte("logs:\n  - path: /nonexistent/a.log\n    type: kdc\n  - path: /nonexistent/x/../a.log\n    type: kdc\n"), "c.yml")
	if err == nil {
		t.Error("two spellings of one absent file accepted")
	}
	// Two files, two names: fine.
	other := filepath.Join(dir, "kadmind.log")
	os.WriteFile(other, nil, 0o644)
	if _, err := Parse([]byte("logs:\n  - path: "+real+"\n    type: kdc\n  - path: "+other+"\n    type: kadmind\n"), "c.yml"); err != nil {
		t.Error(err)
	}
}

func TestProbePrincipalsDefault(t *testing.T) {
	kt := filepath.Join(t.TempDir(), "k")
	writeKeytab(t, kt, "probe-a@EXAMPLE.COM", "probe-b@OTHER.ORG")
	cfg, err := Parse([]byte(`
modules:
  a: {realm: EXAMPLE.COM, client: probe-a, keytab: `+kt+`}
  b: {realm: EXAMPLE.COM, client: probe-b@OTHER.ORG, keytab: `+kt+`}
logs:
  - {path: /var/log/krb5kdc.log, type: kdc}
  - {path: /var/log/k2.log, type: kdc, probe_principals: [probe-a]}
  - {path: /var/log/k3.log, type: kdc, probe_principals: []}
`), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"probe-a@EXAMPLE.COM", "probe-b@OTHER.ORG"}
	if got, missing := cfg.ProbePrincipalsOf(&cfg.Logs[0]); !slices.Equal(got, want) || missing != nil {
		t.Errorf("default: %v, missing %v", got, missing)
	}
	if got, missing := cfg.ProbePrincipalsOf(&cfg.Logs[1]); !slices.Equal(got, []string{"probe-a"}) || !slices.Equal(missing, []string{"probe-b@OTHER.ORG"}) {
		t.Errorf("explicit: %v, missing %v", got, missing)
	}
	if got, missing := cfg.ProbePrincipalsOf(&cfg.Logs[2]); len(got) != 0 || len(missing) != 2 {
		t.Errorf("explicitly none: %v, missing %v", got, missing)
	}
}

// An entry with neither path nor journal follows kdc.conf: it loads, and
// two of them are checked only once resolved (the log collector's).
func TestLogSourceFromKDCConf(t *testing.T) {
	cfg, err := Parse([]byte("logs:\n  - type: kdc\n  - type: kadmind\n    probe_principals: [p]\n  - type: kpropd\n"), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range cfg.Logs {
		if !l.FromKDCConf() {
			t.Errorf("logs[%d] %+v: not from kdc.conf", i, l)
		}
	}
	for _, l := range []LogSource{{Type: "kdc", Path: "/x"}, {Type: "kdc", Journal: &JournalSource{}}} {
		if l.FromKDCConf() {
			t.Errorf("%+v: from kdc.conf", l)
		}
	}
}
