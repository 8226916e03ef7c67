package compare

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/record"
)

// A source gives a metric's samples in both runs (in the metric's unit)
// and says what one sample is.
type source func(old, cur *report.Report) (xs, ys []float64, what string)

// sources are the metrics with more than one value per run. The others
// are one value per run: shown, never called: kadmin's slowest kind,
// degradation's last round against its first, and the KDC's peak memory
// (its readings within a run are not repeated measurements: RSS only
// grows, so any two runs would differ "significantly").
var sources = map[string]source{
	"as_logins_per_second":   rate(func(r *report.Report) *report.Load { return r.AS }, report.KindAS),
	"tgs_tickets_per_second": rate(func(r *report.Report) *report.Load { return r.TGS }, report.KindTGS),
	"tcp_logins_per_second": rate(func(r *report.Report) *report.Load {
		if r.TCP == nil {
			return nil
		}
		return r.TCP.Load
	}, report.KindAS),
	"login_p95_seconds":    quantile(report.KindAS, 0.95),
	"login_p99_seconds":    quantile(report.KindAS, 0.99),
	"ticket_p95_seconds":   quantile(report.KindTGS, 0.95),
	"ticket_p99_seconds":   quantile(report.KindTGS, 0.99),
	"error_ratio":          errorPct,
	"kdc_cpu_ratio":        readings(kdcCPUPct),
	"startup_seconds":      rounds(func(r *report.Report) []float64 { return ifStartup(r) }, "a round"),
	"dump_seconds":         rounds(func(r *report.Report) []float64 { return ifDump(r) }, "a round"),
	"top_level_peak_ratio": topLevel,
}

func ifStartup(r *report.Report) []float64 {
	if r.Startup == nil {
		return nil
	}
	return r.Startup.RoundsMS
}

func ifDump(r *report.Report) []float64 {
	if r.Dump == nil {
		return nil
	}
	return r.Dump.RoundsS
}

func rounds(f func(*report.Report) []float64, what string) source {
	return func(old, cur *report.Report) ([]float64, []float64, string) {
		return slices.Clone(f(old)), slices.Clone(f(cur)), what
	}
}

// blocks cuts a load's records of kind (any kind when "") into blocks of
// length b by at(record), the full blocks within its wall time, and
// returns f of each block's records (skipping a block f finds no value in).
func blocks(l *report.Load, kind string, b time.Duration, at func(report.Record) time.Duration, f func([]report.Record) (float64, bool)) []float64 {
	if l == nil || len(l.Records) == 0 || b <= 0 {
		return nil
	}
	n := int(l.Wall / b)
	per := make([][]report.Record, n)
	for _, rc := range l.Records {
		if kind != "" && rc.Kind != kind {
			continue
		}
		if i := int(at(rc) / b); at(rc) >= 0 && i < n {
			per[i] = append(per[i], rc)
		}
	}
	var out []float64
	for _, recs := range per {
		if v, ok := f(recs); ok {
			out = append(out, v)
		}
	}
	return out
}

func done(rc report.Record) time.Duration  { return rc.Start + rc.Latency }
func start(rc report.Record) time.Duration { return rc.Start }
func ok(rc report.Record) bool             { return rc.Class == record.ClassSuccess }

func successes(recs []report.Record) int {
	n := 0
	for _, rc := range recs {
		if ok(rc) {
			n++
		}
	}
	return n
}

// rate: successful requests per second in each block, by the time each
// was answered (a closed loop's rate is its answers').
func rate(load func(*report.Report) *report.Load, kind string) source {
	return func(old, cur *report.Report) ([]float64, []float64, string) {
		lo, lc := load(old), load(cur)
		if lo == nil || lc == nil {
			return nil, nil, ""
		}
		bo, bc := blockOf(lo.Wall), blockOf(lc.Wall)
		f := func(b time.Duration) func([]report.Record) (float64, bool) {
			return func(recs []report.Record) (float64, bool) {
				return float64(successes(recs)) / b.Seconds(), true
			}
		}
		return blocks(lo, kind, bo, done, f(bo)), blocks(lc, kind, bc, done, f(bc)), "the rate of " + blockNames(bo, bc) + " of the load"
	}
}

// blockNames says the blocks of both runs.
func blockNames(bo, bc time.Duration) string {
	if bo == bc {
		return blockName(bo)
	}
	return fmt.Sprintf("%s (old run), %s (new run)", blockName(bo), blockName(bc))
}

func blockName(b time.Duration) string {
	if b == time.Second {
		return "each second"
	}
	return "each " + b.String()
}

