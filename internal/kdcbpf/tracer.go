//go:build linux && amd64

package kdcbpf

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Tracer is the loaded and attached program. Its methods are not safe for
// concurrent use (the collector serialises its scrapes).
type Tracer struct {
	objs  kdcserviceMaps
	progs []*ebpf.Program
	links []link.Link
	stats []kdcserviceStats // per CPU, reused
	// notWatched is how many pids the last Watch left out, refused is
	// the sum of them over every Watch.
	notWatched int
	refused    uint64
	// SocketHooks is true where the socket layer's tracepoints time the
	// requests (Linux 6.3 and later), false where sys_enter/sys_exit do.
	SocketHooks bool
}

// The programs of each way to see receives and sends; the others are
// common.
var (
	socketPrograms  = []string{"sock_recv", "sock_send", "dev_queue"}
	syscallPrograms = []string{"sys_enter", "sys_exit"}
)

// Load loads the program, checks it with the kernel's verifier and
// attaches it. Its error is an *Error saying why it failed.
func Load() (*Tracer, error) {
	// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, &Error{Reason: ReasonOf(err, ReasonLoad), Err: fmt.Errorf("memlock limit: %w", err)}
	}
	spec, err := loadKdcservice()
	if err != nil {
		return nil, &Error{Reason: ReasonLoad, Err: err}
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, &Error{Reason: ReasonUnsupportedKernel, Err: fmt.Errorf("kernel BTF: %w", err)}
	}
	t := &Tracer{}
	_, err = kernel.AnyTypeByName("btf_trace_sock_recv_length")
	t.SocketHooks = err == nil && os.Getenv(HooksEnv) != "syscalls"
	drop := socketPrograms
	if t.SocketHooks {
		drop = syscallPrograms
	}
	for _, name := range drop {
		delete(spec.Programs, name)
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kernel}})
	if err != nil {
		return nil, &Error{Reason: ReasonOf(err, ReasonLoad), Err: err}
	}
	defer coll.Close() // what Assign did not take
	if err := coll.Assign(&t.objs); err != nil {
		return nil, &Error{Reason: ReasonLoad, Err: err}
	}
	for name, p := range coll.Programs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			t.Close()
			return nil, &Error{Reason: ReasonOf(err, ReasonAttach), Err: fmt.Errorf("attach %s: %w", name, err)}
		}
		t.links = append(t.links, l)
	}
	return t, nil
}

// Close detaches the program and frees its maps.
func (t *Tracer) Close() error {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
	return t.objs.Close()
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
