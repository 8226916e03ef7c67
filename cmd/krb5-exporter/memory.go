package main

import (
	"os"
	"runtime/debug"
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
