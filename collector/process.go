package collector

import (
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
)

// processCollector reports krb5kdc, kadmind and kpropd from /proc: per
// program totals over all its processes (supervisor and workers included),
// and per krb5kdc worker the CPU time under a stable index.
type processCollector struct {
	scan   *procScanner
	pageSz float64

	up, processes, restarts, cpu, rss, vms, openFDs, maxFDs, threads,
	startTime, ctxSwitches, ioRead, ioWrite, workers, workerCPU, workerStart,
	cpuWait, diskWait, workerCPUWait, workerDiskWait, delayacct *prometheus.Desc

	logger   log.Logger
	delayOn  int // kernel.task_delayacct at the last scrape: -1 unknown
	sysctlFn string
	// prlimit reads a process's open-file limit; nil: read
	// /proc/PID/limits (openFilesLimit).
	prlimit func(pid int, rl *unix.Rlimit) error

	lastMain  map[string]procID // main process seen by the previous scrape
	restartN  map[string]float64
	lastUp    map[string]time.Time // the last scrape that found the program running
	slots     *kdcproc.Workers     // shared with the log's per-worker counter
	answering []kdcproc.ID         // reused by updateWorkers
	byIndex   []int                // reused by updateWorkers
	wlabels   workerLabelSet
}

func newProcessCollector(scan *procScanner, slots *kdcproc.Workers, logger log.Logger) *processCollector {
	prog := []string{"program"}
	c := &processCollector{
		scan:           scan,
		slots:          slots,
		pageSz:         float64(os.Getpagesize()),
		up:             desc("process", "up", "1 if a process of the program is running (zombies do not count), else 0.", prog...),
		processes:      desc("process", "processes", "Number of running processes of the program, supervisor and workers included.", prog...),
		restarts:       desc("process", "restarts_total", "Times the program's main process was seen replaced by a new one (its pid or start time changed) since the exporter started.", prog...),
		cpu:            prometheus.NewDesc(MetricProcessCPU, "CPU time of all processes of the program, by mode, including the children its main process reaped (exited workers).", []string{"program", "mode"}, nil),
		rss:            prometheus.NewDesc(MetricProcessRSS, "Resident memory of all processes of the program.", prog, nil),
		vms:            desc("process", "virtual_memory_bytes", "Virtual memory of all processes of the program.", prog...),
		openFDs:        desc("process", "open_fds", "Open file descriptors of all processes of the program.", prog...),
		maxFDs:         desc("process", "max_fds", "Soft limit on open file descriptors of the program's main process (workers inherit it).", prog...),
		threads:        desc("process", "threads", "Threads of all processes of the program.", prog...),
		startTime:      desc("process", "start_time_seconds", "Start time of the program's oldest process, seconds since the Unix epoch.", prog...),
		ctxSwitches:    desc("process", "context_switches_total", "Context switches of all processes of the program.", "program", "ctxswitch"),
		ioRead:         desc("process", "io_read_bytes_total", "Bytes the program's processes caused to be read from storage.", prog...),
		ioWrite:        desc("process", "io_write_bytes_total", "Bytes the program's processes caused to be written to storage.", prog...),
		workers:        desc("kdc", "workers", "Running worker processes of krb5kdc -w N (0 for a single-process KDC).", nil...),
		workerCPU:      desc("kdc", "worker_cpu_seconds_total", "CPU time of one krb5kdc worker process, by mode; worker is a stable index below the number of workers, reused by a replacement.", "worker", "mode"),
		workerStart:    desc("kdc", "worker_start_time_seconds", "Start time of the krb5kdc worker process holding this index, seconds since the Unix epoch.", "worker"),
		cpuWait:        desc("process", "cpu_wait_seconds_total", "Time the program's processes spent runnable, waiting for a CPU (schedstat run_delay), summed.", prog...),
		diskWait:       desc("process", "disk_wait_seconds_total", "Time the program's processes spent waiting for synchronous block I/O (delayacct_blkio_ticks), summed; only while task delay accounting is on.", prog...),
		workerCPUWait:  desc("kdc", "worker_cpu_wait_seconds_total", "Time one krb5kdc worker process spent runnable, waiting for a CPU (schedstat run_delay).", "worker"),
		workerDiskWait: desc("kdc", "worker_disk_wait_seconds_total", "Time one krb5kdc worker process spent waiting for synchronous block I/O (delayacct_blkio_ticks); only while task delay accounting is on.", "worker"),
		delayacct:      desc("exporter", "task_delayacct_enabled", "1 if the kernel's task delay accounting is on (kernel.task_delayacct), which the disk wait metrics need; 0 if off.", nil...),
		logger:         logger,
		delayOn:        -1,
		sysctlFn:       scan.procPath + "/sys/kernel/task_delayacct",
		lastMain:       map[string]procID{},
		restartN:       map[string]float64{},
		lastUp:         map[string]time.Time{},
	}
	if ownPidNamespace(scan.procPath, scan.onProcfs) {
		c.prlimit = prlimitNoFile
	}
	c.wlabels = workerLabelSet{cpu: c.workerCPU, start: c.workerStart}
	return c
}

