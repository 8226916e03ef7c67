package main

import (
	"bytes"
	"context"
	"fmt"
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

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/prober"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestProbePrincipal creates probe principals in a real realm, through
// kadmin.local and through kadmind with the admin keytab, and checks the
// result with MIT's own tools: klist reads the keytab, kinit logs in with
// it, and the printed configuration probes the KDC.
func TestProbePrincipal(t *testing.T) {
	t.Parallel()
	realmtest.RequireMIT(t)
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
	mit := mitTools(ctx, t, r, dir)
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
	// The printed principal, key count and kvno are what klist reads.
	if want := fmt.Sprintf("# Probe principal probe1@%s: 4 keys (kvno %d) in %s\n", r.Realm, kvno(kt), kt); !strings.HasPrefix(out, want) {
		t.Errorf("printed configuration starts %q, want %q", strings.SplitAfter(out, "\n")[0], want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 { // probe.keytab, cc
		t.Errorf("left behind in %s: %v", dir, entries)
	}

	// The printed configuration is what the exporter then runs with.
	cfg := filepath.Join(dir, "config.yml")
	os.WriteFile(cfg, []byte(out), 0o600)
	probe, _, code := exporter(t, "probe", "--kdc", r.KDCAddr, "--config.file", cfg, "--module", "default")
	if code != prober.NagiosOK {
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

// TestProbePrincipalRotateKeepsTheKey: a --rotate that cannot install the
// keytab (a directory at the destination, an owner the file cannot be given
// to, no such user) fails before the principal's key changes, as kadmin's
// getprinc tells, and the deployed keytab still logs in; a failure after
// the change (a directory appears at the destination while kadmin exports
// the key) keeps the new keytab and names it, and kinit logs in with it.
func TestProbePrincipalRotateKeepsTheKey(t *testing.T) {
	t.Parallel()
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 1, Services: -1, Fillers: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	kadminLocal, err := realm.LookPath("kadmin.local")
	if err != nil {
		t.Fatal(err)
	}
	run := func(prefix, env []string, args ...string) (string, int) {
		t.Helper()
		argv := append(append(prefix, binary, "realm", "probe-principal", "--principal", "probe1",
			"--kdc", r.KDCAddr, "--kdc-log", r.KDCLog), args...)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(append(os.Environ(), r.Env()...), env...)
		var e bytes.Buffer
		cmd.Stderr = &e
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return e.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return e.String(), 0
	}
	mit := mitTools(ctx, t, r, dir)
	// The KDC's own record of the principal's key version.
	kvno := func() int {
		t.Helper()
		m := regexp.MustCompile(`Key: vno (\d+),`).FindStringSubmatch(mit(kadminLocal, "-r", r.Realm, "-q", "getprinc probe1"))
		if m == nil {
			t.Fatal("kadmin.local getprinc probe1: no key")
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}

	kt := filepath.Join(dir, "probe.keytab")
	if stderr, code := run(nil, nil, "--owner", "", "--keytab", kt); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	v := kvno()

	// Refused before the key changes.
	asDir := filepath.Join(dir, "is-a-dir")
	os.Mkdir(asDir, 0o700)
	owner := []string{"--owner", "nobody"}
	var prefix []string
	if os.Getuid() == 0 {
		// root may give a file to anyone; in a user namespace that maps
		// root alone, nobody's uid is not representable (EINVAL), as
		// chown by another user is refused (EPERM).
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Fatal(err)
		}
		prefix = []string{"unshare", "--user", "--map-root-user"}
	}
	for _, c := range []struct {
		what   string
		prefix []string
		args   []string
		want   string
	}{
		{"a directory at the destination", nil, []string{"--owner", "", "--keytab", asDir}, "is a directory"},
		{"an owner the keytab cannot be given", prefix, append(owner, "--keytab", kt), "keytab owner"},
		{"no such owner", nil, []string{"--owner", "no-such-user-krb5x", "--keytab", kt}, "keytab owner"},
	} {
		stderr, code := run(c.prefix, nil, append(c.args, "--rotate")...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, %q; want 1 and %q", c.what, code, stderr, c.want)
		}
		if n := kvno(); n != v {
			t.Errorf("%s: the principal's kvno moved from %d to %d", c.what, v, n)
			v = n
		}
		mit("kinit", "-k", "-t", kt, "probe1@"+r.Realm)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 { // probe.keytab, is-a-dir, cc
		t.Errorf("left behind in %s: %v", dir, entries)
	}

	// A directory appears at the destination once kadmin has exported
	// the new key: the real kadmin.local, then the operator's mistake.
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o700)
	late := filepath.Join(dir, "late.keytab")
	wrapper := "#!/bin/sh\n\"$REAL_KADMIN_LOCAL\" \"$@\"\nrc=$?\ncase \"$*\" in *ktadd*) mkdir \"$PLANT_DIR\";; esac\nexit $rc\n"
	if err := os.WriteFile(filepath.Join(bin, "kadmin.local"), []byte(wrapper), 0o700); err != nil {
		t.Fatal(err)
	}
	stderr, code := run(nil, []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "REAL_KADMIN_LOCAL=" + kadminLocal, "PLANT_DIR=" + late},
		"--owner", "", "--keytab", late, "--rotate")
	m := regexp.MustCompile(`new key is kept in (\S+) `).FindStringSubmatch(stderr)
	if code != 1 || m == nil {
		t.Fatalf("failure after the key changed: exit %d, %q; want 1 and where the new key is", code, stderr)
	}
	if n := kvno(); n != v+1 {
		t.Errorf("kvno %d after the rotation, want %d", n, v+1)
	}
	mit("kinit", "-k", "-t", m[1], "probe1@"+r.Realm)
	if l := mit("klist", "-k", m[1]); !strings.Contains(l, " "+strconv.Itoa(v+1)+" probe1@") {
		t.Errorf("the kept keytab does not hold kvno %d:\n%s", v+1, l)
	}
}

// mitTools runs an MIT program (kinit, klist, kadmin.local) in r's
// environment with a credentials cache in dir, failing t when it fails.
func mitTools(ctx context.Context, t *testing.T, r *realm.Realm, dir string) func(prog string, args ...string) string {
	return func(prog string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, prog, args...)
		cmd.Env = append(os.Environ(), append(r.Env(), "KRB5CCNAME=FILE:"+filepath.Join(dir, "cc"))...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", prog, args, err, out)
		}
		return string(out)
	}
}
