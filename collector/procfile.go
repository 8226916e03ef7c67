package collector

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The per-process files are read on every scrape: with krb5kdc -w 64 that
// is several hundred files. Through procfs each costs an open, two or
// more reads into a growing buffer, a close and fmt-based parsing; here
// the files stay open between scrapes and are re-read with one pread at
// offset 0 (the kernel regenerates a procfs file read from offset 0), and
// parsed in place without allocating. With the single-task children read
// in discovery, this halved the CPU of a -w 64 scrape (testdata/README.md).
// Processes not scheduled since the last scrape skip most of them
// (procmemo.go).
//
// An open /proc/PID/... file belongs to that process, not to the pid: once
// the process has exited, reads fail with ESRCH even if the pid is reused,
// so a stale file is dropped and the path opened again.

// maxCachedFiles bounds the files kept open (less with a low open-file
// limit: keptFileLimit); beyond it, files are opened for each read.
const maxCachedFiles = 1024

// fileCache keeps files open between scrapes. Not safe for concurrent
// use: the KDCCollector serialises scrapes.
type fileCache struct {
	files   map[string]*cachedFile
	gen     uint64 // scrape number; files not read in a scrape are closed
	buf     []byte
	small   [64]byte // readSysctl's buffer
	maxKept int      // files kept open at most
	now     func() time.Time
}

type cachedFile struct {
	fd       int
	gen      uint64
	dev, ino uint64 // readReplaceable's files: the file's identity
	// readReplaceable's files: the stat at the last read, and its content
	// while settled.
	size       int64
	mtim, ctim unix.Timespec
	settled    bool
	content    []byte
}

func newFileCache() *fileCache {
	return &fileCache{files: map[string]*cachedFile{}, buf: make([]byte, 4096), maxKept: keptFileLimit(maxCachedFiles), now: time.Now}
}

// readSingle returns the whole content of path, a file that procfs
// generates in one piece (single_open: stat, status, io, limits, snmp,
// netstat), so that one read shorter than the buffer is all of it; the
// fixtures' regular files behave the same. The slice is valid until the
// next read.
func (c *fileCache) readSingle(path string) ([]byte, error) { return c.read(path, c.pread) }

// readSysctl is readSingle for a small /proc/sys file: the kernel
// allocates and zeroes a buffer the size of each read of one (16 KiB for
// the 8 KiB buffer), so it is read with a small one first (warm 0.34
// against 0.80 µs for kernel.task_delayacct, testdata/README.md round 7).
func (c *fileCache) readSysctl(path string) ([]byte, error) { return c.read(path, c.preadSmall) }

// readAll returns the whole content of path, a procfs file generated
// record by record (children, net/udp), which one read may return only in
// part: it reads on until the end. The slice is valid until the next read.
func (c *fileCache) readAll(path string) ([]byte, error) { return c.read(path, c.preadAll) }

// readSingleKept is readSingle that also tells whether the content came
// through a descriptor kept from an earlier read: the same process as
// then (a kept /proc/PID file fails once its process has exited).
func (c *fileCache) readSingleKept(path string) ([]byte, bool, error) {
	b, kept, err := c.readKept(path, c.pread)
	return b, kept, err
}

func (c *fileCache) read(path string, pread func(fd int, path string) ([]byte, error)) ([]byte, error) {
	b, _, err := c.readKept(path, pread)
	return b, err
}

func (c *fileCache) readKept(path string, pread func(fd int, path string) ([]byte, error)) ([]byte, bool, error) {
	cf := c.files[path]
	if cf != nil {
		b, err := pread(cf.fd, path)
		if err == nil {
			cf.gen = c.gen
			return b, true, nil
		}
		// Exited (ESRCH), or anything else: forget the file and retry
		// once on a fresh open, which tells a reused pid from an exited
		// process and reports the error the path gives now.
		unix.Close(cf.fd)
		delete(c.files, path)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, &os.PathError{Op: "open", Path: path, Err: err}
	}
	b, err := pread(fd, path)
	if err != nil || len(c.files) >= c.maxKept {
		unix.Close(fd)
		return b, false, err
	}
	c.files[path] = &cachedFile{fd: fd, gen: c.gen}
	return b, false, nil
}

