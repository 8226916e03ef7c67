package bench

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// Shard is one shard's run to merge: its report with its requests
// (report.ReadRun) and where it came from, for the errors.
type Shard struct {
	Path   string
	Report *Report
}

// Merge makes one report of the shards of one run (`--shard i/n` on
// several machines against one KDC): rates are the sums of the shards',
// latencies are summarised from every shard's requests together, the
// tests that run in shard 1 only (startup, kadmin, dump) and the KDC's
// CPU and memory (measured by the shard on the KDC's machine, if any)
// are taken from the shard that has them, and each metric is judged
// again against its target on the merged numbers. It refuses shards that
// are not of one run: another realm or KDC, other settings, a shard
// number twice or missing, starts further apart than half of the
// loads' duration (their loads would not have run together), or shards
// that repeated their loads (--count).
func Merge(shards []Shard) (*Report, error) {
	if len(shards) < 2 {
		return nil, errors.New("merge needs the results of at least two shards")
	}
	if err := sameRun(shards); err != nil {
		return nil, err
	}
	slices.SortFunc(shards, func(a, b Shard) int {
		i, _, _ := ParseShard(a.Report.Settings.Shard)
		j, _, _ := ParseShard(b.Report.Settings.Shard)
		return i - j
	})
	first := shards[0].Report
	m := &Report{
		Schema: first.Schema, Machine: first.Machine, System: first.System, Settings: first.Settings,
		Warnings: []string{}, Started: first.Started, Finished: first.Finished,
	}
	m.System.Settings = maps.Clone(first.System.Settings)
	_, n, _ := ParseShard(first.Settings.Shard)
	m.Settings.Shard = fmt.Sprintf("1-%d/%d merged", n, n)
	for _, s := range shards {
		r := s.Report
		if r.Started.Before(m.Started) {
			m.Started = r.Started
		}
		if r.Finished.After(m.Finished) {
			m.Finished = r.Finished
		}
		for _, w := range r.Warnings {
			m.Warnings = append(m.Warnings, fmt.Sprintf("shard %s: %s", orOneOne(r.Settings.Shard), w))
		}
		for _, t := range r.EnvironmentLimited {
			if !slices.Contains(m.EnvironmentLimited, t) {
				m.EnvironmentLimited = append(m.EnvironmentLimited, t)
			}
		}
	}
	pick := func(f func(*Report) bool) *Report {
		for _, s := range shards {
			if f(s.Report) {
				return s.Report
			}
		}
		return nil
	}
	loads := func(f func(*Report) *Load) []*Load {
		var out []*Load
		for _, s := range shards {
			if l := f(s.Report); l != nil {
				out = append(out, l)
			}
		}
		return out
	}
	var err error
	if m.AS, err = mergeLoads(loads(func(r *Report) *Load { return r.AS }), len(shards)); err != nil {
		return nil, fmt.Errorf("as: %w", err)
	}
	if m.TGS, err = mergeLoads(loads(func(r *Report) *Load { return r.TGS }), len(shards)); err != nil {
		return nil, fmt.Errorf("tgs: %w", err)
	}
	if r := pick(func(r *Report) bool { return r.TCP != nil }); r != nil {
		l, err := mergeLoads(loads(func(r *Report) *Load {
			if r.TCP == nil {
				return nil
			}
			return r.TCP.Load
		}), len(shards))
		if err != nil {
			return nil, fmt.Errorf("tcp: %w", err)
		}
		m.TCP = &TCP{Load: l}
		if m.AS != nil && m.AS.Rate > 0 {
			m.TCP.UDPRateRef, m.TCP.PctOfUDP = m.AS.Rate, 100*l.Rate/m.AS.Rate
		}
	}
	if err := mergeLatency(m, shards); err != nil {
		return nil, fmt.Errorf("latency: %w", err)
	}
	if r := pick(func(r *Report) bool { return r.Concurrency != nil }); r != nil {
		c := &Concurrency{}
		for i := range r.Concurrency.Levels {
			l, err := mergeLoads(loads(func(r *Report) *Load {
				if r.Concurrency == nil || i >= len(r.Concurrency.Levels) {
					return nil
				}
				return r.Concurrency.Levels[i]
			}), len(shards))
			if err != nil {
				return nil, fmt.Errorf("concurrency: %w", err)
			}
			c.Levels = append(c.Levels, l)
			c.PeakRate = max(c.PeakRate, l.Rate)
		}
		if c.PeakRate > 0 {
			c.TopPct = 100 * c.Levels[len(c.Levels)-1].Rate / c.PeakRate
		}
		m.Concurrency = c
	}
	if r := pick(func(r *Report) bool { return r.Degradation != nil }); r != nil {
		// A round ends when every shard's has: the slowest shard's time.
		d := &Degradation{}
		for _, s := range shards {
			sd := s.Report.Degradation
			if sd == nil {
				continue
			}
			d.LoginsPerRound += sd.LoginsPerRound
			d.Errors += sd.Errors
			for i, v := range sd.RoundsS {
				if i == len(d.RoundsS) {
					d.RoundsS = append(d.RoundsS, v)
				}
				d.RoundsS[i] = max(d.RoundsS[i], v)
			}
		}
		if len(d.RoundsS) > 0 && d.RoundsS[0] > 0 {
			d.LastVsFirstPct = 100 * (d.RoundsS[len(d.RoundsS)-1] - d.RoundsS[0]) / d.RoundsS[0]
			d.SlopePctRound = 100 * slope(d.RoundsS) / d.RoundsS[0]
		}
		m.Degradation = d
	}
	// Shard 1's tests, and what the shard on the KDC's machine measured.
	if r := pick(func(r *Report) bool { return r.Startup != nil }); r != nil {
		m.Startup = r.Startup
	}
	if r := pick(func(r *Report) bool { return r.Kadmin != nil }); r != nil {
		m.Kadmin = r.Kadmin
	}
	if r := pick(func(r *Report) bool { return r.Dump != nil }); r != nil {
		m.Dump = r.Dump
	}
	if r := pick(func(r *Report) bool { return r.Memory != nil && r.Memory.PeakBytes > 0 }); r != nil {
		m.Memory = r.Memory
		m.Samples = r.Samples
		if m.Latency != nil && r.Latency != nil {
			m.Latency.CPU = r.Latency.CPU
		}
	}
	remeasure(m, shards)
	return m, nil
}

