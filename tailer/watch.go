package tailer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/fsnotify/fsnotify"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// watcher turns inotify events on the log's directory into wake-ups. It
// watches the directory, not the file, to see renames and re-creations.
// When inotify is unavailable (no permission on the directory, too many
// watches, another OS) it is inactive and the tailer polls.
type watcher struct {
	w      *fsnotify.Watcher
	wake   chan struct{} // the log was written
	rotate chan struct{} // a file was created, renamed or removed: read now
	path   string
	dir    string
	rot    *os.File // inotify for creations, deletions and renames only
	done   chan struct{}
	wg     sync.WaitGroup
	// fastUntil (Unix nanoseconds): until then the paused watcher pauses
	// watchPause only, not idlePause: logrotate is at work.
	fastUntil atomic.Int64
	kick      chan struct{} // ends a pause early when fastUntil was set
	// vanished counts log files created (or renamed into place) that
	// neither the watcher nor the tailer could open before they were gone.
	vanished atomic.Uint64

	// mu orders the watcher's opens (event by event) and the tailer's own
	// opens of the path (note): a file counts as missed only when nobody
	// opened it before it could no longer be reached.
	mu sync.Mutex
	// queue holds the log files the watcher opened the moment inotify
	// reported them, in the order of the events: a file deleted or renamed
	// over before the tailer gets to it is still read through its
	// descriptor. Unbounded: dropping one would lose its lines.
	queue []*os.File
	// ids are the files the path named at the start or that were opened
	// since (by the watcher or the tailer), true once counted as a file
	// created since the watch began (opened); creates counts the files
	// that appeared under the path; credit counts files renamed on before
	// they could be opened (maybe found by the tailer later). vanished is
	// the excess of creates over opened+credit. ids is pruned (prune):
	// opened keeps the count of the files let go.
	ids      map[fileKey]bool
	opened   uint64
	creates  uint64
	credit   uint64
	reported uint64
	// since (Unix nanoseconds, on the clock file birth times come from,
	// see watchStart) is when the creation watch began: a file the tailer
	// opens (restoring its positions, finding a rotated file) was created
	// after it, and counts as one of the creations, only if it was born
	// then or later.
	since int64
	// pruneAt: ids is pruned when it holds that many keys (see prune).
	pruneAt int
	// counting is false where the count could be wrong: no birth time
	// (a reused inode would look like a file opened before), events lost
	// to a queue overflow, no rotation descriptor.
	counting bool
	// away and cookie: the last event was the log renamed away; its
	// IN_MOVED_TO (same cookie) names where it went.
	away   bool
	cookie uint32
}

// fileKey names a file for good: an inode number is reused at once, the
// birth time is not.
type fileKey struct {
	dev, ino uint64
	birth    int64
}

// keyOf is the identity of an open file; ok is false when the file
// system keeps no birth time.
func keyOf(f *os.File) (fileKey, bool) {
	fi, err := f.Stat()
	if err != nil {
		return fileKey{}, false
	}
	dev, ino := fileID(fi)
	b := birth(f)
	return fileKey{dev, ino, b}, b != 0
}

// watchPause and idlePause are how long the watcher leaves events queued
// in the kernel between two reads of them. While nobody reads, the kernel
// merges the identical IN_MODIFY events a busy log raises with every line
// into one: a KDC writing 20,000 lines a second costs 4 wake-ups a second
// (idlePause), not 20,000; the tailer reads once a second anyway. For
// fastTime after a sign of rotation the pause is watchPause: a
// copytruncate's truncation (a write event like any other) is then seen
// within it, before the next rotation can replace the copy. Renames,
// creations and deletions themselves arrive with no pause (watchRotations);
// the writes of a copy into an existing rotated file (cp onto kdc.log.1)
// within idlePause.
const (
	watchPause = 20 * time.Millisecond
	idlePause  = 250 * time.Millisecond
	fastTime   = time.Second
)

