package collector

import (
	"bytes"
	"errors"
	"os"
)

// Most of a scrape's kernel time goes into generating the per-process
// files (status about 15 µs, stat 7, io 3.5, children 2.7 at -w 64), and
// with krb5kdc -w 64 most workers were not scheduled at all since the
// previous scrape. A process that did not run cannot have changed its
// context switches, I/O counts, children or open files: the kernel
// updates all of these in the process's own context. So each process's
// /proc/PID/schedstat (about 1 µs: run time, run-queue wait and the
// number of times it was switched in; a switch out always adds run time)
// is read first, and when it is the same as at the previous scrape,
// through the same kept descriptor (so the same process, not a reused
// pid), the previous values of status, io, children, fd/ and the socket
// inodes are used. stat is still read every time (its memory figures can
// change while the process sleeps). This holds only for a single-threaded
// process (every MIT daemon): schedstat describes the main thread alone.
// Without schedstat (a kernel without CONFIG_SCHED_INFO, or a copied
// tree) every file is read every time.
//
// One thing can change without the process running and stay as last
// read: a child that the kernel reaps by itself (SIGCHLD ignored) still
// listed among its children; the child's own files are gone, so it is
// dropped.

// procMemo is what was read of one process while its schedstat was
// memoSched.
type procMemo struct {
	sched   [64]byte
	n       int // length of the schedstat in sched; 0: never equal
	threads int // at the last read of stat
	gen     uint64

	children    []int
	fds         int
	vol, nonvol uint64
	rd, wr      uint64
	sockets     map[uint64]bool // socket inodes among its open files

	haveChildren, haveFDs, haveCtx, haveIO, haveSockets bool
}

// memoFor returns the process's memo and whether it was idle since its
// last read: nil, false when schedstat cannot be read (the caller reads
// everything). The memo of a process that ran is cleared, with the new
// schedstat recorded before any other file is read, so that activity
// during this scrape's reads shows as a change at the next.
func (s *procScanner) memoFor(pid int, pp *procPaths) (*procMemo, bool) {
	if !s.onProcfs || s.noSchedstat {
		return nil, false
	}
	sched, kept, err := s.files.readSingleKept(pp.file("schedstat"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(pp.dir); serr == nil {
				s.noSchedstat = true // the process is there, its schedstat is not
			}
		}
		return nil, false
	}
	if s.memo == nil {
		s.memo = map[int]*procMemo{}
	}
	m := s.memo[pid]
	if m != nil && kept && m.n > 0 && bytes.Equal(sched, m.sched[:m.n]) {
		m.gen = s.gen
		return m, true
	}
	m = &procMemo{gen: s.gen}
	if len(sched) <= len(m.sched) {
		m.n = copy(m.sched[:], sched)
	}
	s.memo[pid] = m
	return m, false
}

// sweepMemo forgets the processes not looked at in this scan, and their
// paths.
func (s *procScanner) sweepMemo() {
	for pid, m := range s.memo {
		if m.gen != s.gen {
			delete(s.memo, pid)
		}
	}
	for pid, pp := range s.paths {
		if pp.gen != s.gen {
			delete(s.paths, pid)
		}
	}
	if s.ident != nil {
		s.ident.sweep(s.gen)
	}
	s.gen++
}
