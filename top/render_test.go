package top

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// wantScreen samples g once and writes the screen in the default view:
// it must hold each of want and no escape character (a daemon's label
// values are not trusted).
func wantScreen(t *testing.T, g prometheus.Gatherer, want ...string) {
	t.Helper()
	snap, err := NewSampler(g).Sample(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Write(&b, snap, View{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape character reached the output:\n%q", out)
	}
}

// Printable escapes C0, DEL, C1, format characters, backslashes and bytes
// that are not UTF-8, and leaves other text, non-ASCII letters included.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"kdc1.example.com": "kdc1.example.com",
		"Zürich 2":         "Zürich 2",
		"a\x1b[2Jb":        `a\x1b[2Jb`,
		"\r\t\a\x00\x7f":   `\r\t\a\x00\x7f`,
		"\u0085\u009b":     `\u0085\u009b`,
		"a\u202eb":         `a\u202eb`,
		`a\x1b`:            `a\\x1b`,
		"a\x9bb\xff":       `a\x9bb\xff`,
		"\ufffd":           "\ufffd",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %s, want %s", in, got, want)
		}
	}
}

// A storm, as KDCClientStorm judges it (one name above talkers.StormRate),
// is a headline; not while the KDC answers nothing, nor below the rate.
func TestStormHeadline(t *testing.T) {
	snap := Snapshot{KDCKnown: true, KDCUp: true, Rows: []Row{{Name: "0", PID: 10}},
		Talkers: []Talker{{Kind: "requests by address", Name: "127.0.0.5", Rate: 26.3}, {Kind: "requests by client", Name: "u1@R", Rate: 12}}}
	text := func(s Snapshot) string {
		var b strings.Builder
		Write(&b, s, View{Sort: ByCPU})
		return b.String()
	}
	if got := text(snap); !strings.Contains(got, "\nSTORM: address 127.0.0.5 sends 26.3 requests/s  (KDCClientStorm above 20.0/s)\n") || strings.Contains(got, "STORM: client") {
		t.Errorf("storm headline:\n%s", got)
	}
	snap.KDCUp = false
	if got := text(snap); strings.Contains(got, "STORM") {
		t.Errorf("a storm shown while the KDC answers nothing:\n%s", got)
	}
}

// On a short terminal the process rows stay: the lines above them give
// way, and say how many.
func TestRowsBeforeDetails(t *testing.T) {
	snap := Snapshot{KDCKnown: true, KDCUp: true}
	for i := range 5 {
		snap.Rows = append(snap.Rows, Row{Name: strconv.Itoa(i), PID: 100 + i})
	}
	for i := range 12 {
		snap.Talkers = append(snap.Talkers, Talker{Kind: "failures by kind" + strconv.Itoa(i), Name: "n", Rate: 1})
	}
	var b strings.Builder
	Write(&b, snap, View{Sort: ByName, Width: 80, Height: 20})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) > 20 {
		t.Errorf("%d lines on 20", len(lines))
	}
	for i := range 5 {
		if !strings.Contains(b.String(), "\n"+strconv.Itoa(i)+" ") {
			t.Errorf("row %d not shown:\n%s", i, b.String())
		}
	}
	if !strings.Contains(b.String(), "lines not shown: a taller terminal shows them") {
		t.Errorf("no word of the lines left out:\n%s", b.String())
	}
}
