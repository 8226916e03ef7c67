package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

var (
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
)

// charts renders the charts the report has data for, in a fixed order.
func charts(rep *Report) ([]chart, error) {
	var out []chart
	add := func(id, title string, p *plot.Plot, err error) error {
		if err != nil {
			return fmt.Errorf("chart %s: %w", id, err)
		}
		if p == nil {
			return nil
		}
		svg, err := renderSVG(p)
		if err != nil {
			return fmt.Errorf("chart %s: %w", id, err)
		}
		out = append(out, chart{ID: id, Title: title, SVG: template.HTML(svg)})
		return nil
	}
	type mk struct {
		id, title string
		f         func(*Report) (*plot.Plot, error)
	}
	for _, m := range []mk{
		{"concurrency-rate", "Concurrency: logins per second against clients", concurrencyRate},
		{"concurrency-latency", "Concurrency: login latency against clients", concurrencyLatency},
		{"latency-distribution", "Latency distribution at the steady load", latencyCDF},
		{"cpu-over-time", "CPU over time: KDC and generator", cpuOverTime},
		{"rss-over-time", "KDC memory (RSS) over time", rssOverTime},
		{"degradation-rounds", "Degradation: time per round", degradationRounds},
	} {
		p, err := m.f(rep)
		if err := add(m.id, m.title, p, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// renderSVG draws p as an SVG element (without the XML prolog, to inline
// in HTML).
func renderSVG(p *plot.Plot) ([]byte, error) {
	c := vgsvg.New(16*vg.Centimeter, 9*vg.Centimeter)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	s := b.Bytes()
	if i := bytes.Index(s, []byte("<svg")); i > 0 {
		s = s[i:]
	}
	return s, nil
}

func newPlot(x, y string) *plot.Plot {
	p := plot.New()
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p
}

func line(p *plot.Plot, name string, c color.Color, pts plotter.XYs, points bool) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
	}
	if points {
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		s.Color = c
		p.Add(s)
	}
	return nil
}

func concurrencyRate(rep *Report) (*plot.Plot, error) {
	c := rep.Concurrency
	if c == nil || len(c.Levels) == 0 {
		return nil, nil
	}
	p := newPlot("clients", "logins/s")
	pts := make(plotter.XYs, len(c.Levels))
	for i, l := range c.Levels {
		pts[i] = plotter.XY{X: float64(l.Clients), Y: l.Rate}
	}
	p.Y.Min = 0
	return p, line(p, "logins/s", blue, pts, true)
}

func concurrencyLatency(rep *Report) (*plot.Plot, error) {
	c := rep.Concurrency
	if c == nil || len(c.Levels) == 0 {
		return nil, nil
	}
	p := newPlot("clients", "ms")
	avg := make(plotter.XYs, len(c.Levels))
	p95 := make(plotter.XYs, len(c.Levels))
	for i, l := range c.Levels {
		avg[i] = plotter.XY{X: float64(l.Clients), Y: l.Latency.AvgMS}
		p95[i] = plotter.XY{X: float64(l.Clients), Y: l.Latency.P95MS}
	}
	p.Y.Min = 0
	if err := line(p, "average", blue, avg, true); err != nil {
		return nil, err
	}
	return p, line(p, "p95", orange, p95, true)
}

// latencyCDF plots the share of requests answered within x ms, for
// logins and tickets of the latency load.
func latencyCDF(rep *Report) (*plot.Plot, error) {
	ol := rep.Latency
	if ol == nil || ol.Logins == nil {
		return nil, nil
	}
	by := map[string][]float64{}
	for _, rc := range ol.Logins.Records {
		if rc.Class == "success" {
			by[rc.Kind] = append(by[rc.Kind], ms(rc.Latency))
		}
	}
	if len(by[KindAS]) == 0 {
		return nil, nil
	}
	p := newPlot("latency (ms)", "share of requests answered")
	p.Y.Min, p.Y.Max = 0, 1
	for _, k := range []struct {
		kind, name string
		c          color.Color
	}{{KindAS, "logins", blue}, {KindTGS, "service tickets", orange}} {
		v := by[k.kind]
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		pts := make(plotter.XYs, 0, len(v))
		step := max(1, len(v)/500) // enough points for the curve, a small file
		for i := 0; i < len(v); i += step {
			pts = append(pts, plotter.XY{X: v[i], Y: float64(i+1) / float64(len(v))})
		}
		pts = append(pts, plotter.XY{X: v[len(v)-1], Y: 1})
		if err := line(p, k.name, k.c, pts, false); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// cpuOverTime is CPU % of one core between consecutive samples.
func cpuOverTime(rep *Report) (*plot.Plot, error) {
	s := rep.Samples
	if len(s) < 2 {
		return nil, nil
	}
	var kdc, gen plotter.XYs
	for i := 1; i < len(s); i++ {
		dt := (s[i].At - s[i-1].At).Seconds()
		if dt < 0.2 { // on-demand samples close together are noise
			continue
		}
		t := s[i].At.Seconds()
		kdc = append(kdc, plotter.XY{X: t, Y: 100 * (s[i].KDCCPU - s[i-1].KDCCPU).Seconds() / dt})
		gen = append(gen, plotter.XY{X: t, Y: 100 * (s[i].GenCPU - s[i-1].GenCPU).Seconds() / dt})
	}
	if len(kdc) == 0 {
		return nil, nil
	}
	p := newPlot("seconds since the start", "% of one core")
	p.Y.Min = 0
	if err := line(p, "KDC (all krb5kdc processes)", blue, kdc, false); err != nil {
		return nil, err
	}
	return p, line(p, "generator", orange, gen, false)
}

func rssOverTime(rep *Report) (*plot.Plot, error) {
	var pts plotter.XYs
	for _, s := range rep.Samples {
		if s.KDCProcesses > 0 {
			pts = append(pts, plotter.XY{X: s.At.Seconds(), Y: float64(s.KDCRSS) / (1 << 20)})
		}
	}
	if len(pts) < 2 {
		return nil, nil
	}
	p := newPlot("seconds since the start", "MB")
	p.Y.Min = 0
	return p, line(p, "KDC RSS", blue, pts, false)
}

func degradationRounds(rep *Report) (*plot.Plot, error) {
	d := rep.Degradation
	if d == nil || len(d.RoundsS) == 0 {
		return nil, nil
	}
	p := newPlot("round", "seconds")
	bars, err := plotter.NewBarChart(plotter.Values(d.RoundsS), vg.Points(20))
	if err != nil {
		return nil, err
	}
	bars.Color = blue
	p.Add(bars)
	names := make([]string, len(d.RoundsS))
	for i := range names {
		names[i] = fmt.Sprint(i + 1)
	}
	p.NominalX(names...)
	return p, nil
}
