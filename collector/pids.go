package collector

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Finding the daemons by name (no pid files, the default) reads the comm
// of every process of the machine on every scrape. Through procfs that was
// a listing that allocates per process, then an open, a read and a close
// of each comm: about 20 µs per process, 3 ms a scrape with 140 processes
// on the test machine. Here /proc stays open and is listed again from
// offset 0 into a reused buffer, and each comm is opened relative to that
// descriptor (no lookup of /proc itself), read with one pread and closed.
// Only the comm files of the watched programs stay open between scrapes
// and are re-read with one pread (the kernel regenerates it, so a renamed
// or exec'd process reads its new name); an exited process's file fails
// with ESRCH and is dropped, as in fileCache. Keeping every process's comm
// open saved two system calls per process but held one descriptor per
// process of the machine (1,646 with 1,600 processes): descriptors must
// follow what the exporter watches, not what the host runs.

// maxCommFiles bounds the comm files kept open; beyond it, the others are
// opened for each read. Only watched programs' files are kept, so it is
// reached only when that many processes take a watched name. It is lowered
// to a quarter of the open-file limit (keptFileLimit), so that the
// exporter's own sockets always have room.
const maxCommFiles = 256

// keptFileLimit is limit, or a quarter of the soft limit on open files if
// that is less: the two caches of kept files then hold at most half of it.
func keptFileLimit(limit int) int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Cur/4 < uint64(limit) {
		return int(rl.Cur / 4)
	}
	return limit
}

// pidLister lists the processes of a procfs tree. Not safe for concurrent
// use: the KDCCollector serialises scrapes.
type pidLister struct {
	procPath string
	dirFD    int // procPath, open between scrapes; -1: not open
	buf      []byte
	pids     []int
	comms    map[int]*cachedFile // the kept comm files, by pid
	keep     func(comm []byte) bool
	gen      uint64
	maxKept  int
	commBuf  [64]byte // comm is at most 15 bytes and a newline
	pathBuf  []byte   // "PID/comm", relative to dirFD
}

// newPidLister lists procPath; keep tells the comm files to keep open
// between scrapes (the watched programs').
func newPidLister(procPath string, keep func(comm []byte) bool) *pidLister {
	return &pidLister{procPath: procPath, dirFD: -1, buf: make([]byte, 16<<10), comms: map[int]*cachedFile{}, keep: keep, maxKept: keptFileLimit(maxCommFiles)}
}

// list returns the pids of the processes in procPath (entries whose name
// is a number), valid until the next call.
func (l *pidLister) list() ([]int, error) {
	pids, err := l.listOnce()
	if err != nil && l.dirFD >= 0 {
		// A descriptor gone bad: once more on a fresh open.
		unix.Close(l.dirFD)
		l.dirFD = -1
		pids, err = l.listOnce()
	}
	return pids, err
}

func (l *pidLister) listOnce() ([]int, error) {
	if l.dirFD < 0 {
		fd, err := unix.Open(l.procPath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: l.procPath, Err: err}
		}
		l.dirFD = fd
	} else if _, err := unix.Seek(l.dirFD, 0, 0); err != nil {
		return nil, &os.PathError{Op: "seek", Path: l.procPath, Err: err}
	}
	l.pids = l.pids[:0]
	for {
		n, err := unix.Getdents(l.dirFD, l.buf)
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: l.procPath, Err: err}
		}
		if n <= 0 {
			return l.pids, nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name
			d := l.buf[off:n]
			if len(d) < 19 {
				return nil, fmt.Errorf("%s: malformed directory entry", l.procPath)
			}
			reclen := int(uint16(d[16]) | uint16(d[17])<<8)
			if reclen < 19 || reclen > len(d) {
				return nil, fmt.Errorf("%s: malformed directory entry", l.procPath)
			}
			name := d[19:reclen]
			if k := bytes.IndexByte(name, 0); k >= 0 {
				name = name[:k]
			}
			if pid, err := atoi(name); err == nil && pid > 0 {
				l.pids = append(l.pids, pid)
			}
			off += reclen
		}
	}
}

// comm returns the comm of process pid without its newline, valid until
// the next call. Call it after list: it opens relative to the listed
// directory.
func (l *pidLister) comm(pid int) ([]byte, error) {
	if cf := l.comms[pid]; cf != nil {
		n, err := unix.Pread(cf.fd, l.commBuf[:], 0)
		if c := bytes.TrimSuffix(l.commBuf[:max(n, 0)], []byte("\n")); err == nil && l.keep(c) {
			cf.gen = l.gen
			return c, nil
		}
		// Exited (ESRCH), perhaps with its pid reused, or no longer a
		// watched program: a fresh open tells which.
		unix.Close(cf.fd)
		delete(l.comms, pid)
	}
	l.pathBuf = append(strconv.AppendInt(l.pathBuf[:0], int64(pid), 10), "/comm"...)
	dirFD, rel := l.dirFD, string(l.pathBuf)
	if dirFD < 0 {
		dirFD, rel = unix.AT_FDCWD, l.procPath+"/"+rel
	}
	fd, err := unix.Openat(dirFD, rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: l.procPath + "/" + string(l.pathBuf), Err: err}
	}
	n, err := unix.Pread(fd, l.commBuf[:], 0)
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "read", Path: l.procPath + "/" + string(l.pathBuf), Err: err}
	}
	c := bytes.TrimSuffix(l.commBuf[:n], []byte("\n"))
	if l.keep(c) && len(l.comms) < l.maxKept {
		l.comms[pid] = &cachedFile{fd: fd, gen: l.gen}
	} else {
		unix.Close(fd)
	}
	return c, nil
}

// sweep closes the comm files not read since the previous sweep (their
// processes are gone); called after each full scan.
func (l *pidLister) sweep() {
	for pid, cf := range l.comms {
		if cf.gen != l.gen {
			unix.Close(cf.fd)
			delete(l.comms, pid)
		}
	}
	l.gen++
}
