package tailer

import (
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// watcher turns inotify events on the log's directory into wake-ups. It
// watches the directory, not the file, to see renames and re-creations.
// When inotify is unavailable (no permission on the directory, too many
// watches, another OS) it is inactive and the tailer polls.
type watcher struct {
	w      *fsnotify.Watcher
	wake   chan struct{} // the log was written
	rotate chan struct{} // a file was created, renamed or removed: read now
	done   chan struct{}
	wg     sync.WaitGroup
}

// watchPause is how long the watcher leaves events queued in the kernel
// between two reads of them. While nobody reads, the kernel merges the
// identical IN_MODIFY events a busy log raises with every line into one:
// a KDC writing 20,000 lines a second costs 20 wake-ups, not 20,000. It
// is also the longest delay before a rotation is acted upon.
const watchPause = 20 * time.Millisecond

func newWatcher(opts Options, logger log.Logger) *watcher {
	wt := &watcher{wake: make(chan struct{}, 1), rotate: make(chan struct{}, 1), done: make(chan struct{})}
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
	wt.wg.Add(1)
	go wt.loop(base, min(opts.MinInterval, watchPause))
	return wt
}

func (wt *watcher) loop(base string, pause time.Duration) {
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
			wt.notify(wt.rotate) // an overflow: something changed, look now
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
				wt.notify(wt.rotate)
			default:
				drained = true
			}
		}
		select {
		case <-wt.done:
			return
		case <-time.After(pause):
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
		wt.notify(wt.rotate)
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
	wt.wg.Wait()
}
