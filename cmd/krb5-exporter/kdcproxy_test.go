package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/prober"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestRealmKDCProxyCommands, as a new user would: realm up --kdc-proxy
// prints the proxy and writes an exporter configuration with a module and
// a probe of transport https that checks; krb5-exporter probe through
// the proxy with that module logs in (OK) and, trusting another CA, fails
// CRITICAL as tls_unknown_authority; realm down stops gunicorn and its
// workers.
func TestRealmKDCProxyCommands(t *testing.T) {
	t.Parallel()
	realmtest.RequireKDCProxy(t)
	dir := filepath.Join(t.TempDir(), "realm")
	cfg := filepath.Join(t.TempDir(), "exporter.yml")
	out, stderr, code := exporter(t, "realm", "up", "--dir", dir, "--users=1", "--services=1", "--fillers=-1", "--no-kadmind", "--kdc-proxy", "--exporter-config", cfg)
	if code != 0 {
		t.Fatalf("realm up --kdc-proxy: %d %s", code, stderr)
	}
	t.Cleanup(func() { exporter(t, "realm", "down", "--dir", dir) })
	r, err := realm.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := r.KDCProxy
	if p == nil || !strings.Contains(out, "# KDC proxy "+p.URL) {
		t.Fatalf("realm up does not print the proxy:\n%s", out)
	}
	if out, stderr, code := exporter(t, "--config.file", cfg, "--config.check"); code != 0 {
		t.Errorf("the written configuration does not check: %s %s", out, stderr)
	}
	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var module string
	for _, pr := range c.Probes {
		if pr.Address == p.URL {
			module = pr.Module
		}
	}
	if m := c.Modules[module]; module == "" || m.Transport != "https" || m.ProxyCAFile != p.CA || !m.AllowsProxyURL(p.URL) {
		t.Fatalf("no https probe of %s in the written configuration: %+v", p.URL, c.Probes)
	}

	out, _, code = exporter(t, "probe", "--config.file", cfg, "--module", module, "--kdc", p.URL)
	if code != prober.NagiosOK || !strings.HasPrefix(out, "KRB5 OK - login ") || !strings.Contains(out, "service ticket") {
		t.Errorf("probe through the proxy: exit %d %s", code, out)
	}
	other := filepath.Join(t.TempDir(), "other.pem")
	if err := realm.WriteCA(other, other+".key", "another CA"); err != nil {
		t.Fatal(err)
	}
	out, _, code = exporter(t, "probe", "--config.file", cfg, "--module", module, "--kdc", p.URL, "--proxy-ca-file", other)
	if code != prober.NagiosCritical || !strings.Contains(out, "login failed: tls_unknown_authority") {
		t.Errorf("probe trusting another CA: exit %d %s", code, out)
	}
	out, _, code = exporter(t, "probe", "--config.file", cfg, "--module", module, "--kdc", r.KDCAddr)
	if code != prober.NagiosUnknown || !strings.Contains(out, "want https://") {
		t.Errorf("probe of an https module at a KDC address: exit %d %s", code, out)
	}

	pids := r.KDCProxyPids()
	if len(pids) < 2 {
		t.Fatalf("gunicorn processes %v", pids)
	}
	if _, stderr, code := exporter(t, "realm", "down", "--dir", dir); code != 0 {
		t.Fatalf("realm down: %s", stderr)
	}
	for _, pid := range pids {
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("gunicorn pid %d still running after realm down", pid)
		}
	}
}
