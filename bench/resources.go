package bench

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cpuOf returns a process's CPU time. /proc/PID/schedstat has it in
// nanoseconds (one line per thread would be needed for threaded programs;
// krb5kdc is single-threaded); /proc/PID/stat in clock ticks is the
// fallback.
func cpuOf(pid int) (time.Duration, bool) {
	c, _, ok := schedOf(pid)
	return c, ok
}

// schedOf returns a process's CPU time and the time it waited, runnable,
// for a CPU (run_delay of /proc/PID/schedstat; 0 from the /proc/PID/stat
// fallback).
func schedOf(pid int) (cpu, wait time.Duration, ok bool) {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat"); err == nil {
		if f := bytes.Fields(b); len(f) > 0 {
			if ns, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
				if len(f) > 1 {
					w, _ := strconv.ParseInt(string(f[1]), 10, 64)
					wait = time.Duration(w)
				}
				return time.Duration(ns), wait, true
			}
		}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, 0, false
	}
	u, _ := strconv.ParseInt(string(f[11]), 10, 64)
	s, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(u+s) * (time.Second / 100), 0, true // USER_HZ is 100 on Linux
}

// rssOf returns VmRSS in bytes.
func rssOf(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	i := bytes.Index(b, []byte("VmRSS:"))
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+6:])
	if len(f) == 0 {
		return 0
	}
	kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return kb * 1024
}

// pidsOf is the sampler's KDC processes as last found.
func pidsOf(s *sampler) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cached
}

// coresOf is how many cores the KDC processes can keep busy at once: one
// per process that serves (krb5kdc is single-threaded; the supervisor of
// krb5kdc -w, the parent of the others, serves none), at most as many as
// the CPUs in their affinity masks together (taskset, cgroup cpusets).
func coresOf(pids []int) int {
	parents := map[int]bool{}
	for _, p := range pids {
		if pp := ppidOf(p); pp > 0 && slices.Contains(pids, pp) {
			parents[pp] = true
		}
	}
	var all unix.CPUSet
	n := 0
	for _, p := range pids {
		if parents[p] {
			continue
		}
		n++
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(p, &set); err != nil {
			continue
		}
		for i := range all {
			all[i] |= set[i]
		}
	}
	return min(n, all.Count())
}

// ppidOf is a process's parent, 0 when unknown.
func ppidOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(string(f[1]))
	return pp
}

// selfCPU is the CPU time of this whole process (the generator).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sampler reads the KDC processes and the generator once a second (and
// on demand) into a series kept for the report and raw/resource-samples.csv.
type sampler struct {
	pids  func() []int
	start time.Time
	// cached is the last pid list: finding the KDC's workers walks all of
	// /proc, too dear to do every second inside the measured loads; it is
	// found again when a cached process is gone (a restart).
	cached []int

	states kdcStates
	period time.Duration // of the state sampler; 0: off

	mu      sync.Mutex
	test    string
	samples []Sample
	stop    chan struct{}
	done    chan struct{}
}

func newSampler(pids func() []int) *sampler {
	return &sampler{pids: pids, start: time.Now(), period: DefaultStatePeriod}
}

// read takes one sample now (and records it).
func (s *sampler) read() Sample {
	var smp Sample
	if s.pids != nil {
		s.mu.Lock()
		pids := s.cached
		s.mu.Unlock()
		for attempt := 0; attempt < 2; attempt++ {
			smp = Sample{}
			gone := len(pids) == 0
			for _, p := range pids {
				if c, w, ok := schedOf(p); ok {
					smp.KDCCPU += c
					smp.KDCRunDelay += w
					smp.KDCRSS += rssOf(p)
					smp.KDCProcesses++
				} else {
					gone = true
				}
			}
			if !gone {
				break
			}
			pids = s.pids()
			s.mu.Lock()
			s.cached = pids
			s.mu.Unlock()
		}
	}
	smp.KDCCores = coresOf(pidsOf(s))
	s.states.cores.Store(int64(smp.KDCCores))
	smp.GenCPU = selfCPU()
	smp.KDCStateTicks = s.states.ticks.Load()
	smp.KDCStateCores = s.states.coreTicks.Load()
	smp.KDCStateDisk = s.states.disk.Load()
	s.mu.Lock()
	smp.At = time.Since(s.start)
	smp.Test = s.test
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
	return smp
}

// run samples every second while test runs, until end is called.
func (s *sampler) begin(test string) Sample {
	s.mu.Lock()
	s.test = test
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	stop, done := s.stop, s.done
	s.mu.Unlock()
	first := s.read()
	if s.pids != nil && s.period > 0 {
		states := make(chan struct{})
		go func() { <-stop; close(states) }()
		go s.runStates(states)
	}
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.read()
			}
		}
	}()
	return first
}

func (s *sampler) end() Sample {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	last := s.read()
	s.mu.Lock()
	s.test, s.stop, s.done = "", nil, nil
	s.mu.Unlock()
	return last
}

func (s *sampler) all() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

func cpuUse(a, b Sample, requests int) CPUUse {
	wall := b.At - a.At
	kdc, gen := b.KDCCPU-a.KDCCPU, b.GenCPU-a.GenCPU
	var u CPUUse
	if requests > 0 {
		u.KDCPerRequestUS = float64(kdc) / 1e3 / float64(requests)
		u.GeneratorPerRequestUS = float64(gen) / 1e3 / float64(requests)
	}
	if kdc > 0 {
		u.Ratio = float64(gen) / float64(kdc)
	}
	if wall > 0 {
		procs := max(1, b.KDCProcesses)
		u.KDCBusyPct = 100 * float64(kdc) / float64(wall) / float64(procs)
		u.GenBusyPct = 100 * float64(gen) / float64(wall)
		if u.KDCCores = b.KDCCores; a.KDCCores > 0 {
			u.KDCCores = min(u.KDCCores, a.KDCCores)
		}
		if u.KDCCores > 0 {
			u.KDCCoresBusyPct = 100 * float64(kdc) / float64(wall) / float64(u.KDCCores)
			u.KDCCPUWaitPct = 100 * float64(b.KDCRunDelay-a.KDCRunDelay) / float64(wall) / float64(u.KDCCores)
		}
	}
	if n, c := b.KDCStateTicks-a.KDCStateTicks, b.KDCStateCores-a.KDCStateCores; n > 0 && c > 0 {
		u.KDCStateSamples = n
		u.KDCDiskWaitPct = 100 * float64(b.KDCStateDisk-a.KDCStateDisk) / float64(c)
	}
	if u.KDCCores > 0 {
		u.KDCBusyTotalPct = min(100, u.KDCCoresBusyPct+u.KDCCPUWaitPct+u.KDCDiskWaitPct)
		u.KDCIdlePct = 100 - u.KDCBusyTotalPct
	}
	return u
}
