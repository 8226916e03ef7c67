package kdcbpf

import (
	"math"
	"slices"
)

// Request types and transports: the indexes of Snapshot's arrays.
const (
	RequestAS = iota
	RequestTGS
	RequestOther
	NumRequests
)

const (
	TransportUDP = iota
	TransportTCP
	NumTransports
)

// RequestNames and TransportNames are the label values, by index.
var (
	RequestNames   = [NumRequests]string{"as", "tgs", "other"}
	TransportNames = [NumTransports]string{"udp", "tcp"}
)

// The program's histogram: bucket b counts the observations in
// (2^((b+MinIndex-1)/8), 2^((b+MinIndex)/8)] seconds, Prometheus's
// native-histogram buckets of schema 3; bucket 0 holds every observation
// at or below ZeroThreshold, the last everything above its lower bound.
const (
	NumBuckets = 192
	MinIndex   = -160
	Schema     = 3
)

// ZeroThreshold is the upper bound of bucket 0 in seconds: 2^-20.
var ZeroThreshold = math.Ldexp(1, MinIndex/8)

// UpperBound is bucket b's upper bound in seconds (+Inf for the last).
func UpperBound(b int) float64 {
	if b >= NumBuckets-1 {
		return math.Inf(1)
	}
	return math.Pow(2, float64(b+MinIndex)/8)
}

// Hist is one histogram with its split; times in nanoseconds.
type Hist struct {
	Buckets                [NumBuckets]uint64
	Count, Sum             uint64
	CPU, Runqueue, Blocked uint64 // service only: the split of Sum, with Stolen
	// Stolen is the time on CPU by the clock that the kernel charged to no
	// task: a hypervisor's steal (and interrupts, where the kernel accounts
	// IRQ time). CPU is the kernel's run time of the thread.
	Stolen uint64
}

// Warm is the share of a Hist's requests that were warm: begun without
// the worker blocking since its previous reply (the request was waiting
// already, as every request is at saturation). Gap is the time from those
// replies to these requests' starts (the worker's event loop, logging,
// the receive: its cycle outside service); times in nanoseconds.
type Warm struct {
	Count, CPU, Blocked, Gap uint64
}

// Worker is one process's totals since it was first watched.
type Worker struct {
	PID      int
	Requests uint64
	Service  uint64 // ns
	CPU      uint64 // ns on CPU while in service
	Outside  uint64 // ns on CPU outside service: CPU + Outside is its run time
	// Runqueue is the ns it was runnable waiting for a CPU, in service and
	// outside. Not a metric (krb5_kdc_worker_cpu_wait_seconds_total is the
	// kernel's own): with CPU and Outside it is the kernel's run time plus
	// run delay, whichever of the two the kernel charged a wakeup's wait to.
	Runqueue uint64
	Stolen   uint64 // ns on CPU not charged to it (Hist.Stolen), in service and outside
}

// Snapshot is everything counted since the program was loaded.
type Snapshot struct {
	Service [NumRequests][NumTransports]Hist
	Warm    [NumRequests][NumTransports]Warm
	Queue   [NumTransports]Hist
	Workers []Worker
	// Requests not timed: the thread table or the process table was full.
	ThreadsFull, WorkersFull uint64
	// WatchedFull counts the processes left out of the watched set: pids
	// beyond MaxWatched or refused by a full table at a Watch, and
	// children of watched processes the program could not add.
	// NotWatched is how many of the last Watch's pids are not watched.
	WatchedFull uint64
	NotWatched  int
	// MissedReturns counts the receives of watched threads whose return
	// the program never saw (the thread received or sent again first): a
	// request each may have gone untimed. Kprobe mode misses returns
	// when more receives are in progress on the host than the return
	// probe has instances for.
	MissedReturns uint64
}

// MaxWatched bounds the processes user space watches: half of the
// program's watched table (1,024), the rest for the workers they fork
// between two scrapes. A krb5kdc is one process, or a supervisor and its
// -w workers.
const MaxWatched = 512

// MapFull is every request or process the program's tables had no room
// for.
func (s *Snapshot) MapFull() uint64 { return s.ThreadsFull + s.WorkersFull + s.WatchedFull }

// HooksEnv set to one of HookModes makes Load use that mode only, even
// where a better one exists: the tests run each mode the kernel has, and
// it is how an operator accepts the system call hooks (TaxesHost), which
// Load never chooses by itself.
const HooksEnv = "KRB5_EXPORTER_KDCSERVICE_HOOKS"

// The ways the program sees the KDC's receives and sends, best first.
// Load takes the first of AutoHookModes that the kernel loads and
// attaches.
const (
	// HooksSocket: the socket layer's tracepoints sock_recv_length and
	// sock_send_length (Linux 6.3 and later).
	HooksSocket = "socket"
	// HooksFentry: BTF trampolines on inet_recvmsg, inet6_recvmsg,
	// inet_sendmsg and inet6_sendmsg.
	HooksFentry = "fentry"
	// HooksKprobe: kprobes on the same functions.
	HooksKprobe = "kprobe"
	// HooksTracepoint: the tracepoints of the receive and send system
	// calls (syscalls/sys_enter_recvmsg, ...).
	HooksTracepoint = "tracepoint"
	// HooksSyscalls: sys_enter and sys_exit, which run for every system
	// call of every process: the last resort.
	HooksSyscalls = "syscalls"
)

// TaxesHost says whether mode's hooks put every system call of every
// process on the host on the kernel's slow path (docs/bench.md: +40 to
// +160 %), as the system call hooks do: the modes Load takes only when
// HooksEnv names them.
func TaxesHost(mode string) bool { return !slices.Contains(AutoHookModes, mode) }

// HookModes lists them, best first.
var HookModes = []string{HooksSocket, HooksFentry, HooksKprobe, HooksTracepoint, HooksSyscalls}

// AutoHookModes are the modes Load tries by itself: those whose hooks run
// only where the KDC's own receives and sends go. A kernel that has none
// of them (no socket tracepoints, trampolines or kprobes) is not traced
// unless HooksEnv accepts a system call mode and its tax on the host.
var AutoHookModes = []string{HooksSocket, HooksFentry, HooksKprobe}

// Error is why the program could not be loaded or attached.
type Error struct {
	Reason string // one of the Reason constants
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// The reasons of an Error, bounded: the label values of the collector's
// error counter.
const (
	ReasonPermission        = "permission"
	ReasonUnsupportedKernel = "unsupported_kernel"
	ReasonLoad              = "load"
	ReasonAttach            = "attach"
	ReasonMapFull           = "map_full"
	// ReasonMissedReturn counts Snapshot.MissedReturns.
	ReasonMissedReturn = "missed_return"
)

// Reasons lists them all.
var Reasons = []string{ReasonPermission, ReasonUnsupportedKernel, ReasonLoad, ReasonAttach, ReasonMapFull, ReasonMissedReturn}