func (c *processCollector) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.processes, c.restarts, c.cpu, c.rss, c.vms, c.openFDs, c.maxFDs,
		c.threads, c.startTime, c.ctxSwitches, c.ioRead, c.ioWrite, c.workers, c.workerCPU, c.workerStart,
		c.cpuWait, c.diskWait, c.workerCPUWait, c.workerDiskWait, c.delayacct} {
		ch <- d
	}
}

func (c *processCollector) Update(ch chan<- prometheus.Metric) error {
	snap, err := c.scan.get()
	if err != nil {
		return err
	}
	diskWaits := c.delayAccounting(ch)
	var errs []error
	for i := range snap.programs {
		p := &snap.programs[i]
		if p.running() {
			id := p.main.id()
			if last, seen := c.lastMain[p.name]; seen && last != id {
				c.restartN[p.name]++
			}
			c.lastMain[p.name] = id
			c.lastUp[p.name] = time.Now()
		}
		ch <- gauge(c.up, boolFloat(p.running()), p.name)
		ch <- gauge(c.processes, float64(len(p.procs)), p.name)
		ch <- counter(c.restarts, c.restartN[p.name], p.name)
		if p.name == progKDC {
			c.updateWorkers(ch, snap, p, diskWaits)
		}
		if p.running() {
			c.updateWaits(ch, p, diskWaits)
			if err := c.updateProgram(ch, snap, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// family tracks whether a metric family could be read for every process.
type family struct {
	ok  bool
	err error
}

// failed classifies a read error of one process: an exited process simply
// contributes nothing; a permission error (the exporter not running as
// the daemon's user) drops the family with one warning; anything else
// drops it and fails the scrape.
func (c *processCollector) failed(f *family, err error, pr *kdcProc, prog, file string) bool {
	switch {
	case c.scan.access.note(prog, file, pr, file, err, "its metrics are omitted"):
	case err == nil:
		return false
	case gone(err):
		return true
	default:
		f.err = err
	}
	f.ok = false
	return true
}

func (c *processCollector) updateProgram(ch chan<- prometheus.Metric, snap *snapshot, p *programProcs) error {
	var utime, stime, rss, vms, threads, oldest uint64
	var nfds, vol, nonvol, rd, wr float64
	fds, cs, io := family{ok: true}, family{ok: true}, family{ok: true}
	oldest = p.main.stat.Starttime
	for _, pr := range p.procs {
		st := pr.stat
		utime += st.UTime
		stime += st.STime
		rss += uint64(max(st.RSS, 0))
		vms += st.VSize
		threads += uint64(st.NumThreads)
		oldest = min(oldest, st.Starttime)
		// An idle process keeps the values last read (procmemo.go);
		// pr.idle implies a memo.
		m := pr.memo
		if m == nil {
			m = &procMemo{} // nothing kept: written, never read
		}
		if fds.ok {
			n, err := m.fds, error(nil)
			if !pr.idle || !m.haveFDs {
				n, err = countFDs(c.scan.files, pr.file("fd"), c.scan.dirBuf, c.scan.onProcfs)
			}
			if !c.failed(&fds, err, pr, p.name, "fd") {
				nfds += float64(n)
				m.fds, m.haveFDs = n, true
			}
		}
		if cs.ok {
			vol1, nonvol1, err := m.vol, m.nonvol, error(nil)
			if !pr.idle || !m.haveCtx {
				vol1, nonvol1, err = readParsed2(c.scan.files, pr.file("status"), statusCtxt)
			}
			if !c.failed(&cs, err, pr, p.name, "status") {
				vol += float64(vol1)
				nonvol += float64(nonvol1)
				m.vol, m.nonvol, m.haveCtx = vol1, nonvol1, true
			}
		}
		if io.ok {
			rd1, wr1, err := m.rd, m.wr, error(nil)
			if !pr.idle || !m.haveIO {
				rd1, wr1, err = readParsed2(c.scan.files, pr.file("io"), ioBytes)
			}
			if !c.failed(&io, err, pr, p.name, "io") {
				rd += float64(rd1)
				wr += float64(wr1)
				m.rd, m.wr, m.haveIO = rd1, wr1, true
			}
		}
	}
	// Children the main process reaped (krb5kdc workers that exited before
	// it) no longer have a /proc entry; without their time the sum would
	// drop as if the counter had been reset.
	utime += uint64(max(p.main.stat.CUTime, 0))
	stime += uint64(max(p.main.stat.CSTime, 0))
	ch <- counter(c.cpu, float64(utime)/userHZ, p.name, "user")
	ch <- counter(c.cpu, float64(stime)/userHZ, p.name, "system")
	ch <- gauge(c.rss, float64(rss)*c.pageSz, p.name)
	ch <- gauge(c.vms, float64(vms), p.name)
	ch <- gauge(c.threads, float64(threads), p.name)
	ch <- gauge(c.startTime, snap.bootTime+float64(oldest)/userHZ, p.name)
	if fds.ok {
		ch <- gauge(c.openFDs, nfds, p.name)
	}
	lim := family{ok: true}
	maxFDs, err := c.openFilesLimit(p.main)
	if !c.failed(&lim, err, p.main, p.name, "limits") {
		ch <- gauge(c.maxFDs, float64(maxFDs), p.name)
	}
	if cs.ok {
		ch <- counter(c.ctxSwitches, vol, p.name, "voluntary")
		ch <- counter(c.ctxSwitches, nonvol, p.name, "nonvoluntary")
	}
	if io.ok {
		ch <- counter(c.ioRead, rd, p.name)
		ch <- counter(c.ioWrite, wr, p.name)
	}
	return errors.Join(fds.err, cs.err, io.err, lim.err)
}

// openFilesLimit returns the soft limit on open files of p: from
// prlimit(2), one system call that formats nothing, where /proc/PID/limits
// has the kernel print all 16 limits (2.4 µs warm, testdata/README.md
// round 7) to be parsed for one. prlimit needs the exporter to be the
// process's user or to have CAP_SYS_RESOURCE, and pids of the exporter's
// own pid namespace: when it is refused (EPERM), or --path.procfs is
// another namespace's /proc or a copied tree (c.prlimit nil), the file is
// read as before, and its errors are what the caller sees.
func (c *processCollector) openFilesLimit(p *kdcProc) (uint64, error) {
	if c.prlimit != nil {
		var rl unix.Rlimit
		err := c.prlimit(p.pid, &rl)
		if err == nil {
			return rl.Cur, nil // RLIM_INFINITY is the largest uint64, as in the file
		}
		if !errors.Is(err, unix.EPERM) {
			return 0, &os.PathError{Op: "prlimit", Path: p.dir, Err: err}
		}
	}
	b, err := c.scan.files.readSingle(p.file("limits"))
	if err != nil {
		return 0, err
	}
	return limitsOpenFiles(b)
}

// prlimitNoFile reads the RLIMIT_NOFILE of process pid.
func prlimitNoFile(pid int, rl *unix.Rlimit) error {
	return unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, rl)
}

// ownPidNamespace tells whether procPath is a procfs of the exporter's own
// pid namespace, whose pids prlimit(2) takes: its self is this process.
func ownPidNamespace(procPath string, onProcfs bool) bool {
	if !onProcfs {
		return false
	}
	self, err := os.Readlink(procPath + "/self")
	return err == nil && self == strconv.Itoa(os.Getpid())
}

// delayAccounting reports kernel.task_delayacct and whether the disk
// waits can be reported: on (1), or a live /proc without the switch
// (kernels before 5.14, where delay accounting is on unless booted with
// nodelayacct). Each change is one log line: off says why the disk waits
// are missing.
func (c *processCollector) delayAccounting(ch chan<- prometheus.Metric) bool {
	b, err := c.scan.files.readSysctl(c.sysctlFn)
	if err != nil {
		return c.scan.onProcfs && errors.Is(err, os.ErrNotExist)
	}
	on := 0
	if len(b) > 0 && b[0] == '1' {
		on = 1
	}
	ch <- gauge(c.delayacct, float64(on))
	if on != c.delayOn {
		if on == 0 {
			level.Warn(c.logger).Log("msg", "task delay accounting is off (kernel.task_delayacct = 0): the KDC's disk waits are not measured and krb5_process_disk_wait_seconds_total is omitted; sysctl -w kernel.task_delayacct=1 (or boot with delayacct) turns it on", "file", c.sysctlFn)
		} else if c.delayOn == 0 {
			level.Info(c.logger).Log("msg", "task delay accounting is on again: disk waits are measured from now", "file", c.sysctlFn)
		}
		c.delayOn = on
	}
	return on == 1
}

// updateWaits reports the program's waits for a CPU and for its disk,
// summed over its processes; a family is omitted unless every process's
// value was read.
func (c *processCollector) updateWaits(ch chan<- prometheus.Metric, p *programProcs, diskWaits bool) {
	var run, blkio uint64
	haveRun, haveBlkio := true, diskWaits
	for _, pr := range p.procs {
		run += pr.runDelay
		blkio += pr.stat.BlkioTicks
		haveRun = haveRun && pr.haveRunDelay
		haveBlkio = haveBlkio && pr.stat.HaveBlkio
	}
	if haveRun {
		ch <- counter(c.cpuWait, float64(run)/1e9, p.name)
	}
	if haveBlkio {
		ch <- counter(c.diskWait, float64(blkio)/userHZ, p.name)
	}
}

func (c *processCollector) updateWorkers(ch chan<- prometheus.Metric, snap *snapshot, p *programProcs, diskWaits bool) {
	// A single-process KDC answers requests itself: it holds index 0.
	answering := c.answering[:0]
	for _, w := range p.workers {
		answering = append(answering, kdcproc.ID{PID: w.pid, Start: w.stat.Starttime})
	}
	if len(answering) == 0 && p.running() {
		answering = append(answering, kdcproc.ID{PID: p.main.pid, Start: p.main.stat.Starttime})
	}
	c.answering = answering
	idx := c.slots.Assign(answering) // also frees the indexes of gone workers
	if !p.running() {
		return
	}
	ch <- gauge(c.workers, float64(len(p.workers)))
	// In the order the registry sorts them into (label pairs by name,
	// mode before worker; values as strings: "0", "1", "10"), which makes
	// its sort of the 3 x 64 series at -w 64 a check of sorted input.
	order := c.wlabels.inOrder(idx[:len(p.workers)], c.byIndex[:0])
	c.byIndex = order
	for _, i := range order {
		ch <- &presetMetric{desc: c.workerCPU, labels: c.wlabels.get(idx[i]).system, value: float64(p.workers[i].stat.STime) / userHZ, counter: true}
	}
	for _, i := range order {
		ch <- &presetMetric{desc: c.workerCPU, labels: c.wlabels.get(idx[i]).user, value: float64(p.workers[i].stat.UTime) / userHZ, counter: true}
	}
	for _, i := range order {
		ch <- &presetMetric{desc: c.workerStart, labels: c.wlabels.get(idx[i]).start, value: snap.bootTime + float64(p.workers[i].stat.Starttime)/userHZ, counter: false}
	}
	// The waits have the start time's one label, worker.
	for _, i := range order {
		if w := p.workers[i]; w.haveRunDelay {
			ch <- &presetMetric{desc: c.workerCPUWait, labels: c.wlabels.get(idx[i]).start, value: float64(w.runDelay) / 1e9, counter: true}
		}
	}
	if diskWaits {
		for _, i := range order {
			if w := p.workers[i]; w.stat.HaveBlkio {
				ch <- &presetMetric{desc: c.workerDiskWait, labels: c.wlabels.get(idx[i]).start, value: float64(w.stat.BlkioTicks) / userHZ, counter: true}
			}
		}
	}
}
