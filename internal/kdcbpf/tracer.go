//go:build linux && amd64

package kdcbpf

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Tracer is the loaded and attached program. Its methods are not safe for
// concurrent use (the collector serialises its scrapes).
type Tracer struct {
	objs     kdcserviceMaps
	vars     kdcserviceVariables
	attached []attachment
	progs    []*ebpf.Program
	names    []string // of progs, as the object names them
	links    []link.Link
	stats    []kdcserviceStats // per CPU, reused
	// notWatched is how many pids the last Watch left out, refused is
	// the sum of them over every Watch.
	notWatched int
	refused    uint64
	// Hooks is how the program sees the KDC's receives and sends: one of
	// HookModes, the first that this kernel loads and attaches.
	Hooks string
	// Skipped says, for each better mode that failed here, why.
	Skipped []string
}

// attachment is where one loaded program is attached.
type attachment struct {
	name   string // for errors
	prog   *ebpf.Program
	target string // kprobe function or system call tracepoint; "" for tp_btf and trampolines
	ret    bool   // a return hook (returnHooks)
}

// returnHooks are the programs that see a receive return. They are
// attached before and detached after the rest, so that every receive
// whose entry the program sees has its return seen too (or counted as
// missed: the program's ERR_MISSED_RETURN).
var returnHooks = []string{"fexit_recv", "kretprobe_recv", "tp_exit", "sys_exit"}

// hooks is one way to see receives and sends: its programs, and for
// each the functions or tracepoints it is attached to (none: its own
// section's).
type hooks struct {
	progs map[string][]string
	// kernel says whether the kernel can have these hooks at all, before
	// anything is loaded; nil: try.
	kernel func(*btf.Spec) error
}

// The system calls the KDC receives and sends with (x86-64), as the
// program's syscall_enter and syscall_exit test them.
var (
	recvCalls = []string{"read", "recvfrom", "recvmsg"}
	sendCalls = []string{"write", "writev", "sendto", "sendmsg"}
)

func syscallTracepoints(dir string, calls ...[]string) []string {
	var out []string
	for _, c := range calls {
		for _, n := range c {
			out = append(out, "sys_"+dir+"_"+n)
		}
	}
	return out
}

var hookModes = map[string]hooks{
	HooksSocket: {progs: map[string][]string{"sock_recv": nil, "sock_send": nil, "dev_queue": nil},
		kernel: func(k *btf.Spec) error {
			if _, err := k.AnyTypeByName("btf_trace_sock_recv_length"); err != nil {
				return fmt.Errorf("no sock_recv_length tracepoint (Linux 6.3 and later): %w", err)
			}
			return nil
		}},
	HooksFentry: {progs: map[string][]string{
		"fentry_recv": {"inet_recvmsg", "inet6_recvmsg"},
		"fexit_recv":  {"inet_recvmsg", "inet6_recvmsg"},
		"fentry_send": {"inet_sendmsg", "inet6_sendmsg"},
	}},
	HooksKprobe: {progs: map[string][]string{
		"kprobe_recv":    {"inet_recvmsg", "inet6_recvmsg"},
		"kretprobe_recv": {"inet_recvmsg", "inet6_recvmsg"},
		"kprobe_send":    {"inet_sendmsg", "inet6_sendmsg"},
	}},
	HooksTracepoint: {progs: map[string][]string{
		"tp_enter": syscallTracepoints("enter", recvCalls, sendCalls),
		"tp_exit":  syscallTracepoints("exit", recvCalls),
	}},
	HooksSyscalls: {progs: map[string][]string{"sys_enter": nil, "sys_exit": nil}},
}

// KernelMayLack says whether a kernel this program supports may lack the
// hooks of mode, so that a test can tell a missing hook from a broken
// program: the socket tracepoints before Linux 6.3 (the kernel's BTF
// says), trampolines and kprobes where its configuration leaves them out
// (this project's CI kernel has neither).
func KernelMayLack(mode string) bool {
	switch mode {
	case HooksSocket:
		k, err := btf.LoadKernelSpec()
		return err != nil || hookModes[mode].kernel(k) != nil
	case HooksFentry, HooksKprobe:
		return true
	}
	return false
}

