package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestParseErrorsNameFileLineAndKey(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown top-level key", "probes: []\nmodulez: {}\n", `x.yml:2: unknown key "modulez"`},
		{"unknown nested key", "logs:\n  - path: /var/log/krb5kdc.log\n    type: kdc\n    colour: red\n", `x.yml:4: unknown key "colour"`},
		{"wrong type", "logs: 3\n", "x.yml:1: cannot unmarshal"},
		{"syntax", "logs: [\n", "x.yml:"},
		{"validation", "logs:\n  - path: /a\n    type: kdc\n  - path: /b\n    type: sshd\n", `x.yml:5: logs.1.type: `},
		{"duplicate path", "logs:\n  - {path: /a, type: kdc}\n  - {path: /a, type: kdc}\n", `x.yml:3: logs.1.path: log file "/a" listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "x.yml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
		})
	}
}

func TestEmptyFileIsValid(t *testing.T) {
	cfg, err := Parse(nil, "empty.yml")
	if err != nil || cfg == nil {
		t.Fatalf("empty config: %v", err)
	}
}

func TestReloaderKeepsOldConfigOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("logs:\n  - {path: /var/log/a.log, type: kdc}\n")
	reg := prometheus.NewRegistry()
	r := NewReloader(path, log.NewNopLogger(), reg)
	var applied []*Config
	r.OnReload(func(c *Config) error { applied = append(applied, c); return nil })
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	good := r.Current()
	if len(good.Logs) != 1 || testutil.ToFloat64(r.success) != 1 {
		t.Fatalf("first load: %+v", good)
	}

	write("logs:\n  - {path: /var/log/a.log, type: kdc, bogus: 1}\n")
	if err := r.Reload(); err == nil {
		t.Fatal("bad config accepted")
	}
	if r.Current() != good || len(applied) != 1 {
		t.Error("a failed reload replaced or re-applied the configuration")
	}
	if v := testutil.ToFloat64(r.success); v != 0 {
		t.Errorf("krb5_exporter_config_last_reload_successful = %v after a failed reload", v)
	}

	write("logs: []\n")
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if len(r.Current().Logs) != 0 || len(applied) != 2 || testutil.ToFloat64(r.success) != 1 {
		t.Error("good reload after a bad one not applied")
	}
}
