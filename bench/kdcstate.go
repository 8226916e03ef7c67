package bench

import (
	"bytes"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"
)

// DefaultStatePeriod is how often, on average, the state sampler looks at
// the serving KDC processes during a test (Suite.StatePeriod). Each look is one
// pread of /proc/PID/stat per serving process (the files stay open, ~5 µs
// each) on a Go timer; the wakeups cost more than the reads. In the as
// load (BenchmarkStateSamplerInLoad, 4 turns, load average 8) the
// generator spent 121 µs CPU per login without the sampler, 128 µs with it
// at 5 ms, 178 µs at 2 ms, 115 µs at 10 ms (the KDC 631–670 µs).
const DefaultStatePeriod = 5 * time.Millisecond

// stateMaxRun bounds one test's state sampling (a test left running).
const stateMaxRun = 30 * time.Minute

// kdcStates counts how often the serving KDC processes were waiting for
// the disk (D: uninterruptible, krb5kdc's database writes and syncs), in
// core-ticks: per look at most the cores the KDC may use are counted.
type kdcStates struct {
	ticks, coreTicks, disk atomic.Int64
	cores                  atomic.Int64 // set by sampler.read from coresOf
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
func (f *stateFiles) open(fs procfs.FS, pids []int) {
	f.close()
	f.pids = pids
	for _, p := range servingOf(fs, pids) {
		if x, err := os.Open("/proc/" + strconv.Itoa(p) + "/stat"); err == nil {
			f.files = append(f.files, x)
		}
	}
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
	d, seen := int64(0), int64(0)
	for _, x := range f.files {
		n, _ := x.ReadAt(f.buf, 0) // io.EOF with the whole line
		switch stateOf(f.buf[:n]) {
		case 0:
			continue // gone
		case 'D':
			d++
		}
		seen++
	}
	if seen == 0 {
		return
	}
	c := min(st.cores.Load(), seen)
	if c <= 0 {
		c = 1
	}
	st.disk.Add(min(c, d))
	st.coreTicks.Add(c)
	st.ticks.Add(1)
}

// runStates samples the KDC's states every s.period (on average) until
// stop closes (or stateMaxRun passes), picking up the sampler's pid list
// as it changes. The intervals are random (uniform within ±50 %) so they
// do not fall in step with the generator's own timers.
//
// A Go timer runs when the process schedules, often just after the
// generator sent something: it sees the KDC just woken (R) more often than
// by chance (a blocking client pausing between logins: 36 % sampled R
// against 18 % by schedstat). So R is not sampled: CPU time and the wait
// for a CPU come exact from schedstat; only D, which has no counter
// without delay accounting, is sampled. A locked thread in nanosleep
// sampled R without that bias, but cost the generator 4x its CPU per
// login (sysmon retaking the P at every sleep).
func (s *sampler) runStates(stop <-chan struct{}) {
	var f stateFiles
	defer f.close()
	next := func() time.Duration { return s.period/2 + rand.N(s.period) }
	t := time.NewTimer(next())
	defer t.Stop()
	deadline := time.Now().Add(stateMaxRun)
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if now.After(deadline) {
				return
			}
			t.Reset(next())
		}
		if pids := pidsOf(s); !slices.Equal(pids, f.pids) {
			f.open(s.proc, pids)
		}
		f.tick(&s.states)
	}
}