// newEventWatcher returns a watcher of path that reads no events yet.
func newEventWatcher(path string) *watcher {
	dir := filepath.Dir(path)
	wt := &watcher{wake: make(chan struct{}, 1), rotate: make(chan struct{}, 1), kick: make(chan struct{}, 1), path: path, dir: dir, done: make(chan struct{}), ids: map[fileKey]bool{}, counting: true, pruneAt: minPrune}
	// The file the path names now is not new: taken before the watch is
	// added, so that a file created in between is counted as created.
	if f, _, err := safefile.Open(path, 0); err == nil {
		if k, ok := keyOf(f); ok {
			wt.ids[k] = false // there before the watch: not a creation
		}
		f.Close()
	}
	return wt
}

func newWatcher(opts Options, logger log.Logger) *watcher {
	wt := newEventWatcher(opts.Path)
	if opts.NoInotify {
		return wt
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		level.Warn(logger).Log("msg", "inotify unavailable; polling the log", "poll_interval", opts.PollInterval, "err", err)
		return wt
	}
	dir, base := filepath.Split(opts.Path)
	if dir == "" {
		dir = "."
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		level.Warn(logger).Log("msg", "cannot watch the log's directory; polling the log", "dir", dir, "poll_interval", opts.PollInterval, "err", err)
		return wt
	}
	wt.w = w
	if err := wt.watchRotations(opts.gate, dir, base); err != nil {
		wt.counting = false
		level.Warn(logger).Log("msg", "cannot watch the log's directory for rotations; they are seen with the writes", "dir", dir, "err", err)
	}
	wt.wg.Add(1)
	go wt.loop(opts.gate, base, min(opts.MinInterval, watchPause), min(opts.MinInterval, idlePause))
	return wt
}

// watchRotations reads the directory's creations, renames, deletions and
// closes after writing on their own inotify descriptor, with no pause:
// a log file created and deleted again within milliseconds (a daemon
// catching up after a pause, logrotate run twice) is opened the moment it
// appears (hold), and the tailer reads it through that descriptor; a
// rotation (a copy closed by copytruncate before it truncates the log)
// wakes the tailer at once and makes the paused watcher fast. None of
// these is frequent: the log's own writes are left to the paused watcher.
func (wt *watcher) watchRotations(gate <-chan struct{}, dir, base string) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM|unix.IN_DELETE|unix.IN_CLOSE_WRITE); err != nil {
		unix.Close(fd)
		return err
	}
	wt.rot = os.NewFile(uintptr(fd), "inotify") // non-blocking: Close ends a Read
	since := watchStart()
	wt.mu.Lock()
	wt.since = since
	wt.mu.Unlock()
	wt.wg.Add(1)
	go func() {
		defer wt.wg.Done()
		if !wt.pass(gate) {
			return
		}
		var buf [16 << 10]byte
		for {
			n, err := wt.rot.Read(buf[:])
			if err != nil {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				name = name[:max(0, bytesIndexNUL(name))]
				off += unix.SizeofInotifyEvent + int(ev.Len)
				wt.rotEvent(string(name), base, ev.Mask, ev.Cookie)
			}
			wt.account()
		}
	}()
	return nil
}

// coarseNow reads the clock file birth times come from: the kernel's
// coarse real-time clock, up to a tick (1-10 ms) behind a fine reading.
func coarseNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		return time.Now().UnixNano()
	}
	return ts.Nano()
}

// watchStart returns, once the watch is in place, a time later than the
// birth of every file created before the call and no later than that of
// any file created after it returns: the coarse clock's next tick, waited
// for (one tick at most). A fine clock's reading was later than the birth
// of a file created just after it, which then looked older than the watch.
func watchStart() int64 {
	t0 := coarseNow()
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if t := coarseNow(); t > t0 {
			return t
		}
	}
	return coarseNow()
}

