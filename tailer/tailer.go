// Package tailer follows a log file the way a log collector must when every
// line has to be counted exactly once: across rename+reopen rotation (the
// old file is read to its end, and for a while after, before it is let go),
// copytruncate, deletion and later re-creation, a partial last line, and
// restarts of the process (the read position lives in a state file, and a
// file replaced meanwhile is recognised by its identity: device, inode and
// birth time, with content fingerprints to check the position; files
// that begin with the same bytes stay apart).
// Change notification (inotify through fsnotify) only wakes the reader;
// polling finds every change too, so a directory inotify cannot watch
// still works.
package tailer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
	"github.com/krb5-exporter/krb5-exporter/logging"
)

// LineHandler receives each line without its newline. The slice is valid
// only during the call. truncated marks a line cut at the length limit.
type LineHandler func(line []byte, truncated bool)

// LinesHandler, if set (Options.Lines), receives the complete lines a read
// returned at once, each with its newline: buf holds whole lines only, and
// the handler returns how many (its newlines: it splits them anyway). It
// is what LineHandler gets line by line (never a truncated line, which
// still goes to the LineHandler), without a call a line.
type LinesHandler func(buf []byte) (lines uint64)

// sink is where a file's lines go.
type sink struct {
	line  LineHandler
	lines LinesHandler
	flush func()
}

// done ends a batch of n lines.
func (s sink) done(n uint64, st *Stats) {
	if n == 0 {
		return
	}
	if s.flush != nil {
		s.flush()
	}
	st.Lines.Add(n)
}

// Options configure a Tailer.
type Options struct {
	Path string
	// FromBeginning reads an existing file from its start when no position
	// is saved; otherwise reading starts at its end. A file that appears
	// after the tailer started is always read from its start.
	FromBeginning bool
	// PollInterval is the longest time between two checks of the file.
	PollInterval time.Duration
	// RotateWait is how long a renamed or deleted file is still read after
	// its replacement appeared (the daemon writes to it until it reopens).
	RotateWait time.Duration
	// MaxLineBytes cuts longer lines (default 64 KiB).
	MaxLineBytes int
	// BufferBytes is the read buffer per open file (default 256 KiB).
	BufferBytes int
	// MinInterval is the shortest time between two reads when change
	// notifications arrive faster (default 1s, at most PollInterval): a
	// quiet log is read as soon as a line arrives, a busy one (a KDC writes
	// a line per request) in batches, which is what keeps the cost low:
	// under 1% of a core at 20,000 lines per second.
	MinInterval time.Duration
	// NoInotify disables change notification (polling only).
	NoInotify bool
	// Flush, if set, is called after every batch of lines handed on and
	// before Stats.Lines counts them: a handler that counts lines locally
	// publishes its counts there.
	Flush func()
	// Lines, if set, receives the complete lines of a read at once
	// (LinesHandler); New's LineHandler then gets only the cut ones and
	// those handed on one at a time (a rotated file's last line).
	Lines LinesHandler

	// gate, in tests, holds back the reading of inotify events until it
	// is closed: a process not scheduled while the writer rotates.
	gate <-chan struct{}
	// restored, in tests, is called by Run right after the saved positions
	// were restored, before the first read.
	restored func(*Tailer)
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.RotateWait <= 0 {
		o.RotateWait = 30 * time.Second
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = 64 << 10
	}
	if o.BufferBytes <= o.MaxLineBytes {
		o.BufferBytes = max(256<<10, 2*o.MaxLineBytes)
	}
	if o.MinInterval <= 0 {
		o.MinInterval = time.Second
	}
	if o.MinInterval > o.PollInterval {
		o.MinInterval = o.PollInterval
	}
	return o
}

