// Package kdcproc knows the krb5kdc processes of a host: it finds the
// supervisor of `krb5kdc -w N` and its workers (or a single-process KDC) in
// /proc, and it keeps the one mapping from a pid to a stable worker index
// that the process collector, the log's per-worker counter and `top` share.
//
// The index is what labels per-worker series instead of a pid, so that the
// series survive a restart: a worker keeps its index while it lives, and a
// new one takes the lowest free index. The largest index is therefore below
// the largest number of workers alive at once. The process that answers
// requests is a worker of -w N, or the KDC itself when it runs as one
// process (index 0); the supervisor of -w N answers none and has no index.
package kdcproc

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/procfs"
)

// Program is the process name (comm) of the KDC.
const Program = "krb5kdc"

// ID tells a process from a later one that reuses its pid.
type ID struct {
	PID   int
	Start uint64 // clock ticks after boot (/proc/PID/stat starttime)
}

// Proc is one live krb5kdc process.
type Proc struct {
	ID
	PPID int
	// Supervisor is the KDC's main process (no krb5kdc parent): the
	// supervisor of -w N, or a single-process KDC.
	Supervisor   bool
	UTime, STime uint64 // clock ticks
	RSS          int    // bytes
}

// Find lists the krb5kdc processes oldest first: those of the KDC whose
// pid file is pidFile (its main process and that one's children), or,
// without a pid file, every krb5kdc of the host. Zombies are left out, and
// so are processes rule rejects (nil: DefaultRule). A pid file given but
// absent (an fs.ErrNotExist error) or empty means this KDC is not running:
// other realms' KDCs on the host are never its own; one that rule does not
// trust is an error.
func Find(procRoot, pidFile string, rule *Rule) ([]Proc, error) {
	if rule == nil {
		rule = DefaultRule()
	}
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, err
	}
	all, err := fs.AllProcs()
	if err != nil {
		return nil, err
	}
	root := 0
	if pidFile != "" {
		if root, err = rule.ReadPidFile(pidFile); err != nil || root == 0 {
			return nil, err
		}
	}
	var kdc []procfs.ProcStat
	isKDC := map[int]bool{}
	for _, p := range all {
		st, err := p.Stat()
		if err != nil || st.Comm != Program || st.State == "Z" {
			continue
		}
		if rule.Check(procRoot+"/"+strconv.Itoa(st.PID), Program).Reason != "" {
			continue
		}
		kdc = append(kdc, st)
		isKDC[st.PID] = true
	}
	var out []Proc
	for _, st := range kdc {
		if pidFile != "" && st.PID != root && st.PPID != root {
			continue // another KDC on this host
		}
		out = append(out, Proc{ID: ID{st.PID, st.Starttime}, PPID: st.PPID, Supervisor: !isKDC[st.PPID],
			UTime: uint64(st.UTime), STime: uint64(st.STime), RSS: st.ResidentMemory()})
	}
	slices.SortFunc(out, func(a, b Proc) int {
		if a.Start != b.Start {
			if a.Start < b.Start {
				return -1
			}
			return 1
		}
		return a.PID - b.PID
	})
	return out, nil
}

// Of reads the processes pids, one KDC's as its caller knows them (the
// main process and its children), in the order given; a pid that is gone
// is left out. A process is a Supervisor when its parent is not among
// pids, so Answering(Of(...)) are the processes that serve without a walk
// of all of /proc.
func Of(fs procfs.FS, pids []int) []Proc {
	out := make([]Proc, 0, len(pids))
	for _, pid := range pids {
		p, err := fs.Proc(pid)
		if err != nil {
			continue
		}
		st, err := p.Stat()
		if err != nil {
			continue
		}
		out = append(out, Proc{ID: ID{st.PID, st.Starttime}, PPID: st.PPID, Supervisor: !slices.Contains(pids, st.PPID),
			UTime: uint64(st.UTime), STime: uint64(st.STime), RSS: st.ResidentMemory()})
	}
	return out
}

// Answering is which of procs answer requests: the workers, or the main
// process of a single-process KDC.
func Answering(procs []Proc) []ID {
	var workers, mains []ID
	for _, p := range procs {
		if p.Supervisor {
			mains = append(mains, p.ID)
		} else {
			workers = append(workers, p.ID)
		}
	}
	if len(workers) > 0 {
		return workers
	}
	return mains
}

// recentGone is how many freed indexes are remembered: a line read after
// its worker exited (the log is read in batches, or from a saved position
// after a restart) still belongs to that worker's index.
const recentGone = 64

// maxMissed bounds the pids remembered as not being a krb5kdc.
const maxMissed = 1024

// Workers keeps the stable worker indexes. It is safe for concurrent use.
type Workers struct {
	fs   procfs.FS
	root string
	rule *Rule

	mu       sync.Mutex
	occupant []ID // index -> process; the zero ID marks a free index
	gone     [recentGone]struct {
		pid, index int
	}
	goneNext int
	missed   map[int]bool // pids seen not to be a krb5kdc process
	gen      atomic.Uint64
}

// NewWorkers reads /proc under procRoot when a pid is not yet known; a
// pid takes an index only if rule accepts its process (nil: DefaultRule).
func NewWorkers(procRoot string, rule *Rule) (*Workers, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, err
	}
	if rule == nil {
		rule = DefaultRule()
	}
	w := &Workers{fs: fs, root: procRoot, rule: rule, missed: map[int]bool{}}
	for i := range w.gone {
		w.gone[i].pid = -1
	}
	return w, nil
}

