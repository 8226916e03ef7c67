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
	w    *fsnotify.Watcher
	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

func newWatcher(opts Options, logger log.Logger) *watcher {
	wt := &watcher{wake: make(chan struct{}, 1), done: make(chan struct{})}
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
	go wt.loop(base, opts.MinInterval)
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
			wt.notify() // an overflow: something changed, look
		}
		// Take what is queued, then pause. While nobody reads, fsnotify
		// blocks and the kernel merges the identical IN_MODIFY events a
		// busy log raises with every line into one: a KDC writing 20,000
		// lines a second costs a few wake-ups, not 20,000.
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
				wt.notify()
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
// a read.
func (wt *watcher) event(ev fsnotify.Event, base string) {
	if strings.HasPrefix(filepath.Base(ev.Name), base) {
		wt.notify()
	}
}

func (wt *watcher) notify() {
	select {
	case wt.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

func (wt *watcher) active() bool { return wt.w != nil }

// events returns the wake-up channel; nil (never ready) when polling.
func (wt *watcher) events() <-chan struct{} {
	if wt.w == nil {
		return nil
	}
	return wt.wake
}

func (wt *watcher) close() {
	if wt.w == nil {
		return
	}
	close(wt.done)
	wt.w.Close()
	wt.wg.Wait()
}
