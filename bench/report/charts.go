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
	return p
}
