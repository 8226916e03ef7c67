package tailer

import (
	"errors"
	"os"

	"github.com/go-kit/log/level"
)

// restore opens the files the saved position names, or starts afresh.
func (t *Tailer) restore() {
	pos, ok := t.store.Get(t.opts.Path)
	if !ok {
		t.startFresh()
		return
	}
	for _, rp := range pos.Rotated {
		if fl := t.findByInode(rp); fl != nil {
			fl.deadline = t.now().Add(t.rotateWaitNow())
			t.old = append(t.old, fl)
		} else {
			t.stats.Mismatches[MismatchRotatedLost].Add(1)
			level.Warn(t.logger).Log("msg", "a rotated log file still being read at the last stop is gone; lines written to it after the stop are lost", "inode", rp.Ino, "offset", rp.Offset)
		}
	}
	if pos.Current == nil {
		return // the path did not exist: a file there now is all new, checkPath opens it
	}
	cp := *pos.Current
	fl, fi, err := openFile(t.opts.Path, t.opts.BufferBytes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.problem("cannot open the log", err)
	}
	if err == nil && fl.dev == cp.Dev && fl.ino == cp.Ino {
		switch {
		case fi.Size() < cp.Offset:
			t.stats.Mismatches[MismatchTruncated].Add(1)
			level.Warn(t.logger).Log("msg", "log is shorter than the saved position: truncated while stopped; reading it from the start", "size", fi.Size(), "offset", cp.Offset)
			t.drainSavedCopy(cp, fl)
			fl.seek(0)
		case !matches(fl, cp):
			t.stats.Mismatches[MismatchRewritten].Add(1)
			level.Warn(t.logger).Log("msg", "log content at the saved position differs: rewritten while stopped; reading it from the start", "offset", cp.Offset)
			t.drainSavedCopy(cp, fl)
			fl.seek(0)
		default:
			if err := fl.seek(cp.Offset); err != nil {
				t.problem("cannot read the log at the saved position; reading it from the start", err)
				fl.seek(0)
			}
		}
		t.cur = fl
		return
	}
	// The path names another file, or none: the file we read was rotated
	// while we were stopped. Read it on if it is still around.
	if old := t.findByInode(cp); old != nil {
		t.stats.Mismatches[MismatchRotatedRecovered].Add(1)
		level.Info(t.logger).Log("msg", "log was rotated while stopped; reading the rotated file on from the saved position", "offset", cp.Offset)
		old.deadline = t.now().Add(t.rotateWaitNow())
		t.old = append(t.old, old)
	} else {
		t.stats.Mismatches[MismatchRotatedLost].Add(1)
		level.Warn(t.logger).Log("msg", "log was replaced while stopped and the old file is gone; its lines after the saved position are lost", "offset", cp.Offset)
	}
	if err == nil {
		fl.seek(0)
		t.cur = fl
	}
}

// startFresh opens the path with no saved position: at its end, or at its
// start with FromBeginning. A path that does not exist yet is opened by
// checkPath when it appears, and read from its start.
func (t *Tailer) startFresh() {
	fl, fi, err := openFile(t.opts.Path, t.opts.BufferBytes)
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

// findByInode finds the file pos names among the path's siblings (a
// rename keeps the inode) and opens it at pos.
func (t *Tailer) findByInode(pos FilePos) *file {
	for _, c := range siblings(t.opts.Path) {
		if c.dev == pos.Dev && c.ino == pos.Ino {
			if fl := t.openAt(c.path, pos, true); fl != nil {
				return fl
			}
		}
	}
	return nil
}

// drainSavedCopy reads on the copy of a log truncated while we were stopped.
func (t *Tailer) drainSavedCopy(pos FilePos, cur *file) {
	if p := t.drainCopy(pos, cur); p != "" {
		level.Info(t.logger).Log("msg", "found the copy of the truncated log and read it on from the saved position", "copy", p)
	}
}