// readReplaceable reads a regular file that is rewritten, or replaced by
// a new file, now and then (a pid file): one stat of the path tells
// whether the kept descriptor is still the file there (same device and
// inode), and it is read from offset 0 (a file rewritten in place shows
// its new content): a stat and a read, where os.ReadFile is an open,
// fstat, two reads and a close. A file whose stat (device, inode, size,
// mtime, ctime) is the same as at its last read is not read again if its
// mtime and ctime were already settledAge old then: any write since would
// have set both to a later time (a write within the timestamps'
// granularity of the last read is the case this leaves out: such a file
// is read at every scrape until it settles). check, given the stat,
// vetoes the file before it is read (a pid file's owner and mode).
// The slice is valid until the next read.
func (c *fileCache) readReplaceable(path string, check func(*unix.Stat_t) error) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := check(&st); err != nil {
		return nil, err
	}
	if cf := c.files[path]; cf != nil && (cf.dev != st.Dev || cf.ino != st.Ino) {
		unix.Close(cf.fd)
		delete(c.files, path)
	} else if cf != nil && cf.settled && cf.size == st.Size && cf.mtim == st.Mtim && cf.ctim == st.Ctim {
		cf.gen = c.gen
		return cf.content, nil
	}
	// A read of a regular file shorter than asked for ends at its end.
	b, kept, err := c.readKept(path, c.pread)
	cf := c.files[path]
	if err != nil || cf == nil {
		return b, err
	}
	if !kept {
		// Opened just now: if the file was replaced between the stat and
		// the open, the next stat differs and the file is opened again.
		cf.dev, cf.ino = st.Dev, st.Ino
	}
	// The stat was taken before the read: a write after it changes the
	// next one.
	changed := time.Unix(st.Mtim.Unix())
	if ct := time.Unix(st.Ctim.Unix()); ct.After(changed) {
		changed = ct
	}
	cf.size, cf.mtim, cf.ctim = st.Size, st.Mtim, st.Ctim
	cf.settled = len(b) <= maxSettledContent && c.now().Sub(changed) >= settledAge
	if cf.settled {
		cf.content = append(cf.content[:0], b...)
	}
	return b, nil
}

// settledAge is how old a replaceable file's mtime and ctime must be for
// an unchanged stat to mean unchanged content: more than the coarsest
// timestamp granularity of the file systems a pid file lives on (1 s).
const settledAge = 2 * time.Second

// maxSettledContent bounds the content kept of a settled file.
const maxSettledContent = 256

