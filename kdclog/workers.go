package kdclog

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// WorkerIndex maps the pid of a request line to the stable index of the
// krb5kdc process that answered it (internal/kdcproc.Workers): ok is false
// for a pid that is no KDC process answering requests. Generation changes
// whenever an index changes hands.
type WorkerIndex interface {
	Index(pid int) (index int, ok bool)
	Generation() uint64
}

// maxWorkerLabels bounds the worker label: indexes from it up count as
// "other" (a KDC with more workers than this is not expected: -w is about
// the number of cores).
const maxWorkerLabels = 256

// Worker label values beyond the indexes.
const (
	workerOther   = maxWorkerLabels     // an index >= maxWorkerLabels
	workerUnknown = maxWorkerLabels + 1 // no KDC process has the line's pid
	numWorkerRows = maxWorkerLabels + 2
)

// MetricWorkerRequests is the per-worker request counter's name (top reads it).
const MetricWorkerRequests = "krb5_kdc_worker_requests_total"

var descWorkerRequests = prometheus.NewDesc(MetricWorkerRequests,
	"KDC requests as in krb5_kdc_requests_total, by the krb5kdc process that answered: worker is its stable index (a replacement reuses it), unknown when the line's pid was no running KDC process.",
	[]string{"worker", "request", "status"}, nil)

// workerCounts is the per-worker view of the request lines that
// krb5_kdc_requests_total counts: each such line is counted here once more,
// under one worker. Off (no series) until a WorkerIndex is set.
type workerCounts struct {
	index atomic.Pointer[WorkerIndex]
	mu    sync.Mutex // allocates rows
	rows  [numWorkerRows]atomic.Pointer[workerRow]
}

type workerRow [numRequests][]atomic.Uint64 // [request][status]

// SetWorkerIndex turns on krb5_kdc_worker_requests_total: request lines
// read from now on are also counted by the worker that answered them.
func (m *Manager) SetWorkerIndex(w WorkerIndex) {
	m.counts.workers.index.Store(&w)
}

func (w *workerCounts) row(i, nStatus int) *workerRow {
	if r := w.rows[i].Load(); r != nil {
		return r
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.rows[i].Load(); r != nil {
		return r
	}
	r := &workerRow{}
	for q := range r {
		r[q] = make([]atomic.Uint64, nStatus)
	}
	w.rows[i].Store(r)
	return r
}

func (w *workerCounts) collect(ch chan<- prometheus.Metric, statuses *boundedLabels) {
	for i := range w.rows {
		r := w.rows[i].Load()
		if r == nil {
			continue
		}
		worker := "other"
		switch {
		case i == workerUnknown:
			worker = "unknown"
		case i < maxWorkerLabels:
			worker = strconv.Itoa(i)
		}
		for q := range r {
			for s := range r[q] {
				if v := r[q][s].Load(); v > 0 {
					counter(ch, descWorkerRequests, v, worker, requestNames[q], statuses.name(s))
				}
			}
		}
	}
}

// sourceWorkers is one source's local part: counts since the last flush and
// a small cache of pid -> row, valid for one generation of the index.
type sourceWorkers struct {
	shared *workerCounts
	local  []*[numRequests][]uint64 // by row, allocated on first use
	gen    uint64
	cache  [16]struct {
		pid int
		row *[numRequests][]uint64 // local[the pid's row]
	}
	// idx is the index as of the batch's first request line: the index
	// and its generation are looked at once a batch (a batch is what one
	// read returned, lines written before it), not once a line.
	idx WorkerIndex
}

// cached, then countSlow if it did not, count a request line under its
// worker and report whether they did (a WorkerIndex is set): then the line
// is in the local rows alone, and addTotals adds them to the request
// counters at the flush, one increment a line instead of two. cached is
// inlined: a pid in the cache of this batch costs no call.
func (s *sourceWorkers) cached(pid int, req Request, status int) bool {
	if slot := &s.cache[uint(pid)%uint(len(s.cache))]; s.idx != nil && slot.pid == pid {
		slot.row[req][status]++
		return true
	}
	return false
}

func (s *sourceWorkers) countSlow(pid int, req Request, status, nStatus int) bool {
	idx := s.idx
	if idx == nil {
		ip := s.shared.index.Load()
		if ip == nil {
			return false
		}
		idx = *ip
		s.idx = idx
		if g := idx.Generation(); g != s.gen || s.local == nil {
			s.gen = g
			for i := range s.cache {
				s.cache[i].pid = -1
			}
			if s.local == nil {
				s.local = make([]*[numRequests][]uint64, numWorkerRows)
			}
		}
	}
	slot := &s.cache[uint(pid)%uint(len(s.cache))]
	if slot.pid != pid {
		var row int
		i, ok := idx.Index(pid)
		switch {
		case !ok:
			row = workerUnknown
		case i >= maxWorkerLabels:
			row = workerOther
		default:
			row = i
		}
		l := s.local[row]
		if l == nil {
			l = &[numRequests][]uint64{}
			for q := range l {
				l[q] = make([]uint64, nStatus)
			}
			s.local[row] = l
		}
		// A look-up may have changed the generation; the next batch then
		// starts a fresh cache, which is correct if not needed.
		slot.pid, slot.row = pid, l
	}
	slot.row[req][status]++
	return true
}

// addTotals adds the local rows to requests, the local tally's request
// counters, before they are flushed (then flush publishes the rows).
func (s *sourceWorkers) addTotals(requests *[numRequests][]uint64) {
	for _, l := range s.local {
		if l == nil {
			continue
		}
		for q := range l {
			for st, v := range l[q] {
				requests[q][st] += v
			}
		}
	}
}

func (s *sourceWorkers) flush() {
	s.idx = nil // the next batch looks at the index and its generation again
	for row, l := range s.local {
		if l == nil {
			continue
		}
		var shared *workerRow
		for q := range l {
			for st, v := range l[q] {
				if v == 0 {
					continue
				}
				if shared == nil {
					shared = s.shared.row(row, len(l[q]))
				}
				shared[q][st].Add(v)
				l[q][st] = 0
			}
		}
	}
}