// Load loads the program, checks it with the kernel's verifier and
// attaches it, with the first of AutoHookModes this kernel supports (or
// the one HooksEnv names). Its error is an *Error saying why it failed.
func Load() (*Tracer, error) {
	// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, &Error{Reason: ReasonOf(err, ReasonLoad), Err: fmt.Errorf("memlock limit: %w", err)}
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, &Error{Reason: ReasonUnsupportedKernel, Err: fmt.Errorf("kernel BTF: %w", err)}
	}
	if m := os.Getenv(HooksEnv); m != "" {
		if _, ok := hookModes[m]; !ok {
			return nil, &Error{Reason: ReasonLoad, Err: fmt.Errorf("%s=%q: want one of %v", HooksEnv, m, HookModes)}
		}
		return loadWith(kernel, m)
	}
	return loadAuto(kernel, AutoHookModes)
}

// loadAuto takes the first of modes that loads and attaches. When none
// does, the error is the last one's, with why each other failed, and
// names what would trace the KDC on this kernel at a cost to the whole
// host.
func loadAuto(kernel *btf.Spec, modes []string) (*Tracer, error) {
	var skipped []string
	for _, m := range modes {
		t, err := loadWith(kernel, m)
		if err == nil {
			t.Skipped = skipped
			return t, nil
		}
		skipped = append(skipped, fmt.Sprintf("%s: %v", m, err))
	}
	return nil, &Error{Reason: ReasonUnsupportedKernel, Err: fmt.Errorf(
		"no hook that runs only for the KDC's receives and sends (%s); %s=%s (or %s, as root) traces it with system call hooks, which slow every system call of every process on the host (docs/bench.md)",
		strings.Join(skipped, "; "), HooksEnv, HooksSyscalls, HooksTracepoint)}
}

