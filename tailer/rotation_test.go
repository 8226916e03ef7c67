package tailer

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// daemon writes numbered lines to a log the way krb5kdc does: through one
// open descriptor in append mode, which it reopens only when told (SIGHUP
// after logrotate). Some lines are written in two pieces, so the reader
// sees partial last lines.
type daemon struct {
	t    *testing.T
	path string

	mu      sync.Mutex // held by rotations that must not interleave with a write
	f       *os.File
	written int
	pad     string
}

func newDaemon(t *testing.T, path string) *daemon {
	d := &daemon{t: t, path: path, pad: strings.Repeat("x", 300)}
	d.reopen()
	return d
}

func (d *daemon) reopenLocked() {
	if d.f != nil {
		d.f.Close()
	}
	f, err := os.OpenFile(d.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		d.t.Error(err)
		return
	}
	d.f = f
}

func (d *daemon) reopen() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reopenLocked()
}

// writeBurst writes n lines; every seventh line in two writes with a pause.
func (d *daemon) writeBurst(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for range n {
		line := fmt.Sprintf("seq=%08d %s\n", d.written, d.pad)
		if d.written%7 == 3 {
			// The reader may see the first half alone; a rotation may
			// not come in between (krb5kdc writes a line in one write).
			io.WriteString(d.f, line[:40])
			time.Sleep(200 * time.Microsecond)
			io.WriteString(d.f, line[40:])
		} else {
			io.WriteString(d.f, line)
		}
		d.written++
	}
}

func (d *daemon) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.written
}

// TestRotationUnderLoad is the rotation test: a daemon appends
// lines continuously while the file is rotated many times with every
// method (rename and reopen, copytruncate, delete and re-create later) and
// the tailer is restarted in between, sometimes with a rotation while it
// is stopped. Every line written must be handed on exactly once.
func TestRotationUnderLoad(t *testing.T) {
	h := newHarness(t)
	h.opts.RotateWait = 5 * time.Second // the test waits for its lines, not for the wait
	h.opts.FromBeginning = true         // the daemon may write before the first open
	d := newDaemon(t, h.path)
	h.start()

	stopWriter := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for {
			select {
			case <-stopWriter:
				return
			default:
			}
			d.writeBurst(8) // about 3,000 lines per second with the pause below
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// waitDrained waits until every line written so far was handed on.
	waitDrained := func() {
		h.waitLines(d.count())
	}
	rename := func(i int) {
		d.mu.Lock()
		if err := os.Rename(h.path, h.path+".r"+strconv.Itoa(i)); err != nil {
			t.Error(err)
		}
		d.mu.Unlock()
		time.Sleep(15 * time.Millisecond) // lines still go to the renamed file
		d.reopen()                        // "SIGHUP": the daemon reopens its log
	}
	copytruncate := func(i int) {
		d.mu.Lock()
		defer d.mu.Unlock()
		data, err := os.ReadFile(h.path)
		if err == nil {
			err = os.WriteFile(h.path+".c"+strconv.Itoa(i), data, 0o644)
		}
		if err == nil {
			err = os.Truncate(h.path, 0)
		}
		if err != nil {
			t.Error(err)
		}
	}
	deleteLater := func(i int) {
		d.mu.Lock()
		os.Remove(h.path)
		d.mu.Unlock()
		time.Sleep(30 * time.Millisecond) // writes go to the deleted file
		d.reopen()                        // and later to a new one
	}

	methods := []func(int){rename, copytruncate, deleteLater}
	const rounds = 18
	for i := range rounds {
		time.Sleep(40 * time.Millisecond)
		method := methods[i%3]
		switch i % 4 {
		case 0, 1: // rotate while running
			method(i)
		case 2: // rotate, then restart
			method(i)
			if i%3 == 2 {
				// Lines in a deleted file exist only while someone holds it
				// open: let the tailer finish it before stopping.
				waitDrained()
			}
			h.stop()
			time.Sleep(30 * time.Millisecond)
			h.start()
		case 3: // restart with a rotation while stopped (not delete: see above)
			h.stop()
			time.Sleep(20 * time.Millisecond)
			if i%3 == 2 {
				rename(i)
			} else {
				method(i)
			}
			time.Sleep(20 * time.Millisecond)
			h.start()
		}
	}
	close(stopWriter)
	<-writerDone
	total := d.count()
	deadline := time.Now().Add(5 * time.Second)
	for h.recorder.count() < total && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // nothing may come twice, late
	h.stop()

	got := h.recorder.snapshot()
	seen := make([]int, total)
	for _, l := range got {
		n, err := strconv.Atoi(strings.TrimPrefix(l[:12], "seq="))
		if err != nil || n < 0 || n >= total || len(l) != 12+1+300 {
			t.Fatalf("malformed line %q", l[:min(len(l), 40)])
		}
		seen[n]++
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("line %d handed on %d times%s", n, c, whereIs(h.dir, n))
		}
	}
	if len(got) != total {
		t.Errorf("handed on %d lines, wrote %d", len(got), total)
	}
	t.Logf("%d lines, %d rotations, %d restarts", total, rounds, rounds/2)
}

// whereIs names the files holding line n, to explain a failure.
func whereIs(dir string, n int) string {
	key := fmt.Sprintf("seq=%08d ", n)
	entries, _ := os.ReadDir(dir)
	var in []string
	for _, e := range entries {
		data, _ := os.ReadFile(dir + "/" + e.Name())
		if i := strings.Index(string(data), key); i >= 0 {
			in = append(in, fmt.Sprintf("%s@%d/%d", e.Name(), i, len(data)))
		}
	}
	return fmt.Sprintf(" (in %v)", in)
}
