package tailer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/go-kit/log/level"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// candidate is a file that may hold a saved position: the path itself or
// a sibling with a rotated name.
type candidate struct {
	path     string
	dev, ino uint64
	birth    int64
	size     int64
	mtime    time.Time
	head     []byte // the first bytes, up to headLen
	used     bool   // matched to a saved position or a file already open
	// unsettled: the file shrank while it was listed (rewritten in
	// place, as a copy replacing the last copy is): size and first bytes
	// may not belong together.
	unsettled bool
}

// candidates lists the path (first, if it exists) and its siblings
// changed after since, each with its first bytes.
func (t *Tailer) candidates(since time.Time) []*candidate {
	var out []*candidate
	add := func(path string) {
		f, fi, err := safefile.Open(path, 0)
		if err != nil {
			return
		}
		defer f.Close()
		c := &candidate{path: path, size: fi.Size(), mtime: fi.ModTime(), birth: birth(f)}
		c.dev, c.ino = fileID(fi)
		if t.listed != nil {
			t.listed(path)
		}
		c.head = make([]byte, min(fi.Size(), headLen))
		n, _ := f.ReadAt(c.head, 0)
		c.unsettled = n < len(c.head)
		c.head = c.head[:n]
		if fi, err := f.Stat(); err != nil || fi.Size() < c.size {
			c.unsettled = true
		}
		out = append(out, c)
	}
	add(t.opts.Path)
	for _, s := range siblings(t.opts.Path) {
		if s.mtime.After(since) {
			add(s.path)
		}
	}
	return out
}

// headMatches reports whether c can be the file p was taken of. A
// position in a file of which nothing was read identifies no file (the
// file, if it got lines, is found by discover); one saved by an older
// version (no fingerprint) falls back to the inode.
func headMatches(c *candidate, p FilePos) bool {
	if p.HeadLen == 0 {
		return p.Offset > 0 && c.dev == p.Dev && c.ino == p.Ino
	}
	return len(c.head) >= p.HeadLen && fnv64a(c.head[:p.HeadLen]) == p.HeadHash
}

// locate finds the file p was taken of among cands, by its content (the
// fingerprint of its first bytes and of the bytes before the position),
// opens it at p and marks it used. The file itself (device, inode and
// birth time) is tried first: two files can begin with the same bytes
// (a writer whose lines repeat), and a copy (copytruncate) holds the
// same content under another inode.
func (t *Tailer) locate(p FilePos, cands []*candidate) (*file, *candidate) {
	for pass := range 2 {
		for _, c := range cands {
			sameIno := sameFile(c.dev, c.ino, c.birth, p)
			if c.used || (pass == 0) != sameIno || c.size < p.Offset || !headMatches(c, p) {
				continue
			}
			fl, _, err := t.openNotedIf(c.path, func(fl *file, fi os.FileInfo) bool {
				// Not replaced since listed, and holding p.
				return fl.dev == c.dev && fl.ino == c.ino && atPos(p)(fl, fi)
			})
			if err == nil {
				c.used = true
				return fl, c
			}
		}
	}
	return nil, nil
}

// restore opens the files the saved position names, wherever rotation
// moved them while the exporter was stopped, and the files that appeared
// meanwhile; without a saved position it starts afresh.
func (t *Tailer) restore() {
	pos, ok := t.store.Get(t.opts.Path)
	if !ok {
		t.startFresh()
		return
	}
	t.done = append(t.done[:0], pos.Done...)
	cands := t.candidates(time.Time{})
	var atPath *candidate
	if len(cands) > 0 && cands[0].path == t.opts.Path {
		atPath = cands[0]
	}
	if pos.Current != nil && pos.Current.Offset > 0 {
		t.restoreCurrent(*pos.Current, cands, atPath)
	}
	gone := 0
	for _, rp := range pos.Rotated {
		if fl, _ := t.locate(rp, cands); fl != nil {
			t.keepReading(fl)
			continue
		}
		gone++
	}
	if gone > 0 {
		// Read to their end at the stop; usually replaced by a later
		// rotation since, which is no loss.
		t.stats.Mismatches[MismatchRotatedLost].Add(uint64(gone))
		level.Info(t.logger).Log("msg", "rotated log files still being read at the last stop are gone; lines written to them after the stop, if any, were not counted", "files", gone)
	}
	if t.cur == nil && atPath != nil && !atPath.used {
		// A file the exporter has not seen: every line in it is new.
		if fl, _, err := t.openNoted(atPath.path); err == nil {
			atPath.used = true
			t.cur = fl
		} else if !errors.Is(err, os.ErrNotExist) {
			t.problem("cannot open the log", err)
		}
	}
	// File times come from a coarse clock: a file written just after
	// the stop can carry an earlier time than the stop itself.
	t.discover(cands, time.Unix(0, pos.Saved).Add(-discoverSlack))
}

