package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestProbePrincipal creates probe principals in a real realm, through
// kadmin.local and through kadmind with the admin keytab, and checks the
// result with MIT's own tools: klist reads the keytab, kinit logs in with
// it, and the printed configuration probes the KDC.
func TestProbePrincipal(t *testing.T) {
	t.Parallel()
	testutil.RequireMIT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := realm.Up(ctx, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 1, Services: -1, Fillers: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	dir := t.TempDir()

	// As root the keytab goes to another user, as the packaged service's.
	owner, wantUID := "", os.Getuid()
	if os.Getuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		owner = "nobody"
		wantUID, _ = strconv.Atoi(u.Uid)
	}
	pp := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, binary, append([]string{"realm", "probe-principal", "--owner", owner,
			"--kdc", r.KDCAddr, "--kdc-log", r.KDCLog}, args...)...)
		cmd.Env = append(os.Environ(), r.Env()...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	mit := func(prog string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, prog, args...)
		cmd.Env = append(os.Environ(), append(r.Env(), "KRB5CCNAME=FILE:"+filepath.Join(dir, "cc"))...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", prog, args, err, out)
		}
		return string(out)
	}
	kvno := func(kt string) int {
		t.Helper()
		m := regexp.MustCompile(`(?m)^\s*(\d+) `).FindStringSubmatch(mit("klist", "-k", kt))
		if m == nil {
			t.Fatalf("klist -k %s lists no key", kt)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}

	kt := filepath.Join(dir, "probe.keytab")
	out, stderr, code := pp("--principal", "probe1", "--keytab", kt)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	fi, err := os.Stat(kt)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || int(fi.Sys().(*syscall.Stat_t).Uid) != wantUID {
		t.Errorf("keytab mode %v uid %d, want 0600 uid %d", fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, wantUID)
	}
	if l := mit("klist", "-k", "-e", kt); strings.Count(l, "probe1@"+r.Realm) != 4 {
		t.Errorf("klist -k: want the four keys of probe1@%s:\n%s", r.Realm, l)
	}
	mit("kinit", "-k", "-t", kt, "probe1@"+r.Realm)
	if entries, _ := os.ReadDir(dir); len(entries) != 2 { // probe.keytab, cc
		t.Errorf("left behind in %s: %v", dir, entries)
	}

	// The printed configuration is what the exporter then runs with.
	cfg := filepath.Join(dir, "config.yml")
	os.WriteFile(cfg, []byte(out), 0o600)
	probe, _, code := exporter(t, "probe", "--kdc", r.KDCAddr, "--config.file", cfg, "--module", "default")
	if code != nagiosOK {
		t.Errorf("probe with the printed configuration: exit %d\n%s\nconfiguration:\n%s", code, probe, out)
	}

	// An existing principal is left alone unless --rotate.
	before, _ := os.ReadFile(kt)
	if _, stderr, code := pp("--principal", "probe1", "--keytab", kt); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Errorf("existing principal: exit %d, %q", code, stderr)
	}
	if after, _ := os.ReadFile(kt); !bytes.Equal(before, after) {
		t.Error("a refused run changed the keytab")
	}
	old := kvno(kt)
	if _, stderr, code := pp("--principal", "probe1", "--keytab", kt, "--rotate"); code != 0 {
		t.Fatalf("--rotate: exit %d: %s", code, stderr)
	}
	if n := kvno(kt); n != old+1 {
		t.Errorf("--rotate: kvno %d, want %d", n, old+1)
	}
	mit("kinit", "-k", "-t", kt, "probe1@"+r.Realm)

	// Through kadmind with the admin keytab, as from a host that is not
	// the KDC.
	kt2 := filepath.Join(dir, "remote.keytab")
	if _, stderr, code := pp("--principal", "probe2@"+r.Realm, "--keytab", kt2,
		"--admin-keytab", r.AdminKeytab, "--admin-principal", r.AdminPrincipal, "--admin-server", r.KadmindAddr); code != 0 {
		t.Fatalf("kadmin: exit %d: %s", code, stderr)
	}
	mit("kinit", "-k", "-t", kt2, "probe2@"+r.Realm)

	// A failure says what kadmin said, in one line.
	if _, stderr, code := pp("--principal", "probe3", "--keytab", filepath.Join(dir, "x.keytab"),
		"--admin-keytab", filepath.Join(dir, "missing.keytab"), "--admin-principal", r.AdminPrincipal); code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "kadmin") {
		t.Errorf("bad admin keytab: exit %d, %q", code, stderr)
	}
}
