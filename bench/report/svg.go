package report

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"strconv"
)

// figure is one chart of report.html, drawn as SVG by this file rather
// than by a plotting library: gonum/plot parsed its 12 embedded fonts in
// its package init, in every command of the binary, the daemon included
// (4 MB of font pages and 190 KiB of parsed faces it never used; issue
// #36). The browser lays out the text; nothing here measures glyphs.
type figure struct {
	xLabel, yLabel string
	// xMin...yMax fix an end of an axis unless a value lies beyond it;
	// NaN: from the data.
	xMin, xMax, yMin, yMax float64
	// xNames, yNames make an axis nominal: name i at coordinate i.
	xNames, yNames []string
	legend         bool
	marks          []mark
}

type markKind int

const (
	lineMark markKind = iota
	dotMark
	barMark  // a bar from 0 to each point's y
	xErrMark // a horizontal bar from lo[i] to hi[i] at each point's y
	hLine    // a dashed line across the plot at pts[0].Y: a target
	vLine    // a dashed line up the plot at pts[0].X, labelled: a phase's start
)

type mark struct {
	kind   markKind
	name   string // in the legend when not empty
	color  string
	pts    []xy
	lo, hi []float64 // xErrMark
	dashed bool
	label  string // vLine: written at its top
}

type xy struct{ X, Y float64 }

const (
	blue   = "#1f77b4"
	orange = "#ff7f0e"
	gray   = "#646464"
	red    = "#d62728"
)

func newFigure(x, y string) *figure {
	nan := math.NaN()
	return &figure{xLabel: x, yLabel: y, xMin: nan, xMax: nan, yMin: nan, yMax: nan, legend: true}
}

// target draws a target as a dashed line across the plot, in the legend
// as name; the y axis reaches it.
func (f *figure) target(name string, y float64) {
	f.marks = append(f.marks, mark{kind: hLine, name: name, color: red, pts: []xy{{Y: y}}, dashed: true})
}

// phase marks where something began (a test of the run) with a labelled
// vertical line.
func (f *figure) phase(label string, x float64) {
	f.marks = append(f.marks, mark{kind: vLine, color: gray, pts: []xy{{X: x}}, dashed: true, label: label})
}

func (f *figure) line(name, color string, pts []xy, points bool) {
	f.marks = append(f.marks, mark{kind: lineMark, name: name, color: color, pts: pts})
	if points {
		f.marks = append(f.marks, mark{kind: dotMark, color: color, pts: pts})
	}
}

// The drawing's size (16 × 9 cm, as before) in its own units, and the
// plot area's margins.
const (
	svgW, svgH                = 640.0, 360.0
	marginTop, marginRight    = 12.0, 16.0
	marginBottom, marginLeft  = 44.0, 58.0
	charW                     = 6.2 // a generous width of one 11 px sans-serif character
	maxNameW                  = 260.0
	tickLen, dotR, barHalfW   = 4.0, 2.5, 10.0
	strokeW, gridColor, fontF = 1.5, "#e0e0e0", `font-family="sans-serif" font-size="11"`
)