// restoreCurrent finds the file the path named at the last stop.
func (t *Tailer) restoreCurrent(cp FilePos, cands []*candidate, atPath *candidate) {
	fl, c := t.locate(cp, cands)
	// The inode is a hint here: the same number at the path most likely
	// means the file was truncated in place (copytruncate).
	inPlace := atPath != nil && sameFile(atPath.dev, atPath.ino, atPath.birth, cp)
	kind := MismatchRewritten
	if inPlace && atPath.size < cp.Offset {
		kind = MismatchTruncated
	}
	switch {
	case fl != nil && c == atPath:
		t.cur = fl // the same file: read on
	case fl != nil && inPlace:
		t.stats.Mismatches[kind].Add(1)
		t.stats.CopyFound.Add(1)
		level.Info(t.logger).Log("msg", "log was truncated while stopped; reading its copy on from the saved position, then the log from its start", "copy", c.path, "offset", cp.Offset)
		t.keepReading(fl)
	case fl != nil:
		t.stats.Mismatches[MismatchRotatedRecovered].Add(1)
		level.Info(t.logger).Log("msg", "log was rotated while stopped; reading the rotated file on from the saved position", "file", c.path, "offset", cp.Offset)
		t.keepReading(fl)
	case inPlace:
		t.stats.Mismatches[kind].Add(1)
		t.stats.Unread.Add(1)
		level.Warn(t.logger).Log("msg", "log was truncated or rewritten while stopped and no copy holds its end; its lines after the saved position are lost; reading it from the start", "offset", cp.Offset)
	default:
		t.stats.Mismatches[MismatchRotatedLost].Add(1)
		t.stats.Unread.Add(1)
		level.Warn(t.logger).Log("msg", "log was replaced while stopped and the old file is gone (compressed, moved to another directory, or replaced by a second rotation); its lines after the saved position, if any, are not counted", "offset", cp.Offset)
	}
}

// keepReading reads a rotated file on for RotateWait.
func (t *Tailer) keepReading(fl *file) {
	fl.deadline = t.now().Add(t.rotateWaitNow())
	t.old = append(t.old, fl)
}

// known reports whether c is a file being read or one read to its end
// before (a truncation's copy read on is one of those). Identity is the
// file's, not its content's: two files can begin with the same bytes (a
// writer whose lines repeat), and taking a file never read for one read
// before would lose all its lines. An open file's inode cannot be reused;
// a closed one's can, which its birth time and first bytes tell.
func (t *Tailer) known(c *candidate) bool {
	held := func(fl *file) bool { return fl != nil && fl.dev == c.dev && fl.ino == c.ino }
	if held(t.cur) || (t.cur != nil && copyOf(c, t.cur)) {
		return true
	}
	for _, o := range t.old {
		if held(o) {
			return true
		}
	}
	for _, d := range t.done {
		if d.HeadLen > 0 && sameFile(c.dev, c.ino, c.birth, d) && headMatches(c, d) {
			return true
		}
	}
	return false
}

