package main

import (
	"os"
	"runtime/debug"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

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

// dropStartupPages unmaps the executable's pages only start-up used
// (internal/memtrim).
func dropStartupPages(logger log.Logger) {
	if _, err := memtrim.ExecutablePages(); err != nil {
		level.Warn(logger).Log("msg", "cannot release the executable's start-up pages", "err", err)
	}
}