// fstat stats path through a descriptor opened with O_PATH and kept
// between scrapes: for a procfs file whose attributes the kernel computes
// at each stat (the size of /proc/PID/fd), without a path lookup. A
// failure on the kept descriptor (the process exited) is retried once on
// a fresh open, as in read.
func (c *fileCache) fstat(path string, st *unix.Stat_t) error {
	if cf := c.files[path]; cf != nil {
		if err := unix.Fstat(cf.fd, st); err == nil {
			cf.gen = c.gen
			return nil
		}
		unix.Close(cf.fd)
		delete(c.files, path)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if len(c.files) >= c.maxKept {
		unix.Close(fd)
		return nil
	}
	c.files[path] = &cachedFile{fd: fd, gen: c.gen}
	return nil
}

func (c *fileCache) preadAll(fd int, path string) ([]byte, error) {
	n := 0
	for {
		if n == len(c.buf) {
			if len(c.buf) >= 16<<20 {
				return nil, fmt.Errorf("%s: larger than 16 MiB", path)
			}
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		m, err := unix.Pread(fd, c.buf[n:], int64(n))
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return c.buf[:n], nil
		}
		n += m
	}
}

// pread reads fd from offset 0 in one call, growing the buffer (up to
// 1 MiB) until the content fits with room to spare.
func (c *fileCache) pread(fd int, path string) ([]byte, error) {
	for {
		n, err := unix.Pread(fd, c.buf, 0)
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n < len(c.buf) {
			return c.buf[:n], nil
		}
		if len(c.buf) >= 1<<20 {
			return nil, fmt.Errorf("%s: larger than 1 MiB", path)
		}
		c.buf = make([]byte, 2*len(c.buf))
	}
}

// preadSmall is pread with a 64-byte buffer first.
func (c *fileCache) preadSmall(fd int, path string) ([]byte, error) {
	n, err := unix.Pread(fd, c.small[:], 0)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if n < len(c.small) {
		return c.small[:n], nil
	}
	return c.pread(fd, path)
}

// sweep closes the files not read since the previous sweep: their
// processes are gone or no longer watched. Called once per scrape.
func (c *fileCache) sweep() {
	for path, cf := range c.files {
		if cf.gen != c.gen {
			unix.Close(cf.fd)
			delete(c.files, path)
		}
	}
	c.gen++
}

// readParsed2 reads a single-piece file and parses two numbers from it.
func readParsed2(c *fileCache, path string, parse func([]byte) (uint64, uint64, error)) (uint64, uint64, error) {
	b, err := c.readSingle(path)
	if err != nil {
		return 0, 0, err
	}
	return parse(b)
}

// procStat is what the collectors use of /proc/PID/stat (proc(5) field
// numbers in comments).
type procStat struct {
	Comm           string // (2)
	State          string // (3)
	PPID           int    // (4)
	UTime, STime   uint64 // (14), (15)
	CUTime, CSTime int64  // (16), (17)
	NumThreads     int    // (20)
	Starttime      uint64 // (22)
	VSize          uint64 // (23)
	RSS            int64  // (24)
	// BlkioTicks is delayacct_blkio_ticks (42): clock ticks spent waiting
	// for synchronous block I/O, counted only while task delay accounting
	// is on (kernel.task_delayacct); HaveBlkio is false for a stat that
	// ends before it.
	BlkioTicks uint64
	HaveBlkio  bool
}

// parseStat parses /proc/PID/stat. comm may hold spaces and parentheses:
// it runs from the first '(' to the last ')'.
func parseStat(b []byte) (procStat, error) {
	var st procStat
	l, r := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if l < 0 || r < l || r+2 > len(b) {
		return st, fmt.Errorf("malformed stat %q", truncate(b))
	}
	if w := watchedName(b[l+1 : r]); w != "" {
		st.Comm = w // the watched programs' names: no allocation
	} else {
		st.Comm = string(b[l+1 : r])
	}
	rest := b[r+2:]
	for field := 3; len(rest) > 0 && field <= 42; field++ {
		var w []byte
		if i := bytes.IndexByte(rest, ' '); i >= 0 {
			w, rest = rest[:i], rest[i+1:]
		} else {
			w, rest = bytes.TrimRight(rest, "\n"), nil
		}
		var err error
		switch field {
		case 3:
			st.State = string(w)
		case 4:
			st.PPID, err = atoi(w)
		case 14:
			st.UTime, err = atou(w)
		case 15:
			st.STime, err = atou(w)
		case 16:
			st.CUTime, err = atoi64(w)
		case 17:
			st.CSTime, err = atoi64(w)
		case 20:
			st.NumThreads, err = atoi(w)
		case 22:
			st.Starttime, err = atou(w)
		case 23:
			st.VSize, err = atou(w)
		case 24:
			st.RSS, err = atoi64(w)
		case 42:
			st.BlkioTicks, err = atou(w)
			st.HaveBlkio = err == nil
			return st, err
		}
		if err != nil {
			return st, fmt.Errorf("stat field %d: %w", field, err)
		}
		if field >= 24 && len(rest) == 0 {
			return st, nil // a kernel without field 42
		}
	}
	return st, fmt.Errorf("short stat %q", truncate(b))
}

// schedRunDelay returns the second number of /proc/PID/schedstat: the
// nanoseconds the process spent runnable, waiting for a CPU (run_delay).
func schedRunDelay(b []byte) (uint64, bool) {
	_, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok {
		return 0, false
	}
	if i := bytes.IndexByte(rest, ' '); i >= 0 {
		rest = rest[:i]
	}
	v, err := atou(bytes.TrimRight(rest, "\n"))
	return v, err == nil
}

// statusCtxt returns the voluntary and nonvoluntary context switches of
// /proc/PID/status.
func statusCtxt(b []byte) (vol, nonvol uint64, err error) {
	var okV, okN bool
	if vol, okV, err = keyValue(b, "\nvoluntary_ctxt_switches:"); err != nil {
		return 0, 0, err
	}
	if nonvol, okN, err = keyValue(b, "\nnonvoluntary_ctxt_switches:"); err != nil {
		return 0, 0, err
	}
	if !okV || !okN {
		return 0, 0, errors.New("status: no ctxt_switches lines")
	}
	return vol, nonvol, nil
}

// ioBytes returns read_bytes and write_bytes of /proc/PID/io.
func ioBytes(b []byte) (rd, wr uint64, err error) {
	var okR, okW bool
	if rd, okR, err = keyValue(b, "\nread_bytes:"); err != nil {
		return 0, 0, err
	}
	if wr, okW, err = keyValue(b, "\nwrite_bytes:"); err != nil {
		return 0, 0, err
	}
	if !okR || !okW {
		return 0, 0, fmt.Errorf("io: no read_bytes/write_bytes in %q", truncate(b))
	}
	return rd, wr, nil
}

// keyValue finds the line starting with key (after a newline) and parses
// its number.
func keyValue(b []byte, key string) (uint64, bool, error) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false, nil
	}
	v := b[i+len(key):]
	if j := bytes.IndexByte(v, '\n'); j >= 0 {
		v = v[:j]
	}
	n, err := atou(bytes.TrimSpace(v))
	if err != nil {
		return 0, true, fmt.Errorf("%s %w", key[1:], err)
	}
	return n, true, nil
}

// limitsOpenFiles returns the soft limit of "Max open files" in
// /proc/PID/limits; unlimited is the largest uint64, as in procfs. The
// line is "Max open files" padded to 26 columns, then the soft limit,
// padded too; the value is cut out in place (no allocation).
func limitsOpenFiles(b []byte) (uint64, error) {
	const key = "\nMax open files"
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, errors.New("limits: no Max open files line")
	}
	v := bytes.TrimLeft(b[i+len(key):], " \t")
	if j := bytes.IndexAny(v, " \t\n"); j >= 0 {
		v = v[:j]
	}
	if len(v) == 0 {
		return 0, errors.New("limits: empty Max open files line")
	}
	if string(v) == "unlimited" {
		return 1<<64 - 1, nil
	}
	return atou(v)
}

func atou(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, strconv.ErrSyntax
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("not a number: %q", b)
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, strconv.ErrRange
		}
		n = n*10 + d
	}
	return n, nil
}

func atoi64(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, err := atou(b)
	if err != nil || u > 1<<63-1 {
		return 0, fmt.Errorf("not an int64: %q", b)
	}
	if neg {
		return -int64(u), nil
	}
	return int64(u), nil
}

func atoi(b []byte) (int, error) {
	n, err := atoi64(b)
	return int(n), err
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