// loadWith loads the program with the hooks of mode only.
func loadWith(kernel *btf.Spec, mode string) (*Tracer, error) {
	h := hookModes[mode]
	if h.kernel != nil {
		if err := h.kernel(kernel); err != nil {
			return nil, &Error{Reason: ReasonUnsupportedKernel, Err: err}
		}
	}
	spec, err := loadKdcservice()
	if err != nil {
		return nil, &Error{Reason: ReasonLoad, Err: err}
	}
	all := maps.Clone(spec.Programs)
	// The programs of the other modes are dropped; one of this mode's
	// attached to several functions is loaded once for each (a trampoline
	// program names its function at load).
	for _, other := range hookModes {
		for name := range other.progs {
			delete(spec.Programs, name)
		}
	}
	for name, to := range h.progs {
		ps := all[name]
		if ps == nil {
			return nil, &Error{Reason: ReasonLoad, Err: fmt.Errorf("no program %s", name)}
		}
		if ps.Type != ebpf.Tracing || len(to) == 0 {
			spec.Programs[name] = ps
			continue
		}
		for _, fn := range to {
			p := ps.Copy()
			p.AttachTo = fn
			spec.Programs[name+"@"+fn] = p
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kernel}})
	if err != nil {
		return nil, &Error{Reason: ReasonOf(err, ReasonLoad), Err: err}
	}
	defer coll.Close() // what Assign did not take
	t := &Tracer{Hooks: mode}
	if err := coll.Assign(&t.objs); err != nil {
		return nil, &Error{Reason: ReasonLoad, Err: err}
	}
	if err := coll.Assign(&t.vars); err != nil {
		return nil, &Error{Reason: ReasonLoad, Err: err}
	}
	for name := range coll.Programs {
		p := coll.DetachProgram(name)
		t.progs = append(t.progs, p)
		t.names = append(t.names, name)
		base, _, _ := strings.Cut(name, "@")
		ret := slices.Contains(returnHooks, base)
		switch p.Type() {
		case ebpf.Kprobe, ebpf.TracePoint:
			for _, to := range h.progs[base] {
				t.attached = append(t.attached, attachment{name: name, prog: p, target: to, ret: ret})
			}
		default:
			t.attached = append(t.attached, attachment{name: name, prog: p, ret: ret})
		}
	}
	slices.SortStableFunc(t.attached, func(a, b attachment) int {
		switch {
		case a.ret == b.ret:
			return 0
		case a.ret:
			return -1
		}
		return 1
	})
	if err := t.Attach(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Attach attaches the loaded programs, as Load does: with Detach, the
// cost test compares the host with and without them, the maps kept.
func (t *Tracer) Attach() error {
	for _, a := range t.attached {
		var l link.Link
		var err error
		switch a.prog.Type() {
		case ebpf.Tracing:
			l, err = link.AttachTracing(link.TracingOptions{Program: a.prog})
		case ebpf.Kprobe:
			l, err = attachKprobe(a.target, a.prog, a.ret)
		case ebpf.TracePoint:
			l, err = link.Tracepoint("syscalls", a.target, a.prog, nil)
		default:
			err = fmt.Errorf("program type %v", a.prog.Type())
		}
		if err != nil {
			t.Detach()
			what := a.name
			if a.target != "" {
				what += " to " + a.target
			}
			return &Error{Reason: ReasonOf(err, ReasonAttach), Err: fmt.Errorf("attach %s: %w", what, err)}
		}
		t.links = append(t.links, l)
	}
	return nil
}

// Detach detaches the programs, the return hooks last; they stay loaded,
// with their maps.
func (t *Tracer) Detach() {
	for _, l := range slices.Backward(t.links) {
		l.Close()
	}
	t.links = nil
}

// attachKprobe attaches p to fn's entry, or its return if ret. A return
// probe holds an instance for each call in progress, also of the host's
// other processes blocked in a receive: the kernel's default (twice the
// CPUs) would miss the KDC's returns behind them, so more are asked for
// where the kernel takes the number (through tracefs).
func attachKprobe(fn string, p *ebpf.Program, ret bool) (link.Link, error) {
	if !ret {
		return link.Kprobe(fn, p, nil)
	}
	l, err := link.Kretprobe(fn, p, &link.KprobeOptions{RetprobeMaxActive: 4096})
	if err != nil {
		l, err = link.Kretprobe(fn, p, nil)
	}
	return l, err
}

// Close detaches the program and frees its maps.
func (t *Tracer) Close() error {
	t.Detach()
	for _, p := range t.progs {
		p.Close()
	}
	t.progs = nil
	return t.objs.Close()
}

// EnableRunTimeStats makes the kernel account the time every BPF program
// runs (kernel.bpf_stats_enabled, for as long as the returned Closer is
// open): what RunTimes reads. It costs two clock reads per program run, so
// only the cost measurement turns it on.
func EnableRunTimeStats() (io.Closer, error) {
	return ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
}

// RunTime is the kernel's account of one of the tracer's programs while
// run-time statistics were enabled: the time it ran and how many times,
// wherever it ran (the KDC's context or another task's).
type RunTime struct {
	Program string
	Runtime time.Duration
	Runs    uint64
}

// RunTimes reads the RunTime of each of the tracer's programs.
func (t *Tracer) RunTimes() ([]RunTime, error) {
	out := make([]RunTime, len(t.progs))
	for i, p := range t.progs {
		s, err := p.Stats()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.names[i], err)
		}
		out[i] = RunTime{Program: t.names[i], Runtime: s.Runtime, Runs: s.RunCount}
	}
	return out, nil
}

