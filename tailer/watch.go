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
)

// watcher turns inotify events on the log's directory into wake-ups. It
// watches the directory, not the file, to see renames and re-creations.
// When inotify is unavailable (no permission on the directory, too many
// watches, another OS) it is inactive and the tailer polls.
type watcher struct {
	w      *fsnotify.Watcher
	wake   chan struct{} // the log was written
	rotate chan struct{} // a file was created, renamed or removed: read now
	// created holds the log files the watcher opened the moment they were
	// created: a file deleted again before the tailer gets to it can
	// still be read through its descriptor.
	created chan *os.File
	path    string
	rot     *os.File // inotify for creations, deletions and renames only
	done    chan struct{}
	wg      sync.WaitGroup
	// fastUntil (Unix nanoseconds): until then the paused watcher pauses
	// watchPause only, not idlePause: logrotate is at work.
	fastUntil atomic.Int64
	kick      chan struct{} // ends a pause early when fastUntil was set
	// vanished counts log files created and deleted before they could be
	// opened; missed: the last one created could not be opened.
	vanished atomic.Uint64
	missed   bool
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

func newWatcher(opts Options, logger log.Logger) *watcher {
	wt := &watcher{wake: make(chan struct{}, 1), rotate: make(chan struct{}, 1), kick: make(chan struct{}, 1), created: make(chan *os.File, 16), path: opts.Path, done: make(chan struct{})}
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
	if err := wt.watchRotations(dir, base); err != nil {
		level.Warn(logger).Log("msg", "cannot watch the log's directory for rotations; they are seen with the writes", "dir", dir, "err", err)
	}
	wt.wg.Add(1)
	go wt.loop(base, min(opts.MinInterval, watchPause), min(opts.MinInterval, idlePause))
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
func (wt *watcher) watchRotations(dir, base string) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM|unix.IN_DELETE|unix.IN_CLOSE_WRITE); err != nil {
		unix.Close(fd)
		return err
	}
	wt.rot = os.NewFile(uintptr(fd), "inotify") // non-blocking: Close ends a Read
	wt.wg.Add(1)
	go func() {
		defer wt.wg.Done()
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
				wt.rotEvent(string(name), base, ev.Mask)
			}
		}
	}()
	return nil
}

// rotEvent handles one event of watchRotations' descriptor. A log
// created and deleted again before hold could open it is gone with its
// lines: nobody can read it any more. That is counted (vanished), so
// that the loss is not silent; one renamed away instead may still be
// found next to the log.
func (wt *watcher) rotEvent(name, base string, mask uint32) {
	if !strings.HasPrefix(name, base) {
		return // another file in a shared directory
	}
	if name == base {
		switch {
		case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			// Created, or renamed into place: held at once.
			wt.missed = !wt.hold() && mask&unix.IN_CREATE != 0
		case mask&unix.IN_DELETE != 0 && wt.missed:
			wt.vanished.Add(1)
			wt.missed = false
		case mask&unix.IN_MOVED_FROM != 0:
			wt.missed = false
		}
	}
	wt.rotating()
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

func (wt *watcher) loop(base string, fast, slow time.Duration) {
	defer wt.wg.Done()
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
			wt.hold()
		}
		wt.rotating()
	}
}

// hold opens the log just created and hands the descriptor to the tailer.
// It reports whether the path could be opened.
func (wt *watcher) hold() bool {
	f, err := os.OpenFile(wt.path, os.O_RDONLY|oNoBlock, 0)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // not ours to read: the tailer finds out
	}
	select {
	case wt.created <- f:
	default: // the tailer is far behind; it finds the file by polling
		f.Close()
	}
	return true
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
	for {
		select {
		case f := <-wt.created:
			f.Close()
		default:
			return
		}
	}
}