func orOneOne(s string) string {
	if s == "" {
		return "1/1"
	}
	return s
}

// sameRun refuses shards that are not of one run.
func sameRun(shards []Shard) error {
	first := shards[0]
	_, n, err := ParseShard(first.Report.Settings.Shard)
	if err != nil {
		return fmt.Errorf("%s: %w", first.Path, err)
	}
	seen := map[int]string{}
	var earliest, latest time.Time
	for _, s := range shards {
		r := s.Report
		i, ni, err := ParseShard(r.Settings.Shard)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Path, err)
		}
		if ni != n {
			return fmt.Errorf("%s is shard %s, %s shard %s: not shards of one run", first.Path, orOneOne(first.Report.Settings.Shard), s.Path, orOneOne(r.Settings.Shard))
		}
		if p, ok := seen[i]; ok {
			return fmt.Errorf("%s and %s are both shard %d/%d", p, s.Path, i, n)
		}
		if r.Settings.Count > 1 {
			// Shards' repetitions run on their own clocks: repetition k of
			// one shard need not overlap repetition k of another, and a
			// median of sums is not a sum of medians.
			return fmt.Errorf("%s ran its loads %d times (--count %d): merging repeated shards is not supported; run the shards with --count 1 (each shard's runs can be compared with bench compare)", s.Path, r.Settings.Count, r.Settings.Count)
		}
		seen[i] = s.Path
		for _, d := range []struct{ what, a, b string }{
			{"realm", first.Report.System.Realm, r.System.Realm},
			{"KDC", first.Report.System.KDC, r.System.KDC},
			{"users", fmt.Sprint(first.Report.System.Users), fmt.Sprint(r.System.Users)},
			{"services", fmt.Sprint(first.Report.System.Services), fmt.Sprint(r.System.Services)},
		} {
			if d.a != d.b {
				return fmt.Errorf("%s has %s %s, %s has %s: not shards of one run", first.Path, d.what, d.a, s.Path, d.b)
			}
		}
		if k := differingKey(first.Report.System.Settings, r.System.Settings); k != "" {
			return fmt.Errorf("%s has %s %q, %s has %q: not shards of one run", first.Path, k, first.Report.System.Settings[k], s.Path, r.System.Settings[k])
		}
		a, b := first.Report.Settings, r.Settings
		a.Shard, b.Shard = "", ""
		if !reflect.DeepEqual(a, b) {
			return fmt.Errorf("%s and %s ran with different settings (%s): not shards of one run", first.Path, s.Path, settingsDiff(a, b))
		}
		if earliest.IsZero() || r.Started.Before(earliest) {
			earliest = r.Started
		}
		if r.Started.After(latest) {
			latest = r.Started
		}
	}
	if len(seen) != n {
		var missing []string
		for i := 1; i <= n; i++ {
			if _, ok := seen[i]; !ok {
				missing = append(missing, fmt.Sprint(i))
			}
		}
		return fmt.Errorf("shard(s) %s of %d missing: the merged rates would be a part of the run's", strings.Join(missing, ", "), n)
	}
	if skew, d := latest.Sub(earliest), first.Report.Settings.Duration; skew > d/2 {
		return fmt.Errorf("the shards started %s apart, more than half the %s DURATION: their loads did not run together", skew.Round(time.Millisecond), d)
	}
	return nil
}

