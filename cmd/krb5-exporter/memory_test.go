package main

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/image/font/sfnt"
	"gonum.org/v1/plot/font/liberation"

	"github.com/krb5-exporter/krb5-exporter/internal/memtrim"
)

// TestMemtrimChartFonts: chartFonts are the fonts gonum/plot parses at
// start-up, each once: gonum's Liberation collection has as many faces,
// with the same names, and the bytes behind each face are one of the
// table's slices.
func TestMemtrimChartFonts(t *testing.T) {
	names := map[string]int{}
	for i, ttf := range chartFonts {
		f, err := sfnt.Parse(ttf)
		if err != nil {
			t.Fatalf("font %d: %v", i, err)
		}
		n, err := f.Name(nil, sfnt.NameIDFull)
		if err != nil {
			t.Fatal(err)
		}
		names[n]++
	}
	coll := liberation.Collection()
	if len(coll) != len(chartFonts) || len(names) != len(chartFonts) {
		t.Fatalf("gonum's collection has %d faces, the table %d fonts with %d names", len(coll), len(chartFonts), len(names))
	}
	for _, face := range coll {
		n, err := face.Face.Name(nil, sfnt.NameIDFull)
		if err != nil {
			t.Fatal(err)
		}
		if names[n] != 1 {
			t.Errorf("gonum's %q is not in the table", n)
		}
	}
	// They are the executable's bytes (memtrim takes them), and read
	// back unchanged (from the file) after they are released.
	want := make([][]byte, len(chartFonts))
	total := 0
	for i, ttf := range chartFonts {
		want[i] = bytes.Clone(ttf)
		total += len(ttf)
	}
	n, err := memtrim.EmbeddedBytes(chartFonts...)
	if err != nil || n < total-2*len(chartFonts)*os.Getpagesize() {
		t.Errorf("released %d of %d bytes: %v", n, total, err)
	}
	for i := range chartFonts {
		if !bytes.Equal(chartFonts[i], want[i]) {
			t.Errorf("font %d changed", i)
		}
	}
}