// svg draws f; non-finite values are left out (a point at NaN would make
// the whole path invalid).
func (f *figure) svg() template.HTML {
	xr := f.axisRange(f.xMin, f.xMax, len(f.xNames), func(m mark, i int) []float64 {
		switch m.kind {
		case xErrMark:
			return []float64{m.pts[i].X, m.lo[i], m.hi[i]}
		case hLine:
			return nil
		}
		return []float64{m.pts[i].X}
	})
	yr := f.axisRange(f.yMin, f.yMax, len(f.yNames), func(m mark, i int) []float64 {
		switch m.kind {
		case barMark:
			return []float64{0, m.pts[i].Y}
		case vLine:
			return nil
		}
		return []float64{m.pts[i].Y}
	})
	left := marginLeft
	if len(f.yNames) > 0 {
		w := 0.0
		for _, n := range f.yNames {
			w = max(w, float64(len([]rune(n)))*charW)
		}
		left = min(w, maxNameW) + 2*tickLen + 8
	}
	if f.yLabel != "" {
		left += 16
	}
	x0, x1, y0, y1 := left, svgW-marginRight, svgH-marginBottom, marginTop
	px := func(v float64) float64 { return x0 + (v-xr[0])/(xr[1]-xr[0])*(x1-x0) }
	py := func(v float64) float64 { return y0 + (v-yr[0])/(yr[1]-yr[0])*(y1-y0) }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="16cm" height="9cm" viewBox="0 0 %g %g" %s>`+"\n", svgW, svgH, fontF)
	fmt.Fprintf(&b, `<rect width="%g" height="%g" fill="white"/>`+"\n", svgW, svgH)

	// Grid and tick labels.
	var grid bytes.Buffer
	for _, t := range ticks(xr, f.xNames) {
		x := px(t.v)
		fmt.Fprintf(&grid, "M%.1f %.1fV%.1f", x, y0, y1)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+tickLen+12, esc(t.label))
	}
	for _, t := range ticks(yr, f.yNames) {
		y := py(t.v)
		fmt.Fprintf(&grid, "M%.1f %.1fH%.1f", x0, y, x1)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0-tickLen-3, y, esc(t.label))
	}
	if grid.Len() > 0 {
		fmt.Fprintf(&b, `<path d="%s" stroke="%s" fill="none"/>`+"\n", grid.String(), gridColor)
	}
	fmt.Fprintf(&b, `<path d="M%.1f %.1fV%.1fH%.1f" stroke="black" fill="none"/>`+"\n", x0, y1, y0, x1)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, svgH-8, esc(f.xLabel))
	if f.yLabel != "" {
		fmt.Fprintf(&b, `<text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y0+y1)/2, esc(f.yLabel))
	}

	// Marks: the axes hold every finite value (axisRange).
	for _, m := range f.marks {
		var d bytes.Buffer
		for i, p := range m.pts {
			if m.kind == hLine {
				p.X = xr[0] // only its y is a value
			}
			if m.kind == vLine {
				p.Y = yr[0]
			}
			if !finite(p.X) || !finite(p.Y) || m.kind == xErrMark && (!finite(m.lo[i]) || !finite(m.hi[i])) {
				continue
			}
			x, y := px(p.X), py(p.Y)
			switch m.kind {
			case lineMark:
				cmd := "L"
				if d.Len() == 0 {
					cmd = "M"
				}
				fmt.Fprintf(&d, "%s%.1f %.1f", cmd, x, y)
			case dotMark:
				fmt.Fprintf(&d, "M%.1f %.1fm-%g 0a%g %g 0 1 0 %g 0a%g %g 0 1 0 -%g 0", x, y, dotR, dotR, dotR, 2*dotR, dotR, dotR, 2*dotR)
			case barMark:
				fmt.Fprintf(&d, "M%.1f %.1fH%.1fV%.1fH%.1fZ", x-barHalfW, py(0), x+barHalfW, y, x-barHalfW)
			case xErrMark:
				fmt.Fprintf(&d, "M%.1f %.1fH%.1fM%.1f %.1fv8M%.1f %.1fv8", px(m.lo[i]), y, px(m.hi[i]), px(m.lo[i]), y-4, px(m.hi[i]), y-4)
			case hLine:
				fmt.Fprintf(&d, "M%.1f %.1fH%.1f", x0, y, x1)
			case vLine:
				fmt.Fprintf(&d, "M%.1f %.1fV%.1f", x, y0, y1)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", x+2, y1+10, m.color, esc(m.label))
			}
		}
		if d.Len() == 0 {
			continue
		}
		switch m.kind {
		case dotMark, barMark:
			fmt.Fprintf(&b, `<path d="%s" fill="%s"/>`+"\n", d.String(), m.color)
		default:
			dash := ""
			if m.dashed {
				dash = ` stroke-dasharray="4 4"`
			}
			fmt.Fprintf(&b, `<path d="%s" stroke="%s" stroke-width="%g" fill="none"%s/>`+"\n", d.String(), m.color, strokeW, dash)
		}
	}

	// Legend, top right in the plot area.
	if f.legend {
		y := y1 + 12
		for _, m := range f.marks {
			if m.name == "" {
				continue
			}
			dash := ""
			if m.dashed {
				dash = ` stroke-dasharray="4 4"`
			}
			fmt.Fprintf(&b, `<path d="M%.1f %.1fh20" stroke="%s" stroke-width="%g"%s/>`, x1-28, y, m.color, strokeW, dash)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x1-34, y, esc(m.name))
			y += 15
		}
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// axisRange is the axis's ends: [-0.5, n-0.5] for n names, else the
// fixed ends and the data's finite values (vals of each point of each
// mark), never empty.
func (f *figure) axisRange(lo, hi float64, names int, vals func(mark, int) []float64) [2]float64 {
	if names > 0 {
		return [2]float64{-0.5, float64(names) - 0.5}
	}
	dlo, dhi := math.Inf(1), math.Inf(-1)
	for _, m := range f.marks {
		for i := range m.pts {
			for _, v := range vals(m, i) {
				if finite(v) {
					dlo, dhi = min(dlo, v), max(dhi, v)
				}
			}
		}
	}
	// A fixed end moves out to a value beyond it: a chart shows all
	// its data, and needs no clipping (a clip path would need an id
	// unique in the page and a url() reference).
	if !finite(lo) || dlo < lo {
		lo = dlo
	}
	if !finite(hi) || dhi > hi {
		hi = dhi
	}
	switch {
	case !finite(lo) && !finite(hi):
		lo, hi = 0, 1
	case !finite(lo):
		lo = hi - 1
	case !finite(hi):
		hi = lo + 1
	case hi <= lo:
		lo, hi = lo-0.5, lo+0.5
	}
	return [2]float64{lo, hi}
}

type tick struct {
	v     float64
	label string
}

// ticks is a name at each integer of a nominal axis, else multiples of 1,
// 2 or 5 × 10^k, about 5 of them, within r.
func ticks(r [2]float64, names []string) []tick {
	var out []tick
	if len(names) > 0 {
		for i, n := range names {
			out = append(out, tick{float64(i), n})
		}
		return out
	}
	raw := (r[1] - r[0]) / 5
	step := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*step >= raw {
			step *= m
			break
		}
	}
	prec := max(0, -int(math.Floor(math.Log10(step))))
	for k := math.Ceil(r[0] / step); k*step <= r[1]+step*1e-9 && len(out) < 20; k++ {
		v := k * step
		if v == 0 {
			v = 0 // no "-0"
		}
		out = append(out, tick{v, strconv.FormatFloat(v, 'f', prec, 64)})
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// esc escapes text for SVG: metric and series names come from results
// directories, which travel between machines and people.
func esc(s string) string { return template.HTMLEscapeString(s) }
