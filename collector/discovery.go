package collector

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
)

// The programs watched, by their /proc/PID/comm name.
const (
	progKDC     = "krb5kdc"
	progKadmind = "kadmind"
	progKpropd  = "kpropd"
)

var programNames = [...]string{progKDC, progKadmind, progKpropd}

// userHZ is USER_HZ, the unit of utime, stime and starttime in
// /proc/PID/stat: 100 on every Linux architecture (procfs assumes it too).
const userHZ = 100

// procID tells a process from a later one that reuses its pid.
type procID struct {
	pid   int
	start uint64 // clock ticks after boot
}

type kdcProc struct {
	pid   int
	dir   string     // /proc/PID
	paths *procPaths // its files' paths, kept across scrapes; nil: built per call
	stat  procStat
	// memo holds what was read of the process (nil: nothing is kept);
	// idle: it was not scheduled since, so memo's values still hold.
	memo *procMemo
	idle bool
	// runDelay is schedstat's run_delay in nanoseconds (haveRunDelay:
	// schedstat was read).
	runDelay     uint64
	haveRunDelay bool
}

func (p *kdcProc) id() procID { return procID{p.pid, p.stat.Starttime} }

// file is the path of one of the process's /proc files.
func (p *kdcProc) file(name string) string {
	if p.paths != nil {
		return p.paths.file(name)
	}
	return p.dir + "/" + name
}

// procPaths are the paths of one pid's /proc files, built once and kept
// while the pid is looked at: each scrape asks for the same few (stat,
// schedstat, fd, status, io, children, limits), and building them was a
// third of discovery's allocations.
type procPaths struct {
	dir      string
	children string // task/PID/children, the main thread's
	byName   map[string]string
	gen      uint64
}

func (pp *procPaths) file(name string) string {
	if f, ok := pp.byName[name]; ok {
		return f
	}
	f := pp.dir + "/" + name
	if len(pp.byName) < maxProcPaths { // task/TID/children of a threaded process: not kept
		pp.byName[name] = f
	}
	return f
}

// maxProcPaths bounds the paths kept per pid.
const maxProcPaths = 32

// pathsFor returns pid's paths, kept until a scan does not look at pid
// (sweepMemo).
func (s *procScanner) pathsFor(pid int) *procPaths {
	if pp := s.paths[pid]; pp != nil {
		pp.gen = s.gen
		return pp
	}
	if s.paths == nil {
		s.paths = map[int]*procPaths{}
	}
	id := strconv.Itoa(pid)
	dir := s.procPath + "/" + id
	pp := &procPaths{dir: dir, children: dir + "/task/" + id + "/children", byName: map[string]string{}, gen: s.gen}
	s.paths[pid] = pp
	return pp
}

// programProcs are the live processes of one program.
type programProcs struct {
	name string
	// main is the oldest process whose parent is not the same program: the
	// pid-file process when one is configured, the supervisor of -w N.
	main *kdcProc
	// procs holds main first, then the others by pid.
	procs []*kdcProc
	// workers are the processes whose parent is a process of the program
	// (krb5kdc -w N), oldest first.
	workers []*kdcProc
}

func (p *programProcs) running() bool { return p.main != nil }

// kdcArgs are the parts of krb5kdc's command line that matter here.
type kdcArgs struct {
	workers int      // -w N; 0 is the single-process KDC
	realms  []string // -r REALM, repeatable
}

// snapshot is one scrape's view of the processes, shared by collectors.
type snapshot struct {
	programs [len(programNames)]programProcs
	kdcArgs  kdcArgs
	bootTime float64
}

func (s *snapshot) program(name string) *programProcs {
	for i := range s.programs {
		if s.programs[i].name == name {
			return &s.programs[i]
		}
	}
	return nil
}

// netProc is a KDC process in the KDC's network namespace that holds the
// listening sockets: a worker (the -w supervisor closes its sockets after
// forking), or the single process.
func (s *snapshot) netProc() *kdcProc {
	kdc := s.program(progKDC)
	if len(kdc.workers) > 0 {
		return kdc.workers[0]
	}
	return kdc.main
}

