package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// When the warning is due: names published (a KDC log followed, the top
// talkers or attack signals on), no authentication, a socket beyond
// loopback; each condition alone removes it.
func TestExposureWarning(t *testing.T) {
	dir := t.TempDir()
	web := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o600)
		return p
	}
	basic := web("basic.yml", "basic_auth_users:\n  prometheus: $2y$10$abcdefghijklmnopqrstuu5YQ6S0Q6vF2QmZzjX2dZ0Q2dQ2dQ2dQ\n")
	mtls := web("mtls.yml", "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n")
	anyCert := web("any.yml", "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_auth_type: RequireAnyClientCert\n")
	tlsOnly := web("tls.yml", "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n")
	all := &net.TCPAddr{IP: net.IPv4zero, Port: 10088}
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10088}
	lo6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 10088}
	lan := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 10088}
	kdc := &config.Config{Logs: []config.LogSource{{Type: "kdc"}}}
	off := &config.Config{Logs: []config.LogSource{{Type: "kdc"}}, TopTalkers: config.TopTalkers{Disabled: true}, AttackSignals: config.AttackSignals{Disabled: true}}
	for name, c := range map[string]struct {
		addrs []net.Addr
		web   string
		cfg   *config.Config
		want  string // the published list, "" for no warning
	}{
		"default":               {[]net.Addr{all}, "", kdc, "top_talkers,attack_signals"},
		"a LAN address":         {[]net.Addr{lo, lan}, "", kdc, "top_talkers,attack_signals"},
		"loopback":              {[]net.Addr{lo, lo6}, "", kdc, ""},
		"basic auth":            {[]net.Addr{all}, basic, kdc, ""},
		"client certificates":   {[]net.Addr{all}, mtls, kdc, ""},
		"any client cert":       {[]net.Addr{all}, anyCert, kdc, "top_talkers,attack_signals"},
		"TLS alone":             {[]net.Addr{all}, tlsOnly, kdc, "top_talkers,attack_signals"},
		"both off":              {[]net.Addr{all}, "", off, ""},
		"no KDC log":            {[]net.Addr{all}, "", &config.Config{Logs: []config.LogSource{{Type: "kadmind"}}}, ""},
		"talkers only":          {[]net.Addr{all}, "", &config.Config{Logs: []config.LogSource{{Type: "any", Path: "/x"}}, AttackSignals: config.AttackSignals{Disabled: true}}, "top_talkers"},
		"unix socket (systemd)": {[]net.Addr{&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}}, "", kdc, ""},
	} {
		kv := exposureWarning(c.addrs, c.web, c.cfg)
		got := ""
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == "published" {
				got = kv[i+1].(string)
			}
		}
		if got != c.want {
			t.Errorf("%s: published %q, want %q (%v)", name, got, c.want, kv)
		}
	}
}

// The daemon itself, bound to every address of a network namespace of its
// own (nothing of this host is exposed): one warning at start; bound to
// loopback, none.
func TestExposureWarningAtStart(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		if testutil.InCI() {
			t.Fatal("needs root for a network namespace")
		}
		t.Skip("needs root for a network namespace")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "exporter.yml")
	os.WriteFile(cfg, []byte("logs:\n  - path: "+filepath.Join(dir, "krb5kdc.log")+"\n    type: kdc\n"), 0o600)
	start := func(listen string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// A network namespace of its own (its loopback down: binding needs
		// no traffic).
		cmd := exec.CommandContext(ctx, binary, "--web.listen-address", listen, "--config.file", cfg, "--no-collector.process", "--no-collector.network", "--no-collector.kdcconf")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Signal(syscall.SIGTERM)
		var out strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "starting krb5-exporter") {
				return out.String()
			}
		}
		t.Fatalf("%s: the exporter did not start: %s", listen, out.String())
		return ""
	}
	const warning = "published without authentication beyond loopback"
	if out := start(":0"); strings.Count(out, warning) != 1 || !strings.Contains(out, "docs/security.md") {
		t.Errorf("bound to every address: want one warning naming the fix:\n%s", out)
	}
	if out := start("127.0.0.1:0"); strings.Contains(out, warning) {
		t.Errorf("bound to loopback: warned:\n%s", out)
	}
}