// Watch makes pids the watched processes: their requests from now on are
// timed, and the state of other processes' threads is dropped. The
// program itself adds the processes a watched one forks (a replaced
// worker), until the next Watch. At most MaxWatched of pids are watched
// (the lowest: a supervisor is older than its workers) and a full table
// refuses more: neither is an error, the pids left out are counted in
// the next Read (Snapshot.NotWatched, WatchedFull).
func (t *Tracer) Watch(pids []int) error {
	want := make(map[uint32]bool, min(len(pids), MaxWatched))
	for _, p := range slices.Sorted(slices.Values(pids)) {
		if len(want) == MaxWatched {
			break
		}
		want[uint32(p)] = true
	}
	t.notWatched = len(pids) - len(want)
	var key, one uint32 = 0, 1
	var stale []uint32
	it := t.objs.Watched.Iterate()
	var val uint32
	for it.Next(&key, &val) {
		if !want[key] {
			stale = append(stale, key)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range stale {
		if err := t.objs.Watched.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	for p := range want {
		if err := t.objs.Watched.Update(p, one, ebpf.UpdateAny); err != nil {
			// Full (E2BIG): children the watched processes forked since
			// the last scrape took the room.
			if !errors.Is(err, syscall.E2BIG) {
				return err
			}
			t.notWatched++
		}
	}
	t.refused += uint64(t.notWatched)
	// The program's first test of a task: one bit a watched pid (see
	// watch_bits in kdcservice.bpf.c), written whole after the map.
	var bits [65536 / 64]uint64
	for p := range want {
		bits[p/64%uint32(len(bits))] |= 1 << (p % 64)
	}
	if err := t.vars.WatchBits.Set(bits); err != nil {
		return err
	}
	// Threads of processes no longer watched.
	var tid uint32
	var th kdcserviceThread
	var gone []uint32
	it = t.objs.Threads.Iterate()
	for it.Next(&tid, &th) {
		if !want[th.Tgid] {
			gone = append(gone, tid)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range gone {
		t.objs.Threads.Delete(k)
	}
	return nil
}

// Read adds up the counts of every CPU into s. Per-process counts of
// processes that are not watched are dropped after being read once.
func (t *Tracer) Read(s *Snapshot) error {
	*s = Snapshot{Workers: s.Workers[:0], NotWatched: t.notWatched, WatchedFull: t.refused}
	if err := t.objs.Stats.Lookup(uint32(0), &t.stats); err != nil {
		return err
	}
	for c := range t.stats {
		st := &t.stats[c]
		for i := range NumRequests {
			for j := range NumTransports {
				k := i*NumTransports + j
				h := &s.Service[i][j]
				for b := range NumBuckets {
					h.Buckets[b] += st.Service[k*NumBuckets+b]
				}
				tot := &st.Totals[k]
				h.Count += tot.Count
				h.Sum += tot.Sum
				h.CPU += tot.Cpu
				h.Runqueue += tot.Runq
				h.Blocked += tot.Blocked
				h.Stolen += tot.Stolen
				w, sw := &s.Warm[i][j], &st.Warm[k]
				w.Count += sw.Count
				w.CPU += sw.Cpu
				w.Blocked += sw.Blocked
				w.Gap += sw.Gap
			}
		}
		for j := range NumTransports {
			h := &s.Queue[j]
			for b := range NumBuckets {
				h.Buckets[b] += st.Queue[j*NumBuckets+b]
			}
			h.Count += st.Qtotals[j].Count
			h.Sum += st.Qtotals[j].Sum
		}
		s.ThreadsFull += st.Errors[0]
		s.WorkersFull += st.Errors[1]
		s.WatchedFull += st.Errors[2]
		s.MissedReturns += st.Errors[3]
	}
	var pid uint32
	var w kdcserviceWorker
	var unwatched []uint32
	it := t.objs.Workers.Iterate()
	for it.Next(&pid, &w) {
		s.Workers = append(s.Workers, Worker{PID: int(pid), Requests: w.Count, Service: w.Sum, CPU: w.Cpu, Outside: w.Outside, Runqueue: w.Runq, Stolen: w.Stolen})
		var v uint32
		if t.objs.Watched.Lookup(pid, &v) != nil {
			unwatched = append(unwatched, pid)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range unwatched {
		t.objs.Workers.Delete(k)
	}
	return nil
}

// ReasonOf classifies a load or attach error; def when nothing more
// specific is known.
func ReasonOf(err error, def string) string {
	var verr *ebpf.VerifierError
	switch {
	case errors.As(err, &verr):
		// The verifier refused the program: the kernel says EACCES, but
		// this is no missing privilege (with one the load would not have
		// reached the verifier), it is this program on this kernel.
		return ReasonLoad
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return ReasonPermission
	case errors.Is(err, ebpf.ErrNotSupported), errors.Is(err, btf.ErrNotSupported), errors.Is(err, btf.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return ReasonUnsupportedKernel
	}
	return def
}