// Tailer follows one path.
type Tailer struct {
	opts   Options
	logger log.Logger
	store  *Positions
	stats  *Stats
	handle sink

	cur  *file     // the file the path names; nil while it does not exist
	old  []*file   // renamed or deleted files still being read
	done []FilePos // files read to their end (see Position.Done)
	now  func() time.Time

	lastLook time.Time      // when checkPath last looked at the directory
	w        *watcher       // its queue: log files opened on their creation or rename
	vanished *atomic.Uint64 // log files gone before anyone could open them
	// afterTrunc: the current file was truncated and nothing of it has
	// been read since, so a second truncation would go unseen; its copy
	// is looked for after each read until something was read.
	afterTrunc bool
	// rediscover: a rotated file was being rewritten when discover
	// looked (copytruncate's copy replacing the last one in place): what
	// it holds is decided at the next look, once it has settled.
	rediscover bool
	// listed, if set (tests), runs between the stat and the read of a
	// rotated file's first bytes when candidates lists it.
	listed func(path string)

	problems *logging.Changes // the problem logged last, so a lasting one is logged once

	// Timings that SetTimings changes while Run runs; opts keeps the
	// values New was given.
	pollInterval atomic.Int64  // time.Duration
	rotateWait   atomic.Int64  // time.Duration
	minInterval  time.Duration // as configured, before the PollInterval cap
	retimed      chan struct{}

	cycled chan struct{} // closed after Run's first cycle (Ready)
}

// problem counts a read error and logs it unless it is the one logged
// last: a file the exporter may not read is checked every second.
func (t *Tailer) problem(msg string, err error) {
	t.stats.ReadErrors.Add(1)
	if _, _, changed := t.problems.Note("", msg+": "+err.Error()); changed {
		level.Warn(t.logger).Log("msg", msg, "err", err)
	}
}

// fine notes that the path could be opened, so the next problem is
// logged; the recovery itself is not (the lines read say it).
func (t *Tailer) fine() { t.problems.Note("", "") }

// New returns a Tailer; Run starts it. store may be shared by tailers of
// different paths; stats must not be nil.
func New(opts Options, logger log.Logger, store *Positions, stats *Stats, h LineHandler) *Tailer {
	minInterval := opts.MinInterval
	opts = opts.withDefaults()
	if minInterval <= 0 {
		minInterval = time.Second
	}
	t := &Tailer{
		opts:        opts,
		logger:      log.With(logger, "path", opts.Path),
		store:       store,
		stats:       stats,
		handle:      sink{line: h, lines: opts.Lines, flush: opts.Flush},
		now:         time.Now,
		minInterval: minInterval,
		retimed:     make(chan struct{}, 1),
		cycled:      make(chan struct{}),
		problems:    logging.NewChanges(nil),
	}
	t.pollInterval.Store(int64(opts.PollInterval))
	t.rotateWait.Store(int64(opts.RotateWait))
	return t
}

// Ready is closed once Run has opened the files it follows, restored
// their positions, started watching the directory and read them once:
// from then on a file deleted by a rotation is held open, not lost.
func (t *Tailer) Ready() <-chan struct{} { return t.cycled }

// SetTimings changes PollInterval and RotateWait (zero: the default) of a
// Tailer, also while Run runs. Changing them must not restart the tailer:
// that would close a renamed or deleted log the daemon still writes to,
// and its lines would be lost. A new RotateWait applies to rotations found
// from now on.
func (t *Tailer) SetTimings(pollInterval, rotateWait time.Duration) {
	o := Options{PollInterval: pollInterval, RotateWait: rotateWait}.withDefaults()
	t.pollInterval.Store(int64(o.PollInterval))
	t.rotateWait.Store(int64(o.RotateWait))
	select {
	case t.retimed <- struct{}{}:
	default: // Run has a wake-up pending already
	}
}

func (t *Tailer) rotateWaitNow() time.Duration { return time.Duration(t.rotateWait.Load()) }

