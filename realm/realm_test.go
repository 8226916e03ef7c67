package realm

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func needMIT(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("MIT krb5 programs missing in CI: %v", err)
		}
		t.Skip(err)
	}
}

// needKpropd is needMIT for kpropd (package krb5-kpropd on Debian).
func needKpropd(t *testing.T) {
	t.Helper()
	if err := KpropdAvailable(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kpropd missing in CI: %v", err)
		}
		t.Skip(err)
	}
}

// run runs a client program with the realm's environment.
func run(t *testing.T, r *Realm, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), r.Env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

// TestDefaultRealm is the acceptance test of the harness: the seed's
// default-size realm, a keytab login and a service ticket with the MIT
// tools, and a teardown that leaves nothing behind.
func TestDefaultRealm(t *testing.T) {
	t.Parallel()
	needMIT(t)
	if testing.Short() {
		t.Skip("default-size realm (11,100 principals) skipped in -short mode")
	}
	dir := t.TempDir() + "/realm"
	r, err := Up(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created 11,100 principals and keytabs in %v", r.Created)
	pids := append(r.KDCPids(), r.KadmindPid())
	if len(pids) != 2 || pids[1] == 0 {
		t.Fatalf("want one krb5kdc and one kadmind, got %v", pids)
	}

	run(t, r, "kinit", "-k", "-t", r.ProbeKeytab, r.ProbePrincipal)
	run(t, r, "kinit", "-k", "-t", r.UserKeytab, r.User(1000))
	if out := run(t, r, "kvno", r.Service(100)); !strings.Contains(out, "kvno = 1") {
		t.Errorf("kvno: %s", out)
	}
	if out := run(t, r, "klist"); !strings.Contains(out, r.Service(100)) || !strings.Contains(out, "krbtgt/"+r.Realm) {
		t.Errorf("klist lacks the TGT or the service ticket: %s", out)
	}
	// The remote admin protocol works with the admin keytab.
	if out := run(t, r, "kadmin", "-k", "-t", r.AdminKeytab, "-p", r.AdminPrincipal, "-q", "getprinc "+r.fillerName(10000)); !strings.Contains(out, "Principal: filler10000@") {
		t.Errorf("kadmin getprinc: %s", out)
	}
	// Loaded by another process, as `realm down --dir` does.
	again, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Down(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		if alive(p, "krb5kdc") || alive(p, "kadmind") {
			t.Errorf("pid %d still running after Down", p)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Down: %v", dir, err)
	}
}

func TestWorkersAndRestart(t *testing.T) {
	t.Parallel()
	needMIT(t)
	r, err := Up(context.Background(), Options{Dir: t.TempDir() + "/r", Users: 3, Services: 1, Fillers: -1, Workers: 2, NoKadmind: true, DisableLastSuccess: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Down()
	pids := r.KDCPids()
	if len(pids) != 3 {
		t.Fatalf("krb5kdc -w 2: want supervisor and 2 workers, got %v", pids)
	}
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		if alive(p, "krb5kdc") {
			t.Errorf("pid %d survived StopKDC", p)
		}
	}
	if err := r.StartKDC(context.Background()); err != nil {
		t.Fatal(err)
	}
	run(t, r, "kinit", "-k", "-t", r.UserKeytab, r.User(3))
	if conf, _ := os.ReadFile(r.KDCConf); !strings.Contains(string(conf), "disable_last_success = true") {
		t.Errorf("kdc.conf lacks disable_last_success:\n%s", conf)
	}
}

func TestPortInUse(t *testing.T) {
	needMIT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	dir := t.TempDir() + "/r"
	_, err = Up(context.Background(), Options{Dir: dir, Users: 1, Services: -1, Fillers: -1, KDCPort: port})
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("want a clear port-in-use error, got %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed Up left %s behind", dir)
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "directory is required"},
		{Options{Dir: "x", Realm: "lower.case"}, "upper-case realm"},
		{Options{Dir: "x", Workers: -1}, "workers must be"},
		{Options{Dir: "x", KDCPort: 70000}, "out of range"},
	} {
		if _, err := tc.o.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: want error %q, got %v", tc.o, tc.want, err)
		}
	}
	o, err := Options{Dir: "x", Fillers: -1}.withDefaults()
	if err != nil || o.Users != 1000 || o.Services != 100 || o.Fillers != 0 || o.Realm != "PERF.TEST" {
		t.Errorf("defaults: %+v %v", o, err)
	}
}

func TestNonEmptyDirRefused(t *testing.T) {
	needMIT(t)
	dir := t.TempDir()
	os.WriteFile(dir+"/precious", []byte("x"), 0o600)
	if _, err := Create(context.Background(), Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("want refusal, got %v", err)
	}
	if _, err := os.Stat(dir + "/precious"); err != nil {
		t.Error("harness touched a file it did not write")
	}
}