// latencyLoad is the open loop's session load (its records are logins'
// and tickets').
func latencyLoad(r *report.Report) *report.Load {
	if r.Latency == nil {
		return nil
	}
	return r.Latency.Logins
}

// quantile: the q quantile (nearest rank, as the report's) of the
// successful requests of kind due in each block.
func quantile(kind string, q float64) source {
	return func(old, cur *report.Report) ([]float64, []float64, string) {
		lo, lc := latencyLoad(old), latencyLoad(cur)
		if lo == nil || lc == nil {
			return nil, nil, ""
		}
		bo, bc := blockOf(lo.Wall), blockOf(lc.Wall)
		f := func(recs []report.Record) (float64, bool) {
			var ms []float64
			for _, rc := range recs {
				if ok(rc) {
					ms = append(ms, float64(rc.Latency)/1e6)
				}
			}
			if len(ms) == 0 {
				return 0, false
			}
			slices.Sort(ms)
			i := max(0, min(len(ms)-1, int(math.Ceil(q*float64(len(ms))))-1))
			return ms[i], true
		}
		return blocks(lo, kind, bo, start, f), blocks(lc, kind, bc, start, f), fmt.Sprintf("the p%g of the requests due in %s", 100*q, blockNames(bo, bc))
	}
}

// errorPct: failed requests (logins and tickets) as % of those due in
// each block.
func errorPct(old, cur *report.Report) ([]float64, []float64, string) {
	lo, lc := latencyLoad(old), latencyLoad(cur)
	if lo == nil || lc == nil {
		return nil, nil, ""
	}
	bo, bc := blockOf(lo.Wall), blockOf(lc.Wall)
	f := func(recs []report.Record) (float64, bool) {
		if len(recs) == 0 {
			return 0, false
		}
		return 100 * float64(len(recs)-successes(recs)) / float64(len(recs)), true
	}
	return blocks(lo, "", bo, start, f), blocks(lc, "", bc, start, f), "the errors of the requests due in " + blockNames(bo, bc)
}

// topLevel: the rate of each block of the concurrency test's top level,
// % of the run's peak rate.
func topLevel(old, cur *report.Report) ([]float64, []float64, string) {
	top := func(r *report.Report) *report.Load {
		if r.Concurrency == nil || len(r.Concurrency.Levels) == 0 || r.Concurrency.PeakRate <= 0 {
			return nil
		}
		return r.Concurrency.Levels[len(r.Concurrency.Levels)-1]
	}
	lo, lc := top(old), top(cur)
	if lo == nil || lc == nil {
		return nil, nil, ""
	}
	bo, bc := blockOf(lo.Wall), blockOf(lc.Wall)
	pct := func(b time.Duration, peak float64) func([]report.Record) (float64, bool) {
		return func(recs []report.Record) (float64, bool) {
			return 100 * float64(successes(recs)) / b.Seconds() / peak, true
		}
	}
	return blocks(lo, report.KindAS, bo, done, pct(bo, old.Concurrency.PeakRate)), blocks(lc, report.KindAS, bc, done, pct(bc, cur.Concurrency.PeakRate)),
		"the top level's rate of " + blockNames(bo, bc) + ", % of the run's peak"
}

// readings: a value per pair of consecutive resource readings (about a
// second apart) during the latency load, which cpu and memory measure.
func readings(f func(a, b report.Sample) float64) source {
	return func(old, cur *report.Report) ([]float64, []float64, string) {
		of := func(r *report.Report) []float64 {
			var out []float64
			var prev *report.Sample
			for i := range r.Samples {
				s := &r.Samples[i]
				if s.Test != "latency" {
					prev = nil
					continue
				}
				// Readings taken on demand at a load's start and end
				// can be milliseconds apart: their CPU share is noise.
				if prev != nil && s.At-prev.At < minReading {
					continue
				}
				if prev != nil {
					out = append(out, f(*prev, *s))
				}
				prev = s
			}
			return out
		}
		return of(old), of(cur), "each resource reading (about a second) of the latency load"
	}
}

// kdcCPUPct is the KDC's CPU between two readings, % of one core per
// process (as the report's).
func kdcCPUPct(a, b report.Sample) float64 {
	return 100 * float64(b.KDCCPU-a.KDCCPU) / float64(b.At-a.At) / float64(max(1, b.KDCProcesses))
}

// minReading is the shortest interval between readings that makes a
// sample of CPU.
const minReading = 500 * time.Millisecond