// procScanner finds the watched programs once per scrape: the aggregator
// calls reset before running the collectors, which call get.
type procScanner struct {
	fs       procfs.FS
	procPath string
	files    *fileCache
	dirBuf   []byte // getdents buffer
	onProcfs bool   // procPath is a live procfs, not a copied tree
	warn     *onceLogger
	access   *accessTracker
	pids     *pidLister
	pidFiles map[string]string // program -> pid file; absent: find by name
	ident    *identity         // a process named like a daemon is that daemon

	bootTime float64 // cached: it does not change
	argsFor  procID  // whose command line argsMemo is
	argsMemo kdcArgs

	memo        map[int]*procMemo // by pid; see procmemo.go
	paths       map[int]*procPaths
	gen         uint64 // scan number, for sweepMemo
	noSchedstat bool

	done bool
	cur  *snapshot
	err  error
}

func (s *procScanner) reset() { s.done, s.cur, s.err = false, nil, nil }

func (s *procScanner) get() (*snapshot, error) {
	if !s.done {
		s.cur, s.err = s.scan()
		s.done = true
	}
	return s.cur, s.err
}

func (s *procScanner) scan() (*snapshot, error) {
	defer s.sweepMemo()
	if s.bootTime == 0 {
		st, err := s.fs.Stat()
		if err != nil {
			return nil, fmt.Errorf("reading boot time: %w", err)
		}
		s.bootTime = float64(st.BootTime)
	}
	roots := map[string]int{} // pid file contents; 0: none or unreadable
	for name, path := range s.pidFiles {
		pid, err := readPidFile(s.files, path, s.ident.rule)
		s.ident.pidFile(name, path, untrusted(err))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			// A missing file is a stopped daemon; anything else is a
			// configuration problem, shown as up 0 and said once here.
			s.warn.log("pidfile/"+path, "msg", "cannot use pid file; "+name+" counts as not running", "err", err)
		}
		roots[name] = pid
	}
	// A program with a pid file is its pid-file process and that
	// process's descendants: only those are opened, never another realm's
	// daemons of the same name (their files would be held until they
	// exit, and one scan costs a few syscalls per process). Only the
	// programs without a pid file are looked for among every process.
	var cands map[string][]*kdcProc
	if len(s.pidFiles) > 0 {
		cands = s.fromPidFiles(roots)
	}
	all := cands == nil // no pid file, or a kernel without children files
	if all || len(s.pidFiles) < len(programNames) {
		byName, err := s.allCandidates(all)
		if err != nil {
			return nil, err
		}
		if all {
			cands = byName
		}
		for name, procs := range byName {
			cands[name] = procs
		}
	}
	snap := &snapshot{bootTime: s.bootTime}
	for i, name := range programNames {
		_, byFile := s.pidFiles[name]
		snap.programs[i] = group(name, cands[name], byFile, roots[name])
	}
	if kdc := snap.program(progKDC); kdc.running() {
		if kdc.main.id() != s.argsFor {
			args, err := readCmdline(kdc.main.file("cmdline"))
			if err != nil && !gone(err) {
				return nil, fmt.Errorf("reading krb5kdc command line: %w", err)
			}
			s.argsFor, s.argsMemo = kdc.main.id(), parseKDCArgs(args)
		}
		snap.kdcArgs = s.argsMemo
	}
	return snap, nil
}

// allCandidates reads the small comm file of every process and stats
// only the watched ones: of every program when all, else of those
// without a pid file.
func (s *procScanner) allCandidates(all bool) (map[string][]*kdcProc, error) {
	pids, err := s.pids.list()
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	cands := map[string][]*kdcProc{}
	for _, pid := range pids {
		b, err := s.pids.comm(pid)
		if err != nil {
			continue // gone meanwhile
		}
		name := watchedName(b)
		if _, byFile := s.pidFiles[name]; name == "" || byFile && !all {
			continue // not ours, or found from its pid file
		}
		if kp := s.live(pid, name); kp != nil {
			cands[name] = append(cands[name], kp)
		}
	}
	s.pids.sweep()
	return cands, nil
}

