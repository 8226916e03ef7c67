package tailer

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// tailLen is how many bytes before a position are remembered to recognise
// the file again: longer than a KDC line, so it spans a timestamp.
const tailLen = 512

// headLen is how many of a file's first bytes identify it (its content
// fingerprint): several KDC lines, so two files share it only if they
// start with the same lines, timestamps included. Inode numbers identify
// nothing across a restart: a deleted file's number is reused at once.
const headLen = 1024

// ring keeps the last tailLen bytes appended to it.
type ring struct {
	b [tailLen]byte
	n int
}

func (r *ring) add(p []byte) {
	if len(p) >= tailLen {
		copy(r.b[:], p[len(p)-tailLen:])
		r.n = tailLen
		return
	}
	keep := min(tailLen-len(p), r.n)
	copy(r.b[:keep], r.b[r.n-keep:r.n])
	copy(r.b[keep:], p)
	r.n = keep + len(p)
}

func (r *ring) bytes() []byte { return r.b[:r.n] }

// fnv64a is FNV-1a; a position file needs a stable, cheap fingerprint.
func fnv64a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// file is one open file being read: the followed path's current file or
// a rotated one still being drained.
type file struct {
	f        *os.File
	dev, ino uint64
	birth    int64 // creation time (statx), 0 if unknown: tells a reused inode

	off     int64 // end of the last complete line handed on
	readOff int64 // next byte to read
	buf     []byte
	start   int // buf[start:end] holds bytes not yet handed on
	end     int

	rtail ring   // the last bytes read: still there unless the file was rewritten
	ctail ring   // the last bytes up to off: the fingerprint of a saved position
	head  []byte // the file's first bytes, up to headLen: its identity

	// While skipping the rest of an over-long line, the saved position
	// stays at the line's start.
	skipping bool
	skipPos  FilePos

	deadline time.Time // rotated files: stop reading after this
}

func fileID(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}

// birth is the file's creation time in nanoseconds (statx btime), 0
// where the file system does not keep it. With dev and ino it names a
// file for good: an inode number freed by a deletion is reused at once,
// but the new file is born later.
func birth(f *os.File) int64 {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	var st unix.Statx_t
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.Statx(int(fd), "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &st)
	}); err != nil || serr != nil || st.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
}

// sameFile reports whether dev, ino and birth name the file p was taken
// of; a birth time unknown on either side is no evidence against it.
func sameFile(dev, ino uint64, born int64, p FilePos) bool {
	return dev == p.Dev && ino == p.Ino && (born == 0 || p.Birth == 0 || born == p.Birth)
}