// Generation changes whenever an index changes hands: a cache of Index
// results is valid while it stays the same.
func (w *Workers) Generation() uint64 { return w.gen.Load() }

// Assign gives each of the answering processes (Answering's, in the order
// given) its index, and frees the indexes of processes not among them.
func (w *Workers) Assign(answering []ID) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	idx := make([]int, len(answering))
	placed := make([]bool, len(answering))
	for s, id := range w.occupant {
		if id == (ID{}) {
			continue
		}
		found := false
		for i, p := range answering {
			if !placed[i] && p == id {
				idx[i], placed[i], found = s, true, true
				break
			}
		}
		if !found {
			w.freeLocked(s)
		}
	}
	for i, p := range answering {
		if !placed[i] {
			idx[i] = w.takeLocked(p)
		}
	}
	w.trimLocked()
	return idx
}

// Index is the index of the process pid, for a log line it wrote. A pid
// not holding an index is looked up once in /proc: a live krb5kdc that
// answers requests (a worker, or a KDC without workers) takes the lowest
// free index, after the indexes of processes that have exited are freed.
// A pid that recently held an index keeps it. ok is false for a pid that
// is no krb5kdc process (a forged line, or a worker gone long ago): the
// caller counts those apart.
func (w *Workers) Index(pid int) (index int, ok bool) {
	if pid <= 0 {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for s, id := range w.occupant {
		if id.PID == pid {
			return s, true
		}
	}
	for i := range w.gone {
		// Newest first, so a pid reused by a later worker gets the
		// latest index it held.
		g := w.gone[(w.goneNext-1-i+2*recentGone)%recentGone]
		if g.pid == pid {
			return g.index, true
		}
	}
	if w.missed[pid] {
		return 0, false
	}
	id, answers := w.answering(pid)
	if !answers {
		if len(w.missed) >= maxMissed {
			clear(w.missed)
		}
		w.missed[pid] = true
		return 0, false
	}
	for s, occ := range w.occupant {
		if occ != (ID{}) && !w.alive(occ) {
			w.freeLocked(s)
		}
	}
	s := w.takeLocked(id)
	w.trimLocked()
	return s, true
}

// answering reports whether pid is a live krb5kdc that answers requests:
// a worker (its parent is krb5kdc) or a main process without workers.
func (w *Workers) answering(pid int) (ID, bool) {
	p, err := w.fs.Proc(pid)
	if err != nil {
		return ID{}, false
	}
	st, err := p.Stat()
	if err != nil || st.Comm != Program || st.State == "Z" {
		return ID{}, false
	}
	if w.rule.Check(w.root+"/"+strconv.Itoa(pid), Program).Reason != "" {
		return ID{}, false // a namesake
	}
	id := ID{pid, st.Starttime}
	if pp, err := w.fs.Proc(st.PPID); err == nil {
		if pst, err := pp.Stat(); err == nil && pst.Comm == Program {
			return id, true // a worker
		}
	}
	// A main process: it answers unless it supervises workers.
	all, err := w.fs.AllProcs()
	if err != nil {
		return id, true
	}
	for _, c := range all {
		if st, err := c.Stat(); err == nil && st.PPID == pid && st.Comm == Program {
			return ID{}, false // the supervisor of -w N
		}
	}
	return id, true
}

func (w *Workers) alive(id ID) bool {
	p, err := w.fs.Proc(id.PID)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.Starttime == id.Start && st.State != "Z"
}

func (w *Workers) freeLocked(s int) {
	w.gone[w.goneNext] = struct{ pid, index int }{w.occupant[s].PID, s}
	w.goneNext = (w.goneNext + 1) % recentGone
	w.occupant[s] = ID{}
	w.gen.Add(1)
}

func (w *Workers) takeLocked(id ID) int {
	s := 0
	for s < len(w.occupant) && w.occupant[s] != (ID{}) {
		s++
	}
	if s == len(w.occupant) {
		w.occupant = append(w.occupant, ID{})
	}
	w.occupant[s] = id
	clear(w.missed) // a pid missed before may be this process now
	w.gen.Add(1)
	return s
}

func (w *Workers) trimLocked() {
	n := len(w.occupant)
	for n > 0 && w.occupant[n-1] == (ID{}) {
		n--
	}
	w.occupant = w.occupant[:n]
}

// One keeps one KDC of procs (Find's, oldest first): the oldest main
// process and its children, never one realm's supervisor with another's
// workers; others is how many more KDCs procs held (other realms' KDCs on
// the host, told apart by a pid file).
func One(procs []Proc) (kdc []Proc, others int) {
	main := -1
	for _, p := range procs {
		if !p.Supervisor {
			continue
		}
		if main < 0 {
			main = p.PID
		} else {
			others++
		}
	}
	for _, p := range procs {
		if p.PID == main || p.PPID == main && main >= 0 {
			kdc = append(kdc, p)
		}
	}
	return kdc, others
}

// PIDs returns the processes holding an index now: the ones answering
// requests.
func (w *Workers) PIDs() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var pids []int
	for _, id := range w.occupant {
		if id != (ID{}) {
			pids = append(pids, id.PID)
		}
	}
	return pids
}