// differingKey is a key whose value differs between a and b ("" if none).
func differingKey(a, b map[string]string) string {
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		// Where each generator was pinned is its own machine's business.
		if k == "generator_cpu" {
			continue
		}
		if a[k] != b[k] {
			return k
		}
	}
	return ""
}

// settingsDiff names the fields of two settings that differ.
func settingsDiff(a, b Settings) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			tag, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("yaml"), ",")
			out = append(out, tag)
		}
	}
	return strings.Join(out, ", ")
}

// mergeLoads sums the shards' loads of one test: requests, errors and
// rates add up; latencies are summarised from every request.
func mergeLoads(ls []*Load, shards int) (*Load, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	if len(ls) != shards {
		return nil, fmt.Errorf("only %d of the %d shards have it", len(ls), shards)
	}
	m := &Load{Transport: ls[0].Transport, Kind: ls[0].Kind}
	var ds []time.Duration
	for _, l := range ls {
		if len(l.Records) == 0 && l.Requests > 0 {
			return nil, errors.New("a shard's requests (raw/*-requests.csv) are missing: latencies need every request")
		}
		m.Clients += l.Clients
		m.Wall = max(m.Wall, l.Wall)
		m.Requests += l.Requests
		m.Errors += l.Errors
		m.Rate += l.Rate
		m.GeneratorWaits += l.GeneratorWaits
		for c, k := range l.ErrorClasses {
			if m.ErrorClasses == nil {
				m.ErrorClasses, m.ErrorTexts = map[string]int{}, map[string]string{}
			}
			m.ErrorClasses[c] += k
			if m.ErrorTexts[c] == "" {
				m.ErrorTexts[c] = l.ErrorTexts[c]
			}
		}
		m.Records = append(m.Records, l.Records...)
		kind := m.Kind
		for _, rc := range l.Records {
			if (kind == "" || rc.Kind == kind) && rc.Class == krb5.ClassSuccess {
				ds = append(ds, rc.Latency)
			}
		}
	}
	m.Latency = summarize(ds)
	if m.Requests > 0 {
		m.FailedPct = 100 * float64(m.Errors) / float64(m.Requests)
	}
	return m, nil
}

// mergeLatency merges the open loop: each shard made 1/n of the rate.
func mergeLatency(m *Report, shards []Shard) error {
	var logins, tickets []*Load
	ol := &OpenLoop{}
	for _, s := range shards {
		l := s.Report.Latency
		if l == nil {
			continue
		}
		ol.LoginRate += l.LoginRate
		ol.TGSPerLogin = l.TGSPerLogin
		ol.Sessions += l.Sessions
		ol.Behind += l.Behind
		ol.MaxBehindMS = max(ol.MaxBehindMS, l.MaxBehindMS)
		// The logins' records hold the tickets' too (kind tgs).
		logins = append(logins, l.Logins)
		t := *l.Tickets
		t.Records = l.Logins.Records
		tickets = append(tickets, &t)
	}
	if len(logins) == 0 {
		return nil
	}
	var err error
	if ol.Logins, err = mergeLoads(logins, len(shards)); err != nil {
		return err
	}
	if ol.Tickets, err = mergeLoads(tickets, len(shards)); err != nil {
		return err
	}
	ol.Logins.Kind, ol.Tickets.Kind = kindAS, kindTGS
	ol.Logins.Latency = summarizeLoad(ol.Logins.Records, kindAS, 0, 0, krb5.UDP).Latency
	ol.Tickets.Latency = summarizeLoad(ol.Logins.Records, kindTGS, 0, 0, krb5.UDP).Latency
	ol.Tickets.Records = nil
	if total := ol.Logins.Requests + ol.Tickets.Requests; total > 0 {
		ol.ErrorPct = 100 * float64(ol.Logins.Errors+ol.Tickets.Errors) / float64(total)
	}
	m.Latency = ol
	return nil
}

