package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// ourLine is the shape of every logfmt line of the daemon, whoever logs it.
var ourLine = regexp.MustCompile(`^level=(debug|info|warn|error) ts=\d{4}-\d\d-\d\dT[0-9:.]+Z caller=[\w.-]+\.go:\d+ msg=`)

// One log stream (issue 8 item 5): the daemon's own lines and
// exporter-toolkit's ("Listening on", through slog) share keys and order in
// logfmt, and key names in json.
func TestDaemonLogStream(t *testing.T) {
	t.Parallel()
	_, _, logs := daemon(t)
	// The daemon's stderr reaches the test through a pipe: await the lines.
	started := func(l *testutil.LockedBuffer) func() bool {
		return func() bool {
			text := l.String()
			return strings.Contains(text, "Listening on") && strings.Contains(text, "starting krb5-exporter")
		}
	}
	testutil.Eventually(t, 20*time.Second, "the toolkit's and our start-up lines", started(logs))
	text := logs.String()
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if !ourLine.MatchString(l) || strings.Contains(l, " time=") {
			t.Errorf("line not in the stream's shape: %s", l)
		}
	}

	_, _, logs = daemon(t, "--log.format", "json")
	testutil.Eventually(t, 20*time.Second, "the start-up lines in json", started(logs))
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	toolkit := false
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("not JSON: %s", l)
			continue
		}
		for _, k := range []string{"level", "ts", "caller", "msg"} {
			if _, ok := m[k]; !ok {
				t.Errorf("no %q: %s", k, l)
			}
		}
		if _, ok := m["time"]; ok {
			t.Errorf("a second time key: %s", l)
		}
		toolkit = toolkit || m["msg"] == "Listening on"
	}
	if !toolkit {
		t.Errorf("no toolkit line in:\n%s", logs.String())
	}
}

// A reload that fails logs one line naming file, line and key, answers
// the same in its body, and neither names a keytab (issue 19; issue 10
// item 8).
func TestFailedReloadIsOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yml")
	os.WriteFile(cfg, []byte("logs: []\n"), 0o600)
	base, _, logs := daemon(t, "--config.file", cfg)

	kt := filepath.Join(dir, "secret-name.keytab")
	testutil.WriteKeytab(t, kt, "probe@EXAMPLE.COM", "pw")
	for _, tc := range []struct{ yaml, want string }{
		{"logs: []\nmodules:\n  m:\n    realm: EXAMPLE.COM\n    client: probe\n    keytab: " + kt + "\n    colour: red\n",
			cfg + `:7: unknown key \"colour\"`},
		{"modules:\n  m:\n    realm: EXAMPLE.COM\n    client: probe\n    keytab: " + kt + "\n    allowed_kdcs: [kdc1, 'k k']\n",
			cfg + `:6: modules.m.allowed_kdcs.1: KDC pattern \"k k\"`},
		// A keytab that cannot be read no longer fails a reload: it fails
		// its module's probes (TestDaemonBadKeytab).
		{"modules:\n  m:\n    realm: EXAMPLE.COM\n    client: probe\n    keytab: " + kt + "\n    transport: carrier-pigeon\n",
			cfg + `:6: modules.m.transport: transport \"carrier-pigeon\"`},
	} {
		os.WriteFile(cfg, []byte(tc.yaml), 0o600)
		loaded := strings.Count(logs.String(), "configuration loaded")
		before := strings.Count(logs.String(), "\n")
		resp, err := http.Post(base+"/-/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("reload answered %d", resp.StatusCode)
		}
		// A good reload after it logs a line of its own: once that line
		// has come through the pipe, so has everything the bad one logged.
		os.WriteFile(cfg, []byte("logs: []\n"), 0o600)
		if code := post(t, base+"/-/reload"); code != http.StatusOK {
			t.Fatalf("good reload answered %d", code)
		}
		testutil.Eventually(t, 20*time.Second, "the good reload's line", func() bool {
			return strings.Count(logs.String(), "configuration loaded") > loaded
		})
		added := strings.Split(logs.String(), "\n")[before:]
		var errs []string
		for _, l := range added {
			if strings.HasPrefix(l, "level=error") {
				errs = append(errs, l)
			}
		}
		if len(errs) != 1 || !strings.Contains(errs[0], tc.want) {
			t.Errorf("want one error line with %q, got:\n%s", tc.want, strings.Join(added, "\n"))
		}
		if strings.Contains(strings.Join(added, "\n"), "secret-name") || strings.Contains(string(body), "secret-name") {
			t.Errorf("the keytab is named: log %q, body %q", added, body)
		}
	}
}

// --web.telemetry-path must be a path of its own: a clear error, exit 1,
// no panic (issue 10 item 10).
func TestTelemetryPathChecked(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "metrics", "/probe", "/-/reload", "/-/healthy", "/a b"} {
		_, stderr, code := exporter(t, "--web.listen-address", "127.0.0.1:0", "--web.telemetry-path", p)
		if code != 1 {
			t.Errorf("%q: exit %d, want 1", p, code)
		}
		oneErrorLine(t, stderr, "--web.telemetry-path")
	}
}

// --web.max-probe-requests reaches /probe: with a limit of 1, a probe of a
// silent KDC holds the only slot and the next request is answered 503
// (issue 10 item 7).
func TestProbeLimitFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kt := filepath.Join(dir, "probe.keytab")
	testutil.WriteKeytab(t, kt, "probe@EXAMPLE.COM", "pw")
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cfg := filepath.Join(dir, "c.yml")
	os.WriteFile(cfg, []byte("modules:\n  default:\n    realm: EXAMPLE.COM\n    client: probe\n    keytab: "+kt+
		"\n    timeout: 1m\n    allowed_kdcs: [127.0.0.1]\n"), 0o600)
	base, _, _ := daemon(t, "--config.file", cfg, "--web.max-probe-requests", "1")
	u := base + "/probe?target=" + silent.LocalAddr().String()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan struct{})
	go func() {
		defer close(first)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := silent.ReadFrom(make([]byte, 4096)); err != nil {
		t.Fatalf("the first probe never reached the KDC: %v", err)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second probe with --web.max-probe-requests=1: %d %q, want 503", resp.StatusCode, body)
	}
	if m := metric(t, base, `krb5_probe_http_refused_total{reason="too_many_requests"}`); !strings.HasSuffix(m, " 1") {
		t.Errorf("refusal not counted: %q", m)
	}
	cancel()
	<-first
}
