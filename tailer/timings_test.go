package tailer

import (
	"context"
	"testing"
	"time"

	"github.com/go-kit/log"
)

// TestSetTimings: a tailer that polls once an hour polls often as soon as
// SetTimings says so, without a restart (which would close its files).
func TestSetTimings(t *testing.T) {
	h := newHarness(t)
	store, err := OpenPositions("", log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	tl := New(Options{Path: h.path, FromBeginning: true, NoInotify: true, PollInterval: time.Hour, RotateWait: time.Hour},
		log.NewNopLogger(), store, &Stats{}, h.recorder.handle)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tl.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	tl.SetTimings(10*time.Millisecond, 0)
	if got := tl.rotateWaitNow(); got != 30*time.Second {
		t.Errorf("rotate wait %v after SetTimings(_, 0), want the default 30s", got)
	}
	appendFile(t, h.path, "seen without an hour's wait\n")
	h.waitLines(1)
}