// Run follows the file until ctx ends, then records the position of the
// last complete line handed on (a partial line is read again next time)
// and closes its files.
func (t *Tailer) Run(ctx context.Context) {
	defer t.closeAll()
	stop := func() bool { return ctx.Err() != nil }
	// The directory is watched before the saved positions are restored:
	// a file created while restore looks (or before the first read) and
	// rotated away at once is opened by the watcher on its creation, and
	// one it cannot open is counted. Watching only after restore left a
	// gap in which a file could come and go unseen and uncounted.
	w := newWatcher(t.opts, t.logger)
	defer w.close()
	t.w = w
	t.vanished = &w.vanished
	t.stats.Inotify.Store(w.active())
	t.restore()
	if t.opts.restored != nil {
		t.opts.restored(t)
	}

	curPoll := time.Duration(t.pollInterval.Load())
	poll := time.NewTicker(curPoll)
	defer poll.Stop()
	last := time.Time{}
	first := true
	// After a rotation event (a file created, renamed or deleted next to
	// the log) reads are not batched for a while: a file created and
	// rotated away within one batch interval would otherwise never be
	// opened, and a copytruncate's copy could be replaced before the
	// truncation is seen.
	var hurryUntil time.Time
	hurry := max(t.minInterval, 100*time.Millisecond)
	for {
		if p := time.Duration(t.pollInterval.Load()); p != curPoll {
			curPoll = p
			poll.Reset(p)
		}
		if wait := min(t.minInterval, curPoll) - time.Since(last); wait > 0 && !time.Now().Before(hurryUntil) {
			select {
			case <-ctx.Done():
				t.drain()
				return
			case <-time.After(wait):
			case <-w.rotations():
				hurryUntil = time.Now().Add(hurry)
			}
		}
		last = time.Now()
		t.cycle(stop)
		t.save()
		if first {
			first = false
			close(t.cycled)
		}
		select {
		case <-ctx.Done():
			t.drain()
			return
		case <-poll.C:
		case <-w.events():
		case <-w.rotations():
			hurryUntil = time.Now().Add(hurry)
		case <-t.retimed:
		}
	}
}

// drainTime bounds the last read on the way out.
const drainTime = 5 * time.Second

// drain reads what the files hold once more before the tailer stops and
// saves the position: a rotated file the tailer holds open but that has
// no name any more (replaced by the next rotation) is gone once closed,
// and so are the lines in it not read yet.
func (t *Tailer) drain() {
	deadline := time.Now().Add(drainTime)
	t.cycle(func() bool { return time.Now().After(deadline) })
	t.finishUnlinked()
	t.save()
}

// finishUnlinked lets go of the rotated files that have no name any more
// once the daemon writes to the file the path names: nothing can be added
// to them, and a restart could not open them again. They are saved as
// read to their end, not as rotated files a restart must find: only a
// file that may still get lines counts as lost when it is gone then.
func (t *Tailer) finishUnlinked() {
	if t.cur == nil || t.cur.readOff == 0 {
		return // the daemon may not have reopened its log yet
	}
	kept := t.old[:0]
	for _, o := range t.old {
		if fi, err := o.f.Stat(); err == nil && nlink(fi) == 0 && o.readOff == fi.Size() {
			o.flushPartial(t.handle, t.stats)
			t.addDone(o.pos())
			o.close()
			continue
		}
		kept = append(kept, o)
	}
	clear(t.old[len(kept):])
	t.old = kept
}

// save publishes the current position to the store.
func (t *Tailer) save() {
	p := Position{Done: t.done, Saved: t.now().UnixNano()}
	if t.cur != nil {
		fp := t.cur.pos()
		p.Current = &fp
	}
	for _, o := range t.old {
		p.Rotated = append(p.Rotated, o.pos())
	}
	t.store.Set(t.opts.Path, p)
}

func (t *Tailer) closeAll() {
	if t.cur != nil {
		t.cur.close()
	}
	for _, o := range t.old {
		o.close()
	}
	t.stats.Open.Store(false)
}

