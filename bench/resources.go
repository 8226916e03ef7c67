package bench

import (
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
)

// schedOf returns a process's CPU time and the time it waited, runnable,
// for a CPU (/proc/PID/schedstat, in nanoseconds; krb5kdc is
// single-threaded, so the process's line is all of it). /proc/PID/stat's
// clock ticks are the fallback, without the wait.
func schedOf(fs procfs.FS, pid int) (cpu, wait time.Duration, ok bool) {
	p, err := fs.Proc(pid)
	if err != nil {
		return 0, 0, false
	}
	if ss, err := p.Schedstat(); err == nil {
		return time.Duration(ss.RunningNanoseconds), time.Duration(ss.WaitingNanoseconds), true
	}
	st, err := p.Stat()
	if err != nil {
		return 0, 0, false
	}
	return time.Duration(st.UTime+st.STime) * (time.Second / 100), 0, true // USER_HZ is 100 on Linux
}

// rssOf returns VmRSS in bytes (0 when unknown).
func rssOf(fs procfs.FS, pid int) int64 {
	p, err := fs.Proc(pid)
	if err != nil {
		return 0
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0
	}
	return int64(st.VmRSS)
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
func coresOf(fs procfs.FS, pids []int) int {
	return coresIn(kdcCPUs(fs, pids))
}

// coresIn is coresOf from what kdcCPUs returned.
func coresIn(serving int, cpus unix.CPUSet) int { return min(serving, cpus.Count()) }

// kdcCPUs is how many of pids serve and the CPUs they may run on together.
func kdcCPUs(fs procfs.FS, pids []int) (serving int, all unix.CPUSet) {
	ps := servingOf(fs, pids)
	for _, p := range ps {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(p, &set); err != nil {
			continue
		}
		for i := range all {
			all[i] |= set[i]
		}
	}
	return len(ps), all
}

// stealOf is the steal time so far of the CPUs in set (kdcCPUs), and how
// many they are.
func stealOf(fs procfs.FS, set unix.CPUSet) (time.Duration, int) {
	st, err := fs.Stat()
	if err != nil || set.Count() == 0 {
		return 0, 0
	}
	var steal float64
	for cpu, c := range st.CPU {
		if cpu < 0 || !set.IsSet(int(cpu)) {
			continue
		}
		steal += c.Steal
	}
	return time.Duration(steal * 1e9), set.Count()
}

// sharedCPUs is how many CPUs both the serving KDC processes (kdc, from
// kdcCPUs) and this process (the generator, all its threads pinned alike:
// taskset -a) may run on: 0 when they are pinned apart.
func sharedCPUs(kdc unix.CPUSet) int {
	var self unix.CPUSet
	if err := unix.SchedGetaffinity(0, &self); err != nil {
		return 0
	}
	for i := range kdc {
		kdc[i] &= self[i]
	}
	return kdc.Count()
}

// servingOf is which of pids serve requests (kdcproc.Answering): the
// workers of krb5kdc -w, or the processes without one of pids as parent.
func servingOf(fs procfs.FS, pids []int) []int {
	var out []int
	for _, id := range kdcproc.Answering(kdcproc.Of(fs, pids)) {
		out = append(out, id.PID)
	}
	return out
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
	proc  procfs.FS
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
	// /proc is mounted wherever the bench runs (it reads the KDC there);
	// without it the samples are empty, as for processes gone.
	proc, _ := procfs.NewDefaultFS()
	return &sampler{proc: proc, pids: pids, start: time.Now(), period: DefaultStatePeriod}
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
				if c, w, ok := schedOf(s.proc, p); ok {
					smp.KDCCPU += c
					smp.KDCRunDelay += w
					smp.KDCRSS += rssOf(s.proc, p)
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
	serving, cpus := kdcCPUs(s.proc, pidsOf(s)) // once a sample: each call reads every pid's stat
	smp.KDCCores = coresIn(serving, cpus)
	smp.SharedCPUs = sharedCPUs(cpus)
	smp.KDCSteal, smp.StealCPUs = stealOf(s.proc, cpus)
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
		u.SharedCPUs = min(a.SharedCPUs, b.SharedCPUs)
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
	if n := min(a.StealCPUs, b.StealCPUs); wall > 0 && n > 0 && b.KDCSteal > a.KDCSteal {
		u.KDCStealPct = 100 * float64(b.KDCSteal-a.KDCSteal) / float64(wall) / float64(n)
	}
	return u
}