// rotEvent handles one event of watchRotations' descriptor. inotify
// reports names, not files: when several events are read at once (the
// process was not scheduled while the writer rotated in a burst), opening
// the path on each creation gives the newest file every time. So each
// event opens what it names before the next is handled: the log on its
// creation, and where the log was renamed to (the IN_MOVED_TO paired by
// cookie with the log's IN_MOVED_FROM) if it had not been opened yet. A
// file reached by neither, and not opened by the tailer either, was
// renamed over or deleted unread: counted (vanished), not lost silently.
func (wt *watcher) rotEvent(name, base string, mask, cookie uint32) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		wt.mu.Lock()
		wt.counting = false // events were lost: counts would be guesses
		wt.mu.Unlock()
		wt.rotating()
		return
	}
	if !strings.HasPrefix(name, base) {
		return // another file in a shared directory
	}
	wt.mu.Lock()
	switch {
	case name == base && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		wt.creates++
		wt.obtain(wt.path, false)
		wt.away = false
	case name == base && mask&unix.IN_MOVED_FROM != 0:
		wt.away, wt.cookie = true, cookie
	case mask&unix.IN_MOVED_TO != 0 && wt.away && cookie == wt.cookie:
		wt.away = false
		wt.obtain(filepath.Join(wt.dir, name), true)
	default:
		wt.away = false
	}
	wt.mu.Unlock()
	wt.rotating()
}

// obtain opens path and queues it for the tailer unless the file was
// opened before. renamed: path is where the log was just renamed to; if
// it is gone already, it was renamed on and may still be found.
// Called with mu held.
func (wt *watcher) obtain(path string, renamed bool) {
	f, _, err := safefile.Open(path, 0)
	if err != nil {
		if renamed || !errors.Is(err, os.ErrNotExist) {
			wt.credit++ // not known to be lost
		}
		return
	}
	k, ok := keyOf(f)
	wt.counting = wt.counting && ok
	if counted, seen := wt.ids[k]; seen {
		// Opened before (by the tailer, or there at the start). One not
		// counted yet that a creation names now was created since the
		// watch began (the tailer opened it first, with a birth time
		// from a coarse clock). Not so where the log was renamed to:
		// that names the file the log was, the one there at the start
		// too; counting it would hide a file missed.
		if !counted && !renamed {
			wt.ids[k] = true
			wt.opened++
		}
		f.Close()
		return
	}
	wt.ids[k] = true
	wt.opened++
	wt.queue = append(wt.queue, f)
}

// account moves the files known to be missed to vanished, after a batch
// of events: a creation whose file was gone is often followed by the
// rename that says where it went. It wakes the tailer to count them: the
// events' own wake-ups came before, and a tailer that ran in between saw
// none (with nothing else to wake it, the count waited for the next
// write or poll).
func (wt *watcher) account() {
	wt.mu.Lock()
	got := wt.opened + wt.credit
	missed := wt.counting && wt.creates > got && wt.creates-got > wt.reported
	if missed {
		wt.vanished.Add(wt.creates - got - wt.reported)
		wt.reported = wt.creates - got
	}
	wt.mu.Unlock()
	if missed {
		wt.notify(wt.rotate)
	}
}

// note records a file the tailer opened itself; call it with mu held
// (lock), from before the open, so that an open racing the watcher's is
// counted before the watcher decides the file is missed. A file counts
// as one of the creations only if it was born as the watch began or later (or
// when a creation event names it later, see obtain): the tailer also
// opens files older than the watch (restoring its positions, finding
// rotated files), and counting those would hide files missed.
func (wt *watcher) note(f *os.File) {
	k, ok := keyOf(f)
	wt.counting = wt.counting && ok
	if _, seen := wt.ids[k]; seen {
		return
	}
	if !ok || k.birth < wt.since {
		wt.ids[k] = false
		return
	}
	wt.ids[k] = true
	wt.opened++
}

// minPrune is the size of ids below which it is not pruned.
const minPrune = 64

