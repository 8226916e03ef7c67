package kdcbpf

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// requireBPF loads the program or skips: outside CI only when the kernel
// does not let this process load it (no root, CAP_BPF, or hooks); in CI a
// failure to load fails.
func requireBPF(t *testing.T) *Tracer {
	t.Helper()
	tr, err := Load()
	if err != nil {
		var e *Error
		if !testutil.InCI() && errors.As(err, &e) && (e.Reason == ReasonPermission || e.Reason == ReasonUnsupportedKernel) {
			t.Skipf("BPF not permitted here: %v", err)
		}
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestCommittedObjectLoads loads the committed object with each way of
// seeing receives and sends, forced: the kernel's verifier accepts every
// program and each attaches. The socket tracepoints where the kernel has
// them (Linux 6.3), fentry and kprobes where it has trampolines and
// kprobes (not this project's CI kernel: the Debian 12 VM runs them),
// the system calls' tracepoints and sys_enter/sys_exit everywhere.
func TestCommittedObjectLoads(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the program is built for amd64")
	}
	testutil.Tracefs(t)
	for _, hooks := range HookModes {
		t.Run(hooks, func(t *testing.T) {
			t.Setenv(HooksEnv, hooks)
			tr, err := Load()
			if err != nil {
				if KernelMayLack(hooks) {
					t.Skipf("this kernel has no %s hooks: %v", hooks, err)
				}
				var e *Error
				if errors.As(err, &e) && e.Reason == ReasonPermission && !testutil.InCI() {
					t.Skipf("BPF not permitted here: %v", err)
				}
				t.Fatalf("load with %s hooks: %v", hooks, err)
			}
			defer tr.Close()
			if tr.Hooks != hooks {
				t.Errorf("loaded with %q hooks, want %q", tr.Hooks, hooks)
			}
			if err := tr.Watch([]int{os.Getpid()}); err != nil {
				t.Fatal(err)
			}
			var s Snapshot
			if err := tr.Read(&s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLoadChoosesBest: without HooksEnv, Load takes the first mode of
// HookModes that this kernel loads and attaches, and says why it skipped
// each better one. The best mode is found here independently: each mode
// forced in turn, in order.
func TestLoadChoosesBest(t *testing.T) {
	requireBPF(t).Close()
	testutil.Tracefs(t)
	best := ""
	var failed []string
	for _, m := range AutoHookModes {
		t.Setenv(HooksEnv, m)
		tr, err := Load()
		if err == nil {
			tr.Close()
			best = m
			break
		}
		failed = append(failed, m)
	}
	t.Setenv(HooksEnv, "")
	tr := requireBPF(t)
	if tr.Hooks != best {
		t.Errorf("Load chose %q hooks; the first that loads here, forcing each in turn, is %q", tr.Hooks, best)
	}
	if len(tr.Skipped) != len(failed) {
		t.Errorf("Load says it skipped %q; forcing each, %v failed", tr.Skipped, failed)
	}
	for i, m := range failed {
		if i < len(tr.Skipped) && !strings.HasPrefix(tr.Skipped[i], m+": ") {
			t.Errorf("skipped[%d] = %q, want %s's reason", i, tr.Skipped[i], m)
		}
	}
	t.Logf("hooks %s; skipped %q", tr.Hooks, tr.Skipped)
	t.Setenv(HooksEnv, "nonsense")
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), HooksEnv) {
		t.Errorf("Load with %s=nonsense: %v, want an error naming it", HooksEnv, err)
	}
}

// TestLoadNeverTaxesTheHost: where none of the hooks that run only for
// the KDC loads, Load traces nothing rather than fall back to the system
// call hooks, and its error says so and names the opt-in. The modes that
// fail here are found by forcing each; the ones that load are left out of
// the automatic list for the test, as on a kernel without them (this
// project's kernel has the socket tracepoints only, Debian 12's has
// trampolines and kprobes only). The system call hooks load here, so a
// Load that fell back to them would return a tracer.
func TestLoadNeverTaxesTheHost(t *testing.T) {
	requireBPF(t).Close()
	testutil.Tracefs(t)
	var missing []string
	for _, m := range AutoHookModes {
		t.Setenv(HooksEnv, m)
		if tr, err := Load(); err == nil {
			tr.Close()
		} else {
			missing = append(missing, m)
		}
	}
	t.Setenv(HooksEnv, HooksTracepoint)
	tr, err := Load()
	if err != nil {
		t.Fatalf("the system calls' tracepoints do not load here (%v): nothing to fall back to", err)
	}
	tr.Close()
	t.Setenv(HooksEnv, "")
	auto := AutoHookModes
	t.Cleanup(func() { AutoHookModes = auto })
	AutoHookModes = missing
	tr, err = Load()
	if err == nil {
		tr.Close()
		t.Fatalf("with none of %v on this kernel, Load traced with %s hooks", auto, tr.Hooks)
	}
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonUnsupportedKernel {
		t.Errorf("Load: %v, want reason %s", err, ReasonUnsupportedKernel)
	}
	if !strings.Contains(err.Error(), HooksEnv+"="+HooksSyscalls) {
		t.Errorf("Load: %v: does not name the opt-in %s=%s", err, HooksEnv, HooksSyscalls)
	}
	t.Logf("missing here: %v; Load: %v", missing, err)
}

// TestObjectIsSource compiles the C source again, as `make bpf` does, and
// compares: the committed object is what the source compiles to (clang's
// output is reproducible for the same clang).
func TestObjectIsSource(t *testing.T) {
	testutil.RequireProgram(t, "clang")
	testutil.RequireProgram(t, "llvm-strip")
	if v, err := exec.Command("clang", "--version").Output(); err != nil {
		t.Fatal(err)
	} else if first, _, _ := strings.Cut(string(v), "\n"); strings.TrimSpace(first) != Compiler {
		t.Skipf("clang here is %q, the object was compiled by %q: another clang compiles other bytes (TestCommittedObjectLoads checks that the object loads)", first, Compiler)
	}
	dir := t.TempDir()
	src, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(line, "//go:generate go tool bpf2go "); ok {
			args = splitQuoted(rest)
		}
	}
	if args == nil {
		t.Fatal("no bpf2go line in gen.go")
	}
	cmd := exec.Command("go", append([]string{"tool", "bpf2go", "-go-package", "kdcbpf", "-output-dir", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bpf2go: %v\n%s", err, out)
	}
	for _, f := range []string{"kdcservice_x86_bpfel.o", "kdcservice_x86_bpfel.go"} {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what bpf/kdcservice.bpf.c compiles to: run make bpf and commit", f)
		}
	}
}

// splitQuoted splits a go:generate line as go generate does: at spaces,
// keeping double-quoted strings whole.
func splitQuoted(s string) []string {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"') + 1
			out = append(out, s[1:end])
			s = s[end+1:]
			continue
		}
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			end = len(s)
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// TestVerifierRefusalIsLoad: a program the verifier refuses (here one that
// returns without setting R0) fails with EACCES, which must read as load,
// not as permission: a permission error makes the tests skip outside CI
// and tells the operator to grant capabilities that are already there.
func TestVerifierRefusalIsLoad(t *testing.T) {
	requireBPF(t)
	_, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{asm.Return()}})
	if err == nil {
		t.Fatal("the verifier accepted a program that returns an unset R0")
	}
	if !errors.Is(err, syscall.EACCES) {
		t.Logf("refusal not EACCES on this kernel: %v", err)
	}
	if got := ReasonOf(err, ReasonAttach); got != ReasonLoad {
		t.Errorf("ReasonOf(%v) = %q, want %q", err, got, ReasonLoad)
	}
}

// TestWatchBounded: more pids than MaxWatched, or than the table holds,
// fail neither Watch nor Read: the pids left out are counted (the
// arithmetic of the table's 1,024 places, not the program's word). The
// children of a watched process fill the rest of the table; those that
// do not fit are counted by the program, and those that exit free their
// places.
func TestWatchBounded(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the program is built for amd64")
	}
	testutil.RequireProgram(t, "sleep")
	tr := requireBPF(t)
	const table = 1024
	if got := tr.objs.Watched.MaxEntries(); got != table {
		t.Fatalf("watched table of %d, the test counts on %d", got, table)
	}
	// This process and 1,100 pids that no process has (above pid_max's
	// largest value, 2^22): only the lowest MaxWatched are watched.
	pids := []int{os.Getpid()}
	for i := range 1100 {
		pids = append(pids, 1<<23+i)
	}
	var s Snapshot
	if err := tr.Watch(pids); err != nil {
		t.Fatalf("Watch of %d pids: %v", len(pids), err)
	}
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	if want := len(pids) - MaxWatched; s.NotWatched != want || s.WatchedFull != uint64(want) {
		t.Errorf("%d pids watched: %d not watched, %d counted; want %d", len(pids), s.NotWatched, s.WatchedFull, want)
	}
	// Children of this process (forked while it is watched) fill the
	// table's other places: 8 more than those do not fit.
	over := table - MaxWatched + 8
	start := func(n int) []*exec.Cmd {
		var cmds []*exec.Cmd
		for range n {
			c := exec.Command("sleep", "60")
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, c)
		}
		return cmds
	}
	stop := func(cmds []*exec.Cmd) {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
	kids := start(over)
	t.Cleanup(func() { stop(kids) })
	before := s.WatchedFull
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	if got := s.WatchedFull - before; got != 8 {
		t.Errorf("%d children of a watched process beside %d watched pids in a table of %d: %d counted as left out, want 8", over, MaxWatched, table, got)
	}
	// Exited, they free their places: 8 more children all fit.
	stop(kids)
	kids = start(8)
	before = s.WatchedFull
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	if got := s.WatchedFull - before; got != 0 {
		t.Errorf("%d children counted as left out after %d exited: their places were not freed", got, over)
	}
	// A bounded set again: nothing left out.
	if err := tr.Watch(pids[:10]); err != nil {
		t.Fatal(err)
	}
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	if s.NotWatched != 0 {
		t.Errorf("10 pids watched: %d not watched", s.NotWatched)
	}
}
