package report

import (
	"fmt"
	"slices"

	"github.com/krb5-exporter/krb5-exporter/internal/record"
)

// charts renders the charts the report has data for, in a fixed order.
func charts(rep *Report) []chart {
	var out []chart
	for _, m := range []struct {
		id, title string
		f         func(*Report) *figure
	}{
		{"concurrency-rate", "Concurrency: logins per second against clients", concurrencyRate},
		{"concurrency-latency", "Concurrency: login latency against clients", concurrencyLatency},
		{"latency-distribution", "Latency distribution at the steady load", latencyCDF},
		{"cpu-over-time", "CPU over time: KDC and generator", cpuOverTime},
		{"rss-over-time", "KDC memory (RSS) over time", rssOverTime},
		{"degradation-rounds", "Degradation: time per round", degradationRounds},
	} {
		if f := m.f(rep); f != nil {
			out = append(out, chart{ID: m.id, Title: m.title, SVG: f.svg()})
		}
	}
	return out
}

// targetOf is the target of the report's metric name (display units) and
// whether it has it.
func targetOf(rep *Report, name string) (float64, bool) {
	for _, m := range rep.Metrics {
		if m.Name == name {
			return m.Target, true
		}
	}
	return 0, false
}

// phases marks where each test's samples begin on a chart over time.
func phases(p *figure, rep *Report) {
	last := ""
	for _, s := range rep.Samples {
		if s.Test != "" && s.Test != last {
			p.phase(s.Test, s.At.Seconds())
			last = s.Test
		}
	}
}

func concurrencyRate(rep *Report) *figure {
	c := rep.Concurrency
	if c == nil || len(c.Levels) == 0 {
		return nil
	}
	p := newFigure("clients", "logins/s")
	pts := make([]xy, len(c.Levels))
	for i, l := range c.Levels {
		pts[i] = xy{X: float64(l.Clients), Y: l.Rate}
	}
	p.yMin = 0
	p.line("logins/s", blue, pts, true)
	if t, ok := targetOf(rep, "top_level_peak_ratio"); ok {
		peak := 0.0
		for _, l := range c.Levels {
			peak = max(peak, l.Rate)
		}
		p.target(fmt.Sprintf("target: %s %% of the peak at the top level", fmtNum(t)), peak*t/100)
	}
	return p
}

func concurrencyLatency(rep *Report) *figure {
	c := rep.Concurrency
	if c == nil || len(c.Levels) == 0 {
		return nil
	}
	p := newFigure("clients", "ms")
	avg := make([]xy, len(c.Levels))
	p95 := make([]xy, len(c.Levels))
	for i, l := range c.Levels {
		avg[i] = xy{X: float64(l.Clients), Y: l.Latency.AvgMS}
		p95[i] = xy{X: float64(l.Clients), Y: l.Latency.P95MS}
	}
	p.yMin = 0
	p.line("average", blue, avg, true)
	p.line("p95", orange, p95, true)
	return p
}

// latencyCDF plots the share of requests answered within x ms, for
// logins and tickets of the latency load.
func latencyCDF(rep *Report) *figure {
	ol := rep.Latency
	if ol == nil || ol.Logins == nil {
		return nil
	}
	by := map[string][]float64{}
	for _, rc := range ol.Logins.Records {
		if rc.Class == record.ClassSuccess {
			by[rc.Kind] = append(by[rc.Kind], ms(rc.Latency))
		}
	}
	if len(by[KindAS]) == 0 {
		return nil
	}
	p := newFigure("latency (ms)", "share of requests answered")
	p.yMin, p.yMax = 0, 1
	for _, k := range []struct {
		kind, name string
		c          string
	}{{KindAS, "logins", blue}, {KindTGS, "service tickets", orange}} {
		v := by[k.kind]
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		pts := make([]xy, 0, len(v))
		step := max(1, len(v)/500) // enough points for the curve, a small file
		for i := 0; i < len(v); i += step {
			pts = append(pts, xy{X: v[i], Y: float64(i+1) / float64(len(v))})
		}
		pts = append(pts, xy{X: v[len(v)-1], Y: 1})
		p.line(k.name, k.c, pts, false)
	}
	p.target("p95", 0.95)
	p.target("p99", 0.99)
	for _, t := range []struct{ metric, label string }{{"login_p95_seconds", "login p95 target"}, {"ticket_p95_seconds", "ticket p95 target"}} {
		if v, ok := targetOf(rep, t.metric); ok {
			p.phase(t.label+" "+fmtNum(v)+" ms", v)
		}
	}
	return p
}

// cpuOverTime is CPU % of one core between consecutive samples.
func cpuOverTime(rep *Report) *figure {
	s := rep.Samples
	if len(s) < 2 {
		return nil
	}
	var kdc, gen []xy
	for i := 1; i < len(s); i++ {
		dt := (s[i].At - s[i-1].At).Seconds()
		if dt < 0.2 { // on-demand samples close together are noise
			continue
		}
		t := s[i].At.Seconds()
		kdc = append(kdc, xy{X: t, Y: 100 * (s[i].KDCCPU - s[i-1].KDCCPU).Seconds() / dt})
		gen = append(gen, xy{X: t, Y: 100 * (s[i].GenCPU - s[i-1].GenCPU).Seconds() / dt})
	}
	if len(kdc) == 0 {
		return nil
	}
	p := newFigure("seconds since the start", "% of one core")
	p.yMin = 0
	p.line("KDC (all krb5kdc processes)", blue, kdc, false)
	p.line("generator", orange, gen, false)
	if t, ok := targetOf(rep, "kdc_cpu_ratio"); ok {
		p.target(fmt.Sprintf("KDC CPU target at the steady load (latency): %s %%", fmtNum(t)), t)
	}
	phases(p, rep)
	return p
}

func rssOverTime(rep *Report) *figure {
	var pts []xy
	for _, s := range rep.Samples {
		if s.KDCProcesses > 0 {
			pts = append(pts, xy{X: s.At.Seconds(), Y: float64(s.KDCRSS) / (1 << 20)})
		}
	}
	if len(pts) < 2 {
		return nil
	}
	p := newFigure("seconds since the start", "MB")
	p.yMin = 0
	p.line("KDC RSS", blue, pts, false)
	if t, ok := targetOf(rep, "kdc_rss_peak_bytes"); ok {
		p.target(fmt.Sprintf("target: %s MB", fmtNum(t)), t)
	}
	phases(p, rep)
	return p
}

func degradationRounds(rep *Report) *figure {
	d := rep.Degradation
	if d == nil || len(d.RoundsS) == 0 {
		return nil
	}
	p := newFigure("round", "seconds")
	bars := make([]xy, len(d.RoundsS))
	p.xNames = make([]string, len(d.RoundsS))
	for i, r := range d.RoundsS {
		bars[i] = xy{X: float64(i), Y: r}
		p.xNames[i] = fmt.Sprint(i + 1)
	}
	p.marks = append(p.marks, mark{kind: barMark, color: blue, pts: bars})
	if t, ok := targetOf(rep, "last_round_slowdown_ratio"); ok && len(d.RoundsS) > 0 {
		p.target(fmt.Sprintf("target: the first round + %s %%", fmtNum(t)), d.RoundsS[0]*(1+t/100))
	}
	return p
}
