// Package journaldtest runs a real systemd-journald for tests, without
// systemd as PID 1 and without touching the host's journal.
package journaldtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// A real systemd-journald, without systemd as PID 1: in a private mount
// namespace with tmpfs on /run/systemd/journal and /run/log and its own
// journald.conf bound over /etc/systemd/journald.conf, so the host's
// journal is never touched. Its sockets and its volatile journal are
// reached from outside the namespace through /proc/PID/root.
type Journald struct {
	Cmd          *exec.Cmd
	Root         string // /proc/PID/root of journald
	DevLog, Dir  string // its syslog socket and journal directory, seen from here
	CgroupParent string // a cgroup v2 directory services' processes go in
}

// Bin is the journald the tests run.
const Bin = "/lib/systemd/systemd-journald"

const journaldScript = `set -e
mount --make-rprivate /
mkdir -p /run/systemd/journal /run/log
mount -t tmpfs -o mode=0755,size=64m krb5-exporter-test /run/systemd/journal
mount -t tmpfs -o mode=0755,size=64m krb5-exporter-test /run/log
mount --bind "$1" /etc/systemd/journald.conf
exec ` + Bin + `
`

// Start runs journald with conf ([Journal] settings) until the
// test ends; it skips where namespaces or a writable cgroup v2 hierarchy
// (journald tells services apart by their cgroup) are missing.
func Start(t testing.TB, conf string) *Journald {
	t.Helper()
	if _, err := os.Stat(Bin); err != nil {
		if testutil.InCI() {
			t.Fatalf("%s missing in CI: %v", Bin, err)
		}
		t.Skipf("%s not installed: %v", Bin, err)
	}
	if os.Geteuid() != 0 {
		Unavailable(t, "a private journald needs root (mount namespace, cgroups)")
	}
	cg := Cgroup2Mount()
	if cg == "" {
		Unavailable(t, "no cgroup v2 hierarchy: journald would see no unit")
	}
	dir := t.TempDir()
	confPath := filepath.Join(dir, "journald.conf")
	if err := os.WriteFile(confPath, []byte("[Journal]\nStorage=volatile\nReadKMsg=no\nForwardToSyslog=no\nForwardToWall=no\nForwardToConsole=no\nForwardToKMsg=no\n"+conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-m", "--", "/bin/sh", "-c", journaldScript, "sh", confPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		Unavailable(t, "unshare: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	j := &Journald{Cmd: cmd, Root: fmt.Sprintf("/proc/%d/root", cmd.Process.Pid), CgroupParent: cg}
	j.DevLog = j.Root + "/run/systemd/journal/dev-log"
	j.Dir = j.Root + "/run/log/journal"
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			Unavailable(t, "journald in a private mount namespace did not start (%v): %s", err, out)
		default:
		}
		if fi, err := os.Stat(j.DevLog); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if m, _ := filepath.Glob(j.Dir + "/*/system.journal"); len(m) > 0 {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("journald made no %s and journal: %s", j.DevLog, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Unavailable skips a test this machine cannot run, and fails it in CI,
// whose machine can (scripts/deps.sh, root): there a skip would pass a
// test that never ran.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if testutil.InCI() {
		t.Fatalf("in CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

// Cgroup2Mount is where the unified cgroup hierarchy is mounted (journald
// reads a sender's unit from it), "" if nowhere writable.
func Cgroup2Mount() string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 4 && fs[2] == "cgroup2" && strings.HasPrefix(fs[3], "rw") {
			return fs[1]
		}
	}
	return ""
}