// cycle reads every open file, then looks at what the path names now.
func (t *Tailer) cycle(stop func() bool) {
	behind := int64(0)
	now := t.now()
	kept := t.old[:0]
	for _, o := range t.old {
		size, err := o.readLines(t.handle, t.opts.MaxLineBytes, t.stats, stop)
		if err != nil {
			t.problem("reading a rotated file failed; letting it go", err)
			o.close()
			continue
		}
		if now.After(o.deadline) && !stop() {
			o.flushPartial(t.handle, t.stats)
			t.addDone(o.pos())
			o.close()
			continue
		}
		behind += size - o.readOff
		kept = append(kept, o)
	}
	clear(t.old[len(kept):])
	t.old = kept
	nOld := len(t.old)
	// Nothing read of the current file yet: a truncation now would go
	// unseen (see afterTrunc).
	fresh := t.cur != nil && t.cur.readOff == 0

	if t.cur != nil {
		size, err := t.cur.readLines(t.handle, t.opts.MaxLineBytes, t.stats, stop)
		switch {
		case errors.Is(err, errRewritten):
			t.truncated()
			if size, err := t.cur.readLines(t.handle, t.opts.MaxLineBytes, t.stats, stop); err == nil {
				behind += size - t.cur.readOff
			}
		case err != nil:
			t.problem("reading the log failed", err)
		default:
			behind += size - t.cur.readOff
		}
	}
	if stop() {
		return
	}
	t.adoptCreated()
	if t.w != nil && t.w.needsPrune() {
		t.pruneIDs()
	}
	if ((t.afterTrunc || fresh) && t.cur != nil) || t.rediscover {
		// What was read of the file since its truncation (its first
		// bytes) tells a copy of it from the copy of a second truncation
		// made before anything was read.
		t.rediscover = false
		since := t.lastLook.Add(-discoverSlack)
		t.discover(t.candidates(since), since)
		t.afterTrunc = t.cur != nil && t.cur.readOff == 0
	}
	if t.checkPath() {
		// A file that just appeared: read it in this cycle.
		size, err := t.cur.readLines(t.handle, t.opts.MaxLineBytes, t.stats, stop)
		if err == nil {
			behind += size - t.cur.readOff
		}
	}
	// Files just found (a truncation's copy, rotated files never open):
	// read them now, they may be replaced before the next cycle.
	for _, o := range t.old[nOld:] {
		if size, err := o.readLines(t.handle, t.opts.MaxLineBytes, t.stats, stop); err == nil {
			behind += size - o.readOff
		}
	}
	t.stats.BytesBehind.Store(behind)
	t.stats.Open.Store(t.cur != nil)
}

// checkPath notices a rename, deletion or (re)creation of the path and
// reports whether a new file is now current.
func (t *Tailer) checkPath() bool {
	since := t.lastLook
	t.lastLook = t.now()
	if since.IsZero() {
		// The first look: restore has looked for files rotated away
		// while stopped; with no saved position older files are old.
		since = t.lastLook
	}
	fi, err := os.Stat(t.opts.Path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			t.problem("cannot stat the log", err)
		}
		// Gone for now: keep reading the open file, the daemon may still
		// write to it until it reopens its log. A file created and
		// rotated away meanwhile is read now.
		t.discover(t.candidates(since.Add(-discoverSlack)), since.Add(-discoverSlack))
		return false
	}
	dev, ino := fileID(fi)
	if t.cur != nil && t.cur.dev == dev && t.cur.ino == ino {
		return false
	}
	nf := t.takeOld(dev, ino) // held since its creation, read already
	if nf == nil {
		if nf, err = t.openPath(); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				t.problem("cannot open the log", err)
			}
			return false
		}
		if t.cur != nil && t.cur.dev == nf.dev && t.cur.ino == nf.ino {
			nf.close() // replaced again between the stat and the open
			return false
		}
		if o := t.takeOld(nf.dev, nf.ino); o != nil {
			nf.close()
			nf = o
		}
	}
	t.fine()
	if t.cur != nil {
		kind := RotationRename
		if cfi, err := t.cur.f.Stat(); err == nil && nlink(cfi) == 0 {
			kind = RotationDelete
		}
		t.stats.rotated(kind, t.now())
		level.Info(t.logger).Log("msg", "log rotated; reading the old file on for a while", "how", RotationNames[kind], "rotate_wait", t.rotateWaitNow())
		t.cur.deadline = t.now().Add(t.rotateWaitNow())
		t.old = append(t.old, t.cur)
	}
	t.cur = nf // a new file: every line in it is new
	// Files created and rotated away since the last look were never open.
	t.discover(t.candidates(since.Add(-discoverSlack)), since.Add(-discoverSlack))
	return true
}

// openPath opens the path; see openNoted.
func (t *Tailer) openPath() (*file, error) {
	nf, _, err := t.openNoted(t.opts.Path)
	return nf, err
}

// openNoted opens path; the watcher learns of the file in the same step,
// so that it does not count it as missed. See openNotedIf.
func (t *Tailer) openNoted(path string) (*file, os.FileInfo, error) {
	return t.openNotedIf(path, nil)
}