// fromPidFiles collects the pid files' processes and their descendants
// through /proc/PID/task/TID/children. It returns nil when the kernel has
// no children files (CONFIG_PROC_CHILDREN), for a full scan instead.
func (s *procScanner) fromPidFiles(roots map[string]int) map[string][]*kdcProc {
	cands := map[string][]*kdcProc{}
	for _, name := range programNames {
		if roots[name] == 0 {
			continue // no pid file
		}
		root := s.live(roots[name], name)
		if root == nil {
			continue // stale pid file
		}
		queue := []*kdcProc{root}
		for len(queue) > 0 && len(cands[name]) < maxProcsPerProgram {
			kp := queue[0]
			queue = queue[1:]
			cands[name] = append(cands[name], kp)
			kids, err := s.children(kp)
			if errors.Is(err, fs.ErrNotExist) && kp == root {
				if _, serr := os.Stat(root.dir); serr == nil {
					return nil // the process exists, its children file does not
				}
			}
			for _, kid := range kids {
				if kp := s.live(kid, name); kp != nil {
					queue = append(queue, kp)
				}
			}
		}
	}
	return cands
}

// maxProcsPerProgram bounds the descendants followed from one pid file.
const maxProcsPerProgram = 4096

// children lists the children of all threads of p. A single-threaded
// process (every MIT daemon) has one task, its own: no need to list them.
func (s *procScanner) children(p *kdcProc) ([]int, error) {
	var paths []string
	if p.stat.NumThreads == 1 {
		if p.idle && p.memo.haveChildren {
			return p.memo.children, nil
		}
		if p.paths != nil {
			paths = []string{p.paths.children}
		} else {
			paths = []string{p.file("task/" + strconv.Itoa(p.pid) + "/children")}
		}
	} else {
		entries, err := os.ReadDir(p.file("task"))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			paths = append(paths, p.file("task/"+e.Name()+"/children"))
		}
	}
	var out []int
	for _, path := range paths {
		b, err := s.files.readAll(path)
		if err != nil {
			if len(paths) == 1 {
				return nil, err
			}
			continue // thread exited
		}
		for _, f := range bytes.Fields(b) {
			if n, err := atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	if p.memo != nil {
		p.memo.children, p.memo.haveChildren = out, true
	}
	return out, nil
}

// live returns the process when it runs as the named program: not a
// zombie (an unreaped dead process), not another program, and the MIT
// daemon, not a process that only took its name (identity).
func (s *procScanner) live(pid int, name string) *kdcProc {
	pp := s.pathsFor(pid)
	m, idle := s.memoFor(pid, pp)
	// stat is read even for an idle process: its resident memory can
	// shrink meanwhile (reclaim, swap-out), and statm, the cheaper file,
	// counts it differently (hundreds of KiB apart on Linux 6.18).
	b, err := s.files.readSingle(pp.file("stat"))
	if err != nil {
		return nil
	}
	st, err := parseStat(b)
	if err != nil {
		return nil
	}
	if m != nil {
		// Single-threaded then and now: schedstat is the main thread's.
		idle = idle && m.threads == 1 && st.NumThreads == 1
		m.threads = st.NumThreads
	}
	if st.State == "Z" || st.State == "X" || st.Comm != name {
		return nil
	}
	if !s.ident.accept(pp.dir, procID{pid, st.Starttime}, name, s.gen) {
		return nil // a namesake
	}
	pr := &kdcProc{pid: pid, dir: pp.dir, paths: pp, stat: st, memo: m, idle: idle}
	if m != nil && m.n > 0 {
		// The schedstat memoFor read (not again: an idle process's is the
		// one kept, equal to the file's).
		pr.runDelay, pr.haveRunDelay = schedRunDelay(m.sched[:m.n])
	}
	return pr
}

// readCmdline returns the NUL-separated words of /proc/PID/cmdline.
func readCmdline(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return []string{}, nil // a kernel thread, or a zombie
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
}

// watchedName returns the program name comm is, "" for none, without
// allocating.
func watchedName(comm []byte) string {
	for _, n := range programNames {
		if string(comm) == n {
			return n
		}
	}
	return ""
}

// foundByName tells the comm of a watched program that has no pid file in
// pidFiles: pidLister keeps only those comm files open.
func foundByName(pidFiles map[string]string) func(comm []byte) bool {
	return func(comm []byte) bool {
		name := watchedName(comm)
		_, byFile := pidFiles[name]
		return name != "" && !byFile
	}
}

// group picks the program's processes among the candidates: the pid-file
// process and its descendants, or every candidate when found by name.
func group(name string, cands []*kdcProc, byFile bool, root int) programProcs {
	pp := programProcs{name: name}
	member := map[int]*kdcProc{}
	if byFile {
		byPID := map[int]*kdcProc{}
		for _, c := range cands {
			byPID[c.pid] = c
		}
		if byPID[root] == nil {
			return pp // stale or missing pid file: not running
		}
		member[root] = byPID[root]
		for grew := true; grew; { // add children until none is new
			grew = false
			for _, c := range cands {
				if member[c.pid] == nil && member[c.stat.PPID] != nil {
					member[c.pid], grew = c, true
				}
			}
		}
	} else {
		for _, c := range cands {
			member[c.pid] = c
		}
	}
	for _, c := range member {
		if member[c.stat.PPID] != nil && c.pid != root {
			pp.workers = append(pp.workers, c)
		} else if pp.main == nil || older(c, pp.main) {
			pp.main = c
		}
	}
	if pp.main == nil {
		return pp
	}
	sort.Slice(pp.workers, func(i, j int) bool { return older(pp.workers[i], pp.workers[j]) })
	pp.procs = append(pp.procs, pp.main)
	for _, c := range member {
		if c != pp.main {
			pp.procs = append(pp.procs, c)
		}
	}
	rest := pp.procs[1:]
	sort.Slice(rest, func(i, j int) bool { return rest[i].pid < rest[j].pid })
	return pp
}

func older(a, b *kdcProc) bool {
	if a.stat.Starttime != b.stat.Starttime {
		return a.stat.Starttime < b.stat.Starttime
	}
	return a.pid < b.pid
}

// readPidFile returns the pid in the file, kept open between scrapes
// (fileCache.readReplaceable), if rule trusts the file.
func readPidFile(files *fileCache, path string, rule *kdcproc.Rule) (int, error) {
	b, err := files.readReplaceable(path, func(st *unix.Stat_t) error { return rule.TrustPidFile(path, st.Uid, st.Mode) })
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s does not hold a pid: %q", path, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// parseKDCArgs reads -w and -r the way krb5kdc's getopt does (optstring
// "x:r:d:mM:k:R:P:p:nw:4:T:X3" in MIT 1.20): bundled flags, and option
// arguments either attached ("-w2") or in the next word.
func parseKDCArgs(argv []string) kdcArgs {
	const withArg = "xrdMkRPpw4T"
	var a kdcArgs
	for i := 1; i < len(argv); i++ {
		w := argv[i]
		if w == "--" {
			break
		}
		if len(w) < 2 || w[0] != '-' {
			continue // GNU getopt permutes: options may follow operands
		}
		for j := 1; j < len(w); j++ {
			opt := w[j]
			if !strings.ContainsRune(withArg, rune(opt)) {
				continue
			}
			val := w[j+1:]
			if val == "" && i+1 < len(argv) {
				i++
				val = argv[i]
			}
			switch opt {
			case 'w':
				if n, err := strconv.Atoi(val); err == nil && n > 0 {
					a.workers = n
				}
			case 'r':
				a.realms = append(a.realms, val)
			}
			break
		}
	}
	return a
}

// untrusted is err if it says a pid file is not trusted, else nil.
func untrusted(err error) error {
	if errors.Is(err, kdcproc.ErrUntrustedPidFile) {
		return err
	}
	return nil
}

// gone reports errors of a process that exited between two reads.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}
