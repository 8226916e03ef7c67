package main

import (
	"os"
	"runtime/debug"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"codeberg.org/go-fonts/liberation/liberationmonobold"
	"codeberg.org/go-fonts/liberation/liberationmonobolditalic"
	"codeberg.org/go-fonts/liberation/liberationmonoitalic"
	"codeberg.org/go-fonts/liberation/liberationmonoregular"
	"codeberg.org/go-fonts/liberation/liberationsansbold"
	"codeberg.org/go-fonts/liberation/liberationsansbolditalic"
	"codeberg.org/go-fonts/liberation/liberationsansitalic"
	"codeberg.org/go-fonts/liberation/liberationsansregular"
	"codeberg.org/go-fonts/liberation/liberationserifbold"
	"codeberg.org/go-fonts/liberation/liberationserifbolditalic"
	"codeberg.org/go-fonts/liberation/liberationserifitalic"
	"codeberg.org/go-fonts/liberation/liberationserifregular"

	"github.com/krb5-exporter/krb5-exporter/internal/memtrim"
)

// daemonGOGC is the daemon's GC target unless GOGC is set: its live heap
// is about 2 MB (log buffers, probe clients, series), and the default 100
// (with its 4 MB minimum) let the heap grow to 5 MB between collections.
// At 25 a collection comes every few seconds and costs well under a
// millisecond (docs/memory.md).
const daemonGOGC = 25

// setGOGC applies daemonGOGC when the environment does not choose.
func setGOGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(daemonGOGC)
	}
}

// chartFonts are the embedded TTF files gonum.org/v1/plot parses in its
// package init (font/liberation's Collection, the same 12) for the bench's
// charts, in every command: 4.3 MB the daemon reads once and never again.
// gonum keeps only the parsed faces, so the table names the font packages'
// vars itself; //go:embed []byte lives in the executable's writable data,
// which ExecutablePages leaves alone.
var chartFonts = [][]byte{
	liberationmonobold.TTF, liberationmonobolditalic.TTF, liberationmonoitalic.TTF, liberationmonoregular.TTF,
	liberationsansbold.TTF, liberationsansbolditalic.TTF, liberationsansitalic.TTF, liberationsansregular.TTF,
	liberationserifbold.TTF, liberationserifbolditalic.TTF, liberationserifitalic.TTF, liberationserifregular.TTF,
}

// dropStartupPages unmaps the executable's pages only start-up used and
// the chart fonts' pages (internal/memtrim); a chart drawn later maps the
// fonts back from the file.
func dropStartupPages(logger log.Logger) {
	if _, err := memtrim.ExecutablePages(); err != nil {
		level.Warn(logger).Log("msg", "cannot release the executable's start-up pages", "err", err)
	}
	if _, err := memtrim.EmbeddedBytes(chartFonts...); err != nil {
		level.Warn(logger).Log("msg", "cannot release the chart fonts' pages", "err", err)
	}
}