// errNotKept: openNotedIf's keep turned the file down.
var errNotKept = errors.New("not the file looked for")

// openNotedIf opens path and, if keep (nil: any file) takes it, tells the
// watcher in the same step, under its lock. A file opened and turned
// down (replaced between a listing and the open, or not the file a
// position was saved in) is not noted: the watcher, finding a file noted,
// leaves it to the tailer, and one the tailer does not keep would be
// lost. The lock covers the open and keep's checks (small reads), not
// the allocation of the read buffer.
func (t *Tailer) openNotedIf(path string, keep func(*file, os.FileInfo) bool) (*file, os.FileInfo, error) {
	if t.w != nil {
		t.w.mu.Lock()
	}
	nf, fi, err := openFile(path, 0)
	if err == nil && keep != nil && !keep(nf, fi) {
		nf.close()
		nf, err = nil, errNotKept
	}
	if t.w != nil {
		if err == nil {
			t.w.note(nf.f)
		}
		t.w.mu.Unlock()
	}
	if err == nil {
		nf.buf = make([]byte, t.opts.BufferBytes)
	}
	return nf, fi, err
}

// pruneIDs lets the watcher forget the files nobody can open again: the
// ones neither held here nor named by the path or a rotated name.
func (t *Tailer) pruneIDs() {
	keep := map[fileKey]bool{}
	held := func(fl *file) {
		if fl != nil && fl.f != nil {
			keep[fileKey{fl.dev, fl.ino, fl.birth}] = true
			if k, ok := keyOf(fl.f); ok {
				keep[k] = true
			}
		}
	}
	held(t.cur)
	for _, o := range t.old {
		held(o)
	}
	names := []string{t.opts.Path}
	for _, s := range siblings(t.opts.Path) {
		names = append(names, s.path)
	}
	for _, p := range names {
		f, _, err := safefile.Open(p, 0)
		if err != nil {
			continue
		}
		k, _ := keyOf(f)
		keep[k] = true
		f.Close()
	}
	t.w.prune(keep)
}

// adoptCreated takes the files the watcher opened when they were created
// and reads them from their start. Their descriptor is kept even when the
// path still names the file: checkPath makes it the current file then.
// Closing it and opening the path again later would lose a file renamed
// or deleted in between (a rotation faster than the reads).
func (t *Tailer) adoptCreated() {
	if t.vanished != nil {
		if n := t.vanished.Swap(0); n > 0 {
			t.stats.Unread.Add(n)
			level.Warn(t.logger).Log("msg", "log files were renamed over or deleted before they could be opened (rotated faster than this process was scheduled); their lines are not counted", "files", n)
		}
	}
	var queued []*os.File
	if t.w != nil {
		queued = t.w.take()
	}
	for _, f := range queued {
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			f.Close()
			continue
		}
		dev, ino := fileID(fi)
		held := t.cur != nil && t.cur.dev == dev && t.cur.ino == ino
		for _, o := range t.old {
			held = held || (o.dev == dev && o.ino == ino)
		}
		if held {
			f.Close()
			continue
		}
		fl := &file{f: f, buf: make([]byte, t.opts.BufferBytes), dev: dev, ino: ino, birth: birth(f)}
		if pfi, err := os.Stat(t.opts.Path); err != nil || !os.SameFile(fi, pfi) {
			t.stats.Discovered.Add(1)
			level.Info(t.logger).Log("msg", "a log file was created and rotated away before it was read; reading it from its start")
		}
		t.keepReading(fl)
	}
}

// takeOld removes the file dev, ino from the rotated files being read
// and returns it (nil if there is none): a file adopted at its creation
// that the path names.
func (t *Tailer) takeOld(dev, ino uint64) *file {
	for i, o := range t.old {
		if o.dev == dev && o.ino == ino {
			t.old = append(t.old[:i], t.old[i+1:]...)
			return o
		}
	}
	return nil
}

// discoverSlack widens the window in which a file never seen counts as
// new, for file systems with coarse timestamps.
const discoverSlack = 2 * time.Second