// prune drops from ids the files that nobody can open again: not held
// (keep reports the files the tailer holds or that exist under the log's
// names), not queued. Their birth time is in the key, so a file created
// later with the same inode number is still new. Called by the tailer
// when ids reached pruneAt; the next prune waits until ids has doubled,
// so that a directory of many rotated files costs one listing per
// doubling, not one per creation.
func (wt *watcher) prune(keep map[fileKey]bool) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	for _, f := range wt.queue {
		k, _ := keyOf(f)
		keep[k] = true
	}
	for k := range wt.ids {
		if !keep[k] {
			delete(wt.ids, k)
		}
	}
	wt.pruneAt = max(minPrune, 2*len(wt.ids))
}

// needsPrune reports whether ids has reached pruneAt.
func (wt *watcher) needsPrune() bool {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return len(wt.ids) >= wt.pruneAt
}

// take returns the files queued since the last call, in event order.
func (wt *watcher) take() []*os.File {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	q := wt.queue
	wt.queue = nil
	return q
}

// bytesIndexNUL is the length of the NUL-padded name.
func bytesIndexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}

// rotating wakes the tailer for a rotation and makes the paused watcher
// fast for a while.
func (wt *watcher) rotating() {
	wt.fastUntil.Store(time.Now().Add(fastTime).UnixNano())
	wt.notify(wt.kick)
	wt.notify(wt.rotate)
}

// pass waits for a test's gate (nil: none); false if closed meanwhile.
func (wt *watcher) pass(gate <-chan struct{}) bool {
	if gate == nil {
		return true
	}
	select {
	case <-gate:
		return true
	case <-wt.done:
		return false
	}
}

func (wt *watcher) loop(gate <-chan struct{}, base string, fast, slow time.Duration) {
	defer wt.wg.Done()
	if !wt.pass(gate) {
		return
	}
	for {
		select {
		case <-wt.done:
			return
		case ev, ok := <-wt.w.Events:
			if !ok {
				return
			}
			wt.event(ev, base)
		case _, ok := <-wt.w.Errors:
			if !ok {
				return
			}
			wt.rotating() // an overflow: something changed, look now
		}
		// Take what is queued, then pause (see watchPause).
		for drained := false; !drained; {
			select {
			case ev, ok := <-wt.w.Events:
				if !ok {
					return
				}
				wt.event(ev, base)
			case _, ok := <-wt.w.Errors:
				if !ok {
					return
				}
				wt.rotating()
			default:
				drained = true
			}
		}
		pause := slow
		if time.Now().UnixNano() < wt.fastUntil.Load() {
			pause = fast
		}
		select {
		case <-wt.done:
			return
		case <-time.After(pause):
		case <-wt.kick:
		}
	}
}

// event wakes the tailer for events on the log and its rotated siblings;
// events for other files in a shared directory (/var/log) are not worth
// a read. A write to the log is routine; anything else (the log created,
// renamed or removed, a sibling created or written: logrotate at work) is
// a rotation, to be read at once.
func (wt *watcher) event(ev fsnotify.Event, base string) {
	name := filepath.Base(ev.Name)
	switch {
	case !strings.HasPrefix(name, base):
	case name == base && !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename):
		wt.notify(wt.wake)
	default:
		if name == base && ev.Has(fsnotify.Create) && wt.rot == nil {
			wt.mu.Lock()
			wt.counting = false // events read with a pause: no counts
			wt.obtain(wt.path, false)
			wt.mu.Unlock()
		}
		wt.rotating()
	}
}

func (wt *watcher) notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // a wake-up is pending already
	}
}

func (wt *watcher) active() bool { return wt.w != nil }

// events returns the wake-up channel for writes; nil (never ready) when
// polling.
func (wt *watcher) events() <-chan struct{} {
	if wt.w == nil {
		return nil
	}
	return wt.wake
}

// rotations returns the wake-up channel for rotations; nil when polling.
func (wt *watcher) rotations() <-chan struct{} {
	if wt.w == nil {
		return nil
	}
	return wt.rotate
}

func (wt *watcher) close() {
	if wt.w == nil {
		return
	}
	close(wt.done)
	wt.w.Close()
	if wt.rot != nil {
		wt.rot.Close()
	}
	wt.wg.Wait()
	for _, f := range wt.take() {
		f.Close()
	}
}
