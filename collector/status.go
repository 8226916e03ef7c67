package collector

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ProgramStatus is one watched program as the last collection found it.
type ProgramStatus struct {
	Name    string
	Running bool
	PID     int   // the main process (the supervisor of krb5kdc -w N)
	Workers []int // krb5kdc -w N's worker pids, oldest first
	// Restarts: times the main process was seen replaced since the start.
	Restarts int
	// LastSeen is when a collection last found it running (zero: never
	// since the exporter started).
	LastSeen time.Time
}

// CollectorError is a collector failing at its last run.
type CollectorError struct{ Name, Err string }

// Status is what the status page shows of the host collectors.
type Status struct {
	At       time.Time // of the collection described; zero: none yet
	Enabled  []string
	Programs []ProgramStatus // empty when the process collector is off
	Failing  []CollectorError
}

// Status describes the last collection, after running one (its metrics
// dropped) when the last is older than maxAge: a page that is looked at
// costs a collection at most every maxAge, one that is not costs nothing.
func (k *KDCCollector) Status(maxAge time.Duration) Status {
	k.mu.Lock()
	stale := time.Since(k.lastRun) > maxAge
	k.mu.Unlock()
	if stale {
		ch := make(chan prometheus.Metric, 64)
		done := make(chan struct{})
		go func() {
			for range ch {
			}
			close(done)
		}()
		k.Collect(ch)
		close(ch)
		<-done
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	st := Status{At: k.lastRun, Enabled: k.Enabled()}
	for name, err := range k.failures.Failing() {
		st.Failing = append(st.Failing, CollectorError{name, err})
	}
	sort.Slice(st.Failing, func(i, j int) bool { return st.Failing[i].Name < st.Failing[j].Name })
	var pc *processCollector
	for _, c := range k.collectors {
		if p, ok := c.c.(*processCollector); ok {
			pc = p
		}
	}
	snap := k.scan.cur
	if pc == nil || snap == nil {
		return st
	}
	for i := range snap.programs {
		p := &snap.programs[i]
		ps := ProgramStatus{Name: p.name, Running: p.running(), Restarts: int(pc.restartN[p.name]), LastSeen: pc.lastUp[p.name]}
		if p.running() {
			ps.PID = p.main.pid
		}
		for _, w := range p.workers {
			ps.Workers = append(ps.Workers, w.pid)
		}
		st.Programs = append(st.Programs, ps)
	}
	return st
}