// truncated handles a current file that shrank or was rewritten under us:
// the lines between our position and the truncation are in the copy
// logrotate made (copytruncate), if it can be found; then the file is read
// again from its start.
func (t *Tailer) truncated() {
	t.stats.rotated(RotationTruncate, t.now())
	fl := t.cur
	var found string
	before := fl.pos()
	if before.HashLen > 0 {
		var copied FilePos
		if found, copied = t.drainCopy(before, fl); found != "" {
			// The copy is a file of its own: known by its identity
			// from now on, so that it is not taken for a new one.
			t.addDone(copied)
		}
	}
	t.addDone(before)
	if found != "" {
		level.Info(t.logger).Log("msg", "log truncated (copytruncate); read the rest of the copy", "copy", found, "copy_from", fl.off)
	} else {
		t.stats.Unread.Add(1)
		level.Warn(t.logger).Log("msg", "log truncated and no copy of it found next to it; lines written between the last read and the truncation, if any, are not counted", "offset", fl.off)
	}
	fl.skipping = false
	fl.seek(0)
	t.afterTrunc = true // copies of later truncations: see cycle
}

// drainCopy looks for a sibling of the path holding cur's content at
// pos (the copy copytruncate made, while we ran or were stopped), reads it
// on from there to its end and returns its path and final position; ""
// if there is none.
func (t *Tailer) drainCopy(pos FilePos, cur *file) (string, FilePos) {
	for _, c := range siblings(t.opts.Path) {
		if c.size < pos.Offset || (c.dev == cur.dev && c.ino == cur.ino) {
			continue
		}
		if cp := t.openAt(c.path, pos); cp != nil {
			cp.readLines(t.handle, t.opts.MaxLineBytes, t.stats, func() bool { return false })
			cp.flushPartial(t.handle, t.stats)
			end := cp.pos()
			cp.close()
			t.stats.CopyFound.Add(1)
			return c.path, end
		}
	}
	return "", FilePos{}
}

// openAt opens path and positions it at pos if its first bytes and the
// bytes before pos.Offset match pos's fingerprints.
func (t *Tailer) openAt(path string, pos FilePos) *file {
	fl, fi, err := openFile(path, t.opts.BufferBytes)
	if err != nil {
		return nil
	}
	if !atPos(pos)(fl, fi) {
		fl.close()
		return nil
	}
	return fl
}

// atPos checks that a freshly opened file holds pos (see matches) and
// positions it there.
func atPos(pos FilePos) func(*file, os.FileInfo) bool {
	return func(fl *file, fi os.FileInfo) bool {
		return fi.Size() >= pos.Offset && matches(fl, pos) && fl.seek(pos.Offset) == nil
	}
}

// matches checks the fingerprints of the file's first bytes and of the
// bytes before pos.Offset.
func matches(fl *file, pos FilePos) bool {
	if pos.HashLen == 0 {
		return pos.Offset == 0
	}
	if pos.HashLen > tailLen || int64(pos.HashLen) > pos.Offset || pos.HeadLen > headLen || int64(pos.HeadLen) > pos.Offset {
		return false
	}
	var w [headLen]byte
	if pos.HeadLen > 0 {
		n, err := fl.f.ReadAt(w[:pos.HeadLen], 0)
		if err != nil || n != pos.HeadLen || fnv64a(w[:n]) != pos.HeadHash {
			return false
		}
	}
	n, err := fl.f.ReadAt(w[:pos.HashLen], pos.Offset-int64(pos.HashLen))
	return err == nil && n == pos.HashLen && fnv64a(w[:n]) == pos.Hash
}

type sibling struct {
	path     string
	dev, ino uint64
	size     int64
	mtime    time.Time
}

// siblings lists the files next to path whose name extends its name, the
// names rotation gives (kdc.log.1, kdc.log-20240101); compressed ones are
// of no use.
func siblings(path string) []sibling {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []sibling
	for _, e := range entries {
		name := e.Name()
		if len(name) <= len(base) || name[:len(base)] != base {
			continue
		}
		switch filepath.Ext(name) {
		case ".gz", ".bz2", ".xz", ".zst", ".lz4", ".Z", ".zip":
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		dev, ino := fileID(fi)
		out = append(out, sibling{path: p, dev: dev, ino: ino, size: fi.Size(), mtime: fi.ModTime()})
	}
	return out
}