// copyOf reports whether c holds what was read of the current file fl so
// far, first bytes and the bytes before the position alike: the copy
// copytruncate makes before it truncates the log. A copy shorter than
// what was read is one still being written (or one of the log's first
// part): its bytes are the ones fl's file still holds at the same
// offsets. A file that merely begins like fl is not one.
func copyOf(c *candidate, fl *file) bool {
	n := min(len(fl.head), len(c.head))
	if n == 0 || fl.off == 0 || !bytes.Equal(fl.head[:n], c.head[:n]) {
		return false
	}
	f, fi, err := safefile.Open(c.path, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if dev, ino := fileID(fi); dev != c.dev || ino != c.ino {
		return false
	}
	var got, held [tailLen]byte
	// The copy may grow, and the log be truncated, while we look: its
	// size after the comparison must be the one compared.
	for range 3 {
		fi, err := f.Stat()
		if err != nil {
			return false
		}
		size := fi.Size()
		if size >= fl.off {
			want := fl.ctail.bytes()
			k, err := f.ReadAt(got[:len(want)], fl.off-int64(len(want)))
			return err == nil && k == len(want) && bytes.Equal(got[:k], want)
		}
		k := int(min(size, tailLen))
		if k == 0 {
			return false
		}
		if m, err := f.ReadAt(got[:k], size-int64(k)); err != nil || m != k {
			return false
		}
		m, _ := fl.f.ReadAt(held[:k], size-int64(k))
		if m == k && bytes.Equal(got[:k], held[:k]) {
			return true
		}
		if fi, err := f.Stat(); err != nil || fi.Size() == size {
			return false
		}
	}
	return false
}

// discover reads, from their start, the rotated files that changed after
// since and hold content the exporter has never seen: files created and
// rotated away between two looks (rotation faster than the reads, or
// more than one rotation while the exporter was stopped).
func (t *Tailer) discover(cands []*candidate, since time.Time) {
	for _, c := range cands {
		if c.used || c.path == t.opts.Path || !c.mtime.After(since) {
			continue
		}
		if c.unsettled {
			t.rediscover = true
			continue
		}
		if c.size == 0 || t.known(c) {
			continue
		}
		fl, _, err := t.openNotedIf(c.path, func(fl *file, _ os.FileInfo) bool {
			// Not replaced, nor rewritten in place, since listed.
			return fl.dev == c.dev && fl.ino == c.ino && headIs(fl, c.head)
		})
		if errors.Is(err, errNotKept) {
			t.rediscover = true
		}
		if err != nil {
			continue
		}
		c.used = true
		fl.birth = c.birth
		t.stats.Discovered.Add(1)
		level.Info(t.logger).Log("msg", "found a rotated log file never read; reading it from its start", "file", filepath.Base(c.path))
		t.keepReading(fl)
	}
}

// headIs reports whether the file begins with head.
func headIs(fl *file, head []byte) bool {
	var b [headLen]byte
	n, _ := fl.f.ReadAt(b[:len(head)], 0)
	return n == len(head) && bytes.Equal(b[:n], head)
}

// addDone remembers a file read to its end, so that a sibling with its
// content is not taken for a new one; the last maxDone are kept.
func (t *Tailer) addDone(p FilePos) {
	if p.HeadLen == 0 {
		return
	}
	t.done = append(t.done, p)
	if len(t.done) > maxDone {
		t.done = append(t.done[:0], t.done[len(t.done)-maxDone:]...)
	}
}

// maxDone bounds the finished files remembered per path: more than
// logrotate keeps uncompressed (the log, .1 and, with delaycompress, .2).
const maxDone = 16

// startFresh opens the path with no saved position: at its end, or at its
// start with FromBeginning. A path that does not exist yet is opened by
// checkPath when it appears, and read from its start.
func (t *Tailer) startFresh() {
	fl, fi, err := t.openNoted(t.opts.Path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			t.problem("cannot open the log", err)
		}
		return
	}
	off := int64(0)
	if !t.opts.FromBeginning {
		off = fi.Size()
	}
	if err := fl.seek(off); err != nil {
		t.problem("cannot read the log at its end; reading it from the start", err)
		fl.seek(0)
	}
	if r := fl.rtail.bytes(); len(r) > 0 && r[len(r)-1] != '\n' {
		// Starting at the end inside a line being written: skip its rest.
		fl.skipPos = fl.pos()
		fl.skipping = true
	}
	t.cur = fl
}
