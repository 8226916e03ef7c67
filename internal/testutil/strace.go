package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StraceSyncs attaches strace to every thread of pid for its fsync and
// fdatasync calls, each held d before it runs when d > 0 (a slow disk),
// and returns once the kernel shows pid traced. stop detaches strace and
// returns how many syncs it saw; it is also run at the test's end.
func StraceSyncs(t testing.TB, pid int, d time.Duration) (stop func() int) {
	t.Helper()
	RequireProgram(t, "strace")
	out := filepath.Join(t.TempDir(), "strace.out")
	args := []string{"-f", "-qq", "--seccomp-bpf", "-o", out, "-e", "trace=fsync,fdatasync", "-p", strconv.Itoa(pid)}
	if d > 0 {
		args = append(args, "-e", "inject=fsync,fdatasync:delay_enter="+strconv.FormatInt(d.Microseconds(), 10)+"us")
	}
	st := exec.Command("strace", args...)
	st.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	stopped, syncs := false, 0
	stop = func() int {
		if !stopped {
			stopped = true
			st.Process.Signal(syscall.SIGINT)
			st.Wait()
			b, err := os.ReadFile(out)
			if err != nil {
				t.Error(err)
			}
			syncs = strings.Count(string(b), "sync(")
		}
		return syncs
	}
	t.Cleanup(func() { stop() })
	TracedBy(t, pid, st.Process.Pid)
	return stop
}

// TracedBy waits (10 s at most) until the kernel shows pid traced by
// tracer: strace has attached once it has.
func TracedBy(t testing.TB, pid, tracer int) {
	t.Helper()
	want := "TracerPid:\t" + strconv.Itoa(tracer) + "\n"
	Eventually(t, 10*time.Second, "pid "+strconv.Itoa(pid)+" traced by "+strconv.Itoa(tracer), func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		return err == nil && strings.Contains(string(b), want)
	})
}
