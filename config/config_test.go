package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/krb5-exporter/krb5-exporter/logging"
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
	r := NewReloader(path, log.NewNopLogger(), logging.NewLimiter(time.Minute), reg)
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

// TestReloadLogIsRateLimited: 100 reloads in a row (a client posting
// /-/reload in a loop) log one line, the limiter's one per interval; a
// changed outcome, failure after success and back, is logged at once, the
// success after the held failures counting them.
func TestReloadLogIsRateLimited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yml")
	var buf bytes.Buffer
	r := NewReloader(path, log.NewLogfmtLogger(&buf), logging.NewLimiter(time.Hour), prometheus.NewRegistry())
	reload := func(yaml string, ok bool) {
		t.Helper()
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			if err := r.Reload(); (err == nil) != ok {
				t.Fatalf("reload: %v", err)
			}
		}
	}
	lines := func() []string { return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") }

	reload("logs: []\n", true)
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "configuration loaded") {
		t.Fatalf("100 good reloads logged %d lines:\n%s", len(l), buf.String())
	}
	reload("logs: 3\n", false)
	if l := lines(); len(l) != 2 || !strings.Contains(l[1], "configuration not reloaded") {
		t.Fatalf("100 failed reloads after a good one logged:\n%s", buf.String())
	}
	reload("logs: []\n", true)
	if l := lines(); len(l) != 3 || !strings.Contains(l[2], "configuration loaded") || !strings.Contains(l[2], "earlier_not_logged=99") {
		t.Fatalf("a good reload after 100 failed ones logged:\n%s", buf.String())
	}
}