// remeasure judges every metric the shards have again on the merged
// numbers (shard-1-only tests keep theirs), and the run's verdict.
func remeasure(m *Report, shards []Shard) {
	value := map[string]func() (float64, bool){
		"as_logins_per_second":   func() (float64, bool) { return rateOf(m.AS) },
		"tgs_tickets_per_second": func() (float64, bool) { return rateOf(m.TGS) },
		"tcp_logins_per_second": func() (float64, bool) {
			if m.TCP == nil {
				return 0, false
			}
			return rateOf(m.TCP.Load)
		},
		"login_p95_seconds": func() (float64, bool) {
			return latencyValue(m, func(ol *OpenLoop) float64 { return ol.Logins.Latency.P95MS })
		},
		"login_p99_seconds": func() (float64, bool) {
			return latencyValue(m, func(ol *OpenLoop) float64 { return ol.Logins.Latency.P99MS })
		},
		"ticket_p95_seconds": func() (float64, bool) {
			return latencyValue(m, func(ol *OpenLoop) float64 { return ol.Tickets.Latency.P95MS })
		},
		"ticket_p99_seconds": func() (float64, bool) {
			return latencyValue(m, func(ol *OpenLoop) float64 { return ol.Tickets.Latency.P99MS })
		},
		"error_ratio": func() (float64, bool) { return latencyValue(m, func(ol *OpenLoop) float64 { return ol.ErrorPct }) },
		"top_level_peak_ratio": func() (float64, bool) {
			if m.Concurrency == nil {
				return 0, false
			}
			return m.Concurrency.TopPct, true
		},
		"last_round_slowdown_ratio": func() (float64, bool) {
			if m.Degradation == nil {
				return 0, false
			}
			return m.Degradation.LastVsFirstPct, true
		},
	}
	seen := map[string]bool{}
	for _, s := range shards {
		for _, sm := range s.Report.Metrics {
			if seen[sm.Name] {
				continue
			}
			seen[sm.Name] = true
			mm := sm
			if f, ok := value[sm.Name]; ok {
				if v, ok := f(); ok {
					scale := 1.0
					if sm.Value != 0 {
						scale = sm.Base / sm.Value
					} else {
						scale = report.MetricScale(sm.Name)
					}
					judge(&mm, v, scale)
				}
			}
			m.Metrics = append(m.Metrics, mm)
		}
	}
	// The tests: each as in the shard that ran it; failed when a merged
	// metric of it fails.
	seenTest := map[string]int{}
	for _, s := range shards {
		for _, t := range s.Report.Tests {
			i, ok := seenTest[t.Name]
			if !ok {
				seenTest[t.Name] = len(m.Tests)
				m.Tests = append(m.Tests, t)
				continue
			}
			// A test skipped in shard 2 (shard 1 only) but run in 1.
			if m.Tests[i].Status == "skipped" && t.Status != "skipped" {
				m.Tests[i] = t
			}
			if t.Status == "error" {
				m.Tests[i] = t
			}
			m.Tests[i].Duration = max(m.Tests[i].Duration, t.Duration)
		}
	}
	for i, t := range m.Tests {
		if t.Status != "pass" && t.Status != "fail" {
			continue
		}
		m.Tests[i].Status = "pass"
		for _, mm := range m.Metrics {
			if mm.Test == t.Name && mm.Verdict == Fail {
				m.Tests[i].Status = "fail"
			}
		}
	}
	m.Verdict = Pass
	for _, t := range m.Tests {
		if t.Status == "fail" || t.Status == "error" {
			m.Verdict = Fail
		}
	}
}

func rateOf(l *Load) (float64, bool) {
	if l == nil {
		return 0, false
	}
	return l.Rate, true
}

func latencyValue(m *Report, f func(*OpenLoop) float64) (float64, bool) {
	if m.Latency == nil || m.Latency.Logins == nil {
		return 0, false
	}
	return f(m.Latency), true
}
