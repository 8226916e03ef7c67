package capacity

import "time"

// Status is the last estimate, for the landing page.
type Status struct {
	At      time.Time // the scrape that made it; zero before the first
	Source  string    // SourceKDCService, SourceProc; empty: no KDC seen
	Workers int
	Window  time.Duration // the time the window covers
	Rows    []StatusRow   // as, tgs, mix
	// BenchAt is when the latest bench run finished (zero: none read).
	BenchAt time.Time
}

// StatusRow is one request type's load, estimate and measured ceiling.
type StatusRow struct {
	Request  string
	Requests float64 // in the window
	Rate     float64 // requests per second over the window
	Capacity float64 // 0: no estimate, Why says why
	Why      string
	Bench    float64 // 0: none measured
	// CPU and Own are the window's seconds a request: on CPU; on CPU
	// and blocked (the model's c and s).
	CPU, Own float64
}

// Utilization is the row's rate over its estimated capacity (0 without
// one).
func (r StatusRow) Utilization() float64 {
	if r.Capacity <= 0 {
		return 0
	}
	return r.Rate / r.Capacity
}

// Status returns the estimate of the last gather.
func (g *Gatherer) Status() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status
}

// setStatus keeps what the last gather estimated (g.mu held).
func (g *Gatherer) setStatus(res *result, cpus int, bench map[string]float64, benchAt time.Time) {
	st := Status{BenchAt: benchAt}
	if n := len(g.samples); n > 0 {
		st.At = g.samples[n-1].at
		st.Window = g.samples[n-1].at.Sub(g.samples[0].at)
	}
	if res.ok() {
		st.Source, st.Workers = res.source, res.workers
		st.Rows = res.rows(cpus, st.Window.Seconds(), bench)
	}
	g.status = st
}

// rows are the estimate's as, tgs and mix rows: secs the window's
// length (0: no rate), bench the measured ceilings by request.
func (r *result) rows(cpus int, secs float64, bench map[string]float64) []StatusRow {
	var out []StatusRow
	for i, q := range []int{reqAS, reqTGS, mixIdx} {
		c, name := r.costs[q], []string{"as", "tgs", "mix"}[i]
		row := StatusRow{Request: name, Requests: c.n, Bench: bench[name], CPU: c.cpu, Own: c.own}
		if secs > 0 {
			row.Rate = c.n / secs
		}
		switch {
		case c.published:
			row.Capacity = rate(c, r.workers, cpus)
		case c.n < float64(r.minReq):
			row.Why = "too few requests"
		default:
			row.Why = "a mix the proc source cannot split"
		}
		out = append(out, row)
	}
	return out
}