func nlink(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// openFile opens path for reading from off; it checks that the file is
// the one fi describes (the path may have been replaced in between).
func openFile(path string, bufSize int) (*file, os.FileInfo, error) {
	f, fi, err := safefile.Open(path, 0)
	if err != nil {
		return nil, nil, err
	}
	fl := &file{f: f, buf: make([]byte, bufSize), birth: birth(f)}
	fl.dev, fl.ino = fileID(fi)
	return fl, fi, nil
}

// seek sets the position of a freshly opened file, reading the bytes
// before it so that later checks can tell whether the file was rewritten.
func (fl *file) seek(off int64) error {
	fl.off, fl.readOff, fl.start, fl.end = off, off, 0, 0
	fl.rtail, fl.ctail, fl.head = ring{}, ring{}, fl.head[:0]
	if h := min(off, headLen); h > 0 {
		fl.head = append(fl.head, make([]byte, h)...)
		if _, err := fl.f.ReadAt(fl.head, 0); err != nil {
			fl.head = fl.head[:0]
			return err
		}
	}
	n := int64(min(off, tailLen))
	if n == 0 {
		return nil
	}
	var w [tailLen]byte
	if _, err := fl.f.ReadAt(w[:n], off-n); err != nil {
		return err
	}
	fl.rtail.add(w[:n])
	fl.ctail.add(w[:n])
	return nil
}

// fingerprint is the identity of what has been read of the file: the hash
// of its first bytes up to the position, at most headLen of them.
func (fl *file) fingerprint() (hash uint64, n int) {
	n = int(min(int64(len(fl.head)), fl.off))
	return fnv64a(fl.head[:n]), n
}

// pos is the position to save: the end of the last complete line.
func (fl *file) pos() FilePos {
	if fl.skipping {
		return fl.skipPos
	}
	hh, hn := fl.fingerprint()
	return FilePos{Dev: fl.dev, Ino: fl.ino, Birth: fl.birth, Offset: fl.off, Hash: fnv64a(fl.ctail.bytes()), HashLen: fl.ctail.n, HeadHash: hh, HeadLen: hn}
}

// stillSame reports whether the bytes before readOff are those read
// there: false after a truncation, even one followed by new writes past
// the old size.
func (fl *file) stillSame() (bool, error) {
	want := fl.rtail.bytes()
	if len(want) == 0 {
		return true, nil
	}
	var got [tailLen]byte
	n, err := fl.f.ReadAt(got[:len(want)], fl.readOff-int64(len(want)))
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return bytes.Equal(got[:n], want), nil
}

// errRewritten reports a file truncated (or rewritten) under the reader.
var errRewritten = errors.New("file truncated or rewritten")

// readLines reads what the file holds beyond readOff and hands on every
// complete line; a line longer than maxLine is handed on cut, once, with
// truncated set. It returns the file's size.
func (fl *file) readLines(h sink, maxLine int, st *Stats, stop func() bool) (int64, error) {
	fi, err := fl.f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if size < fl.readOff {
		return size, errRewritten
	}
	if size == fl.readOff {
		// Nothing new, or a copytruncate followed by exactly as many bytes
		// as were there (one login's lines are as long as the last one's):
		// only the content tells. One small pread per idle cycle.
		if same, err := fl.stillSame(); err != nil || !same {
			return size, cmp.Or(err, errRewritten)
		}
		return size, nil
	}
	for fl.readOff < size && !stop() {
		if fl.end == len(fl.buf) {
			copy(fl.buf, fl.buf[fl.start:fl.end])
			fl.end -= fl.start
			fl.start = 0
		}
		n, err := fl.f.ReadAt(fl.buf[fl.end:], fl.readOff)
		if n == 0 {
			if err != nil && !errors.Is(err, io.EOF) {
				return size, err
			}
			break
		}
		same, verr := fl.stillSame()
		if verr != nil {
			return size, verr
		}
		if !same {
			return size, errRewritten
		}
		fl.rtail.add(fl.buf[fl.end : fl.end+n])
		if fl.readOff < headLen && int64(len(fl.head)) == fl.readOff {
			fl.head = append(fl.head, fl.buf[fl.end:fl.end+min(n, headLen-int(fl.readOff))]...)
		}
		fl.readOff += int64(n)
		fl.end += n
		st.Bytes.Add(uint64(n))
		fl.scan(h, maxLine, st)
		if fl.readOff > size { // grew while we read
			size = fl.readOff
		}
	}
	return size, nil
}

// scan hands on the complete lines in buf[start:end].
func (fl *file) scan(h sink, maxLine int, st *Stats) {
	from := fl.start
	lines := uint64(0)
	if fl.skipping { // the rest of a cut line: up to its end, dropped
		if j := bytes.IndexByte(fl.buf[fl.start:fl.end], '\n'); j >= 0 {
			fl.skipping = false
			fl.start += j + 1
		}
	}
	if h.lines != nil && !fl.skipping {
		if j := bytes.LastIndexByte(fl.buf[fl.start:fl.end], '\n'); j >= 0 {
			b := fl.buf[fl.start : fl.start+j+1]
			lines += h.lines(b)
			fl.start += j + 1
		}
	}
	for {
		j := bytes.IndexByte(fl.buf[fl.start:fl.end], '\n')
		if j < 0 {
			break
		}
		nl := fl.start + j
		if fl.skipping {
			fl.skipping = false
		} else {
			h.line(fl.buf[fl.start:nl], false)
			lines++
		}
		fl.start = nl + 1
	}
	if fl.start > from {
		fl.ctail.add(fl.buf[from:fl.start])
		fl.off = fl.readOff - int64(fl.end-fl.start)
	}
	if pending := fl.end - fl.start; pending > maxLine || (pending == len(fl.buf) && pending > 0) {
		if !fl.skipping {
			h.line(fl.buf[fl.start:fl.start+min(pending, maxLine)], true)
			lines++
			fl.skipPos = fl.pos()
			fl.skipping = true
		}
		// Drop what is buffered; keep the fingerprint of the bytes dropped
		// so it is right once the line ends.
		fl.ctail.add(fl.buf[fl.start:fl.end])
		fl.start, fl.end = 0, 0
	}
	h.done(lines, st)
}

// flushPartial hands on a last line without a newline, when a rotated file
// is closed for good: the daemon will not finish it.
func (fl *file) flushPartial(h sink, st *Stats) {
	if fl.end > fl.start && !fl.skipping {
		h.line(fl.buf[fl.start:fl.end], false)
		h.done(1, st)
		fl.ctail.add(fl.buf[fl.start:fl.end])
		fl.start = fl.end
		fl.off = fl.readOff
	}
}

func (fl *file) close() {
	if fl.f != nil {
		fl.f.Close()
		fl.f = nil
	}
}
