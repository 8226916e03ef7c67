package report

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// TestFigureSVG: a chart is well-formed XML whatever the names in a
// results directory say (a name is text, never markup), a non-finite value
// is left out rather than breaking its path, and the axes carry round
// ticks over the data.
func TestFigureSVG(t *testing.T) {
	hostile := `</text><script>alert(1)</script><text>`
	f := newFigure("x & <y>", hostile)
	f.line(hostile, blue, []xy{{0, 0}, {1, math.NaN()}, {5, 3}, {math.Inf(1), 4}, {10, 9.5}}, true)
	c := &Comparison{Confidence: 0.95, FloorPct: 5, Metrics: []Change{
		{Name: hostile, Tested: true, ChangePct: 3, LowPct: -1, HighPct: 7},
		{Name: "as.rate", Tested: true, ChangePct: math.NaN(), LowPct: -2, HighPct: 2},
	}}
	for name, svg := range map[string]string{"line": string(f.svg()), "comparison": string(comparisonChart(c).svg())} {
		var texts []string
		var lines []string
		d := xml.NewDecoder(strings.NewReader(svg))
		d.Strict = true
		inText := false
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed: %v\n%s", name, err, svg)
			}
			switch e := tok.(type) {
			case xml.StartElement:
				if e.Name.Local == "script" {
					t.Errorf("%s: a name became a <script> element", name)
				}
				inText = e.Name.Local == "text"
				for _, a := range e.Attr {
					if a.Name.Local == "d" && strings.Contains(a.Value, "L") {
						lines = append(lines, a.Value)
					}
					if strings.Contains(a.Value, "NaN") || strings.Contains(a.Value, "Inf") {
						t.Errorf("%s: a non-finite value reached the drawing: %s=%q", name, a.Name.Local, a.Value)
					}
				}
			case xml.CharData:
				if inText {
					texts = append(texts, string(e))
				}
			case xml.EndElement:
				inText = false
			}
		}
		if !contains(texts, hostile) {
			t.Errorf("%s: the name is not shown as text: %q", name, texts)
		}
		if name != "line" {
			continue
		}
		if len(lines) != 1 || strings.Count(lines[0], "L") != 2 {
			t.Errorf("line: want one path through the 3 finite points, got %q", lines)
		}
		for _, want := range []string{"0", "2", "4", "6", "8", "10", "x & <y>"} {
			if !contains(texts, want) {
				t.Errorf("line: no %q among the labels %q", want, texts)
			}
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
