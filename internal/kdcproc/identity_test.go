package kdcproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestRuleCheck: processes written as /proc trees (status, exe, cgroup as
// the kernel shows them), each with the verdict the rule must give.
func TestRuleCheck(t *testing.T) {
	root := t.TempDir()
	systemd := filepath.Join(root, "systemd")
	if err := os.Mkdir(systemd, 0o755); err != nil {
		t.Fatal(err)
	}
	self := os.Geteuid()
	v1 := "12:pids:/\n1:name=systemd:%s\n0::/\n"
	for i, c := range []struct {
		name       string
		uids       string // real, effective
		exe        string // "": no exe link (unreadable)
		cgroup     string // v1 name=systemd path; "": none
		v2         string // cgroup v2 path instead
		systemd    bool
		prog, want string
	}{
		{name: "root MIT binary", uids: "0 0", exe: "/usr/sbin/krb5kdc", prog: "krb5kdc"},
		{name: "upgraded binary", uids: "0 0", exe: "/usr/sbin/krb5kdc (deleted)", prog: "krb5kdc"},
		{name: "source build", uids: "0 0", exe: "/usr/local/sbin/kadmind", prog: "kadmind"},
		{name: "exporter's own user", uids: strconv.Itoa(self) + " " + strconv.Itoa(self), exe: "/usr/sbin/kpropd", prog: "kpropd"},
		{name: "copy of sleep by a user", uids: "4242 4242", exe: "/tmp/krb5kdc", prog: "krb5kdc", want: RejectUser},
		{name: "MIT binary run by a user", uids: "4242 4242", exe: "/usr/sbin/krb5kdc", prog: "krb5kdc", want: RejectUser},
		{name: "set-uid root through a link", uids: "4242 0", exe: "/usr/bin/passwd", prog: "krb5kdc", want: RejectUser},
		{name: "configured user", uids: "4243 4243", exe: "/usr/sbin/krb5kdc", prog: "krb5kdc"},
		{name: "root namesake", uids: "0 0", exe: "/tmp/krb5kdc", prog: "krb5kdc", want: RejectExecutable},
		{name: "other daemon's binary", uids: "0 0", exe: "/usr/sbin/krb5kdc", prog: "kadmind", want: RejectExecutable},
		{name: "configured executable", uids: "0 0", exe: "/opt/mit/sbin/krb5kdc", prog: "krb5kdc"},
		{name: "exe unreadable, no systemd", uids: "0 0", prog: "krb5kdc"},
		{name: "Debian unit", uids: "0 0", cgroup: "/system.slice/krb5-kdc.service", systemd: true, prog: "krb5kdc"},
		{name: "RHEL unit, v2", uids: "0 0", v2: "/system.slice/kadmin.service", systemd: true, prog: "kadmind"},
		{name: "below a unit", uids: "0 0", cgroup: "/system.slice/krb5kdc.service/sub", systemd: true, prog: "krb5kdc"},
		{name: "configured unit", uids: "0 0", cgroup: "/system.slice/kdc-b.service", systemd: true, prog: "krb5kdc"},
		{name: "root session", uids: "0 0", cgroup: "/user.slice/user-0.slice/session-3.scope", systemd: true, prog: "krb5kdc", want: RejectUnit},
		{name: "a user's own unit of that name", uids: "0 0", cgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice/krb5-kdc.service", systemd: true, prog: "krb5kdc", want: RejectUnit},
		{name: "another system unit", uids: "0 0", cgroup: "/system.slice/cron.service", systemd: true, prog: "krb5kdc", want: RejectUnit},
		{name: "lookalike unit", uids: "0 0", cgroup: "/system.slice/krb5-kdc.service.evil", systemd: true, prog: "krb5kdc", want: RejectUnit},
		{name: "seen from a cgroup namespace", uids: "0 0", v2: "/../../system.slice/krb5-kdc.service", systemd: true, prog: "krb5kdc"},
		{name: "a user's unit seen from a cgroup namespace", uids: "0 0", v2: "/../../user.slice/user-1000.slice/user@1000.service/system.slice/krb5-kdc.service", systemd: true, prog: "krb5kdc", want: RejectUnit},
		{name: "exe readable beats the unit", uids: "0 0", exe: "/usr/sbin/krb5kdc", cgroup: "/", systemd: true, prog: "krb5kdc"},
	} {
		dir := filepath.Join(root, strconv.Itoa(100+i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write := func(name, content string) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("status", "Name:\t"+c.prog+"\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t"+c.uids+" 0 0\nGid:\t0\t0\t0\t0\n")
		if c.exe != "" {
			if err := os.Symlink(c.exe, filepath.Join(dir, "exe")); err != nil {
				t.Fatal(err)
			}
		}
		switch {
		case c.cgroup != "":
			write("cgroup", fmt.Sprintf(v1, c.cgroup))
		case c.v2 != "":
			write("cgroup", "0::"+c.v2+"\n")
		}
		id := Identity{Users: []string{"4243"}, Executables: []string{"/opt/mit/sbin/krb5kdc"}, Units: []string{"kdc-b.service"},
			SystemdDir: filepath.Join(root, "none")}
		if c.systemd {
			id.SystemdDir = systemd
		}
		r, err := id.Rule()
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Check(dir, c.prog); got.Reason != c.want {
			t.Errorf("%s: %+v, want %q", c.name, got, c.want)
		}
	}
	// A configured path through a link (/sbin to /usr/sbin) is the file
	// it names, which /proc/PID/exe shows.
	real, link, proc := filepath.Join(root, "usr-sbin"), filepath.Join(root, "sbin"), filepath.Join(root, "200")
	for _, d := range []string{real, proc} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(real, "krb5kdc"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "status"), []byte("Name:\tkrb5kdc\nUid:\t0\t0\t0\t0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "krb5kdc"), filepath.Join(proc, "exe")); err != nil {
		t.Fatal(err)
	}
	r, err := Identity{Executables: []string{filepath.Join(link, "krb5kdc")}}.Rule()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Check(proc, "krb5kdc"); got.Reason != "" {
		t.Errorf("--collector.process.exe through a link: %+v", got)
	}
	if got := DefaultRule().Check(filepath.Join(root, "gone"), "krb5kdc"); got != Gone {
		t.Errorf("an exited process: %+v, want Gone", got)
	}
	for _, bad := range []Identity{{Users: []string{"no-such-user-krb5x"}}, {Executables: []string{"krb5kdc"}}, {Executables: []string{"/usr/bin/sleep"}}, {Units: []string{"a/b.service"}}} {
		if _, err := bad.Rule(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestReadPidFileTrust: a pid file another user owns, or that group or
// others may write, names no process.
func TestReadPidFileTrust(t *testing.T) {
	path := filepath.Join(t.TempDir(), "krb5kdc.pid")
	if err := os.WriteFile(path, []byte("1234\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := DefaultRule()
	if pid, err := r.ReadPidFile(path); pid != 1234 || err != nil {
		t.Fatalf("own 0644 file: %d, %v", pid, err)
	}
	for _, mode := range []os.FileMode{0o664, 0o646} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if pid, err := r.ReadPidFile(path); pid != 0 || !errors.Is(err, ErrUntrustedPidFile) {
			t.Errorf("mode %o: %d, %v; want untrusted", mode, pid, err)
		}
	}
	if os.Geteuid() == 0 {
		os.Chmod(path, 0o644)
		if err := os.Chown(path, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if pid, err := r.ReadPidFile(path); pid != 0 || !errors.Is(err, ErrUntrustedPidFile) {
			t.Errorf("another user's file: %d, %v; want untrusted", pid, err)
		}
	}
	if _, err := r.ReadPidFile(path + ".absent"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent: %v", err)
	}
}

// TestFindSkipsNamesake: a copy of sleep named krb5kdc run by another
// user is neither found nor given a worker index, while the real KDC's
// processes are.
func TestFindSkipsNamesake(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the fake as another user")
	}
	r := realmtest.Realm(t, realm.Options{Workers: 2, NoKadmind: true})
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kdcproc-fake-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	fake := filepath.Join(dir, "krb5kdc")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fake, "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4242, Gid: 4242}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm"); string(c) == "krb5kdc\n" {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the fake did not start")
		}
	}
	fakePID := cmd.Process.Pid
	// By name (other tests' KDCs may be found too, never the fake).
	procs, err := Find("/proc", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var found []int
	for _, p := range procs {
		found = append(found, p.PID)
	}
	if slices.Contains(found, fakePID) {
		t.Errorf("Find by name took the fake %d: %v", fakePID, found)
	}
	for _, pid := range r.KDCPids() {
		if !slices.Contains(found, pid) {
			t.Errorf("Find by name missed the KDC's %d: %v", pid, found)
		}
	}
	// A pid file naming the fake (as a stale file whose pid was reused).
	pidFile := filepath.Join(dir, "fake.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(fakePID)), 0o644); err != nil {
		t.Fatal(err)
	}
	if procs, err := Find("/proc", pidFile, nil); err != nil || len(procs) != 0 {
		t.Errorf("Find through a pid file naming the fake: %v, %v; want none", procs, err)
	}
	w, err := NewWorkers("/proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := w.Index(fakePID); ok {
		t.Errorf("the fake took worker index %d", i)
	}
	if _, ok := w.Index(r.KDCPids()[1]); !ok {
		t.Error("a real worker took no index")
	}
}
