package bench

import (
	"bytes"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// StatePeriod is how often, on average, the state sampler looks at the
// serving KDC processes during a test. Each look is one pread of /proc/PID/stat per
// serving process (the files stay open), a few µs of the generator's CPU.
var StatePeriod = 2 * time.Millisecond

// stateMaxRun bounds one test's state sampling (a test left running).
const stateMaxRun = 30 * time.Minute

// kdcStates counts what the serving KDC processes were doing, in
// core-ticks: per tick at most the cores the KDC may use are counted,
// running first (R: running or runnable), then waiting for the disk (D:
// uninterruptible, krb5kdc's database writes and fsyncs); the rest of the
// cores were idle (S: waiting for requests, or anything else).
type kdcStates struct {
	ticks, coreTicks, running, disk atomic.Int64
	cores                           atomic.Int64 // set by sampler.read from coresOf
}

// stateFiles holds /proc/PID/stat open for the serving processes.
type stateFiles struct {
	pids  []int // the sampler's pid list these were opened for
	files []*os.File
	buf   []byte
}

func (f *stateFiles) close() {
	for _, x := range f.files {
		x.Close()
	}
	f.files, f.pids = nil, nil
}

// open opens the stat files of the serving processes among pids: not the
// parent of another (the supervisor of krb5kdc -w serves no request).
func (f *stateFiles) open(pids []int) {
	f.close()
	f.pids = pids
	for _, p := range servingOf(pids) {
		if x, err := os.Open("/proc/" + strconv.Itoa(p) + "/stat"); err == nil {
			f.files = append(f.files, x)
		}
	}
}

// servingOf drops the processes that are the parent of another in pids.
func servingOf(pids []int) []int {
	var out []int
	for _, p := range pids {
		parent := false
		for _, q := range pids {
			if q != p && ppidOf(q) == p {
				parent = true
				break
			}
		}
		if !parent {
			out = append(out, p)
		}
	}
	return out
}

// stateOf is the state letter in a /proc/PID/stat line ("pid (comm) S ...").
func stateOf(b []byte) byte {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// tick reads each serving process's state once and adds to st.
func (f *stateFiles) tick(st *kdcStates) {
	if len(f.files) == 0 {
		return
	}
	if f.buf == nil {
		f.buf = make([]byte, 512)
	}
	r, d := int64(0), int64(0)
	seen := 0
	for _, x := range f.files {
		n, _ := x.ReadAt(f.buf, 0) // io.EOF with the whole line
		switch stateOf(f.buf[:n]) {
		case 0:
			continue // gone
		case 'R':
			r++
		case 'D':
			d++
		}
		seen++
	}
	if seen == 0 {
		return
	}
	c := min(st.cores.Load(), int64(seen))
	if c <= 0 {
		c = 1
	}
	run := min(c, r)
	st.running.Add(run)
	st.disk.Add(min(c-run, d))
	st.coreTicks.Add(c)
	st.ticks.Add(1)
}

// runStates samples the KDC's states every StatePeriod (on average) until
// stop closes (or stateMaxRun passes), picking up the sampler's pid list
// as it changes. It runs on its own OS thread and sleeps in nanosleep, not
// on a Go timer: Go runs overdue timers when a goroutine of the process
// is scheduled, i.e. just after the generator sent something, so a timer
// looks at the KDC just after it was woken more often than by chance (a
// blocking client pausing between logins: 36 % sampled running against
// 18 % by its schedstat). The intervals are random (uniform within ±50 %)
// so they cannot fall in step with the generator's own period either.
func (s *sampler) runStates(stop <-chan struct{}) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var f stateFiles
	defer f.close()
	deadline := time.Now().Add(stateMaxRun)
	for {
		ts := unix.NsecToTimespec(int64(StatePeriod/2 + rand.N(StatePeriod)))
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
		select {
		case <-stop:
			return
		default:
		}
		if time.Now().After(deadline) {
			return
		}
		if pids := pidsOf(s); !slices.Equal(pids, f.pids) {
			f.open(pids)
		}
		f.tick(&s.states)
	}
}
