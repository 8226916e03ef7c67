package tailer

import (
	"sync/atomic"
	"time"
)

// Rotation kinds: how the followed path stopped naming the file being read.
const (
	RotationRename   = iota // renamed away, a new file in its place (logrotate create)
	RotationDelete          // deleted; read to its end, the next file read from its start
	RotationTruncate        // truncated in place (logrotate copytruncate)
	NumRotationKinds
)

// RotationNames are label values for the rotation kinds.
var RotationNames = [NumRotationKinds]string{"rename", "delete", "truncate"}

// What a restart found when it compared the saved position with the disk.
const (
	MismatchRotatedRecovered = iota // replaced while stopped; the old file was found and read on
	MismatchRotatedLost             // replaced while stopped; the old file is gone, its unread end is lost
	MismatchTruncated               // shorter than the saved position: read again from the start
	MismatchRewritten               // same size or longer but other content: read again from the start
	NumMismatchKinds
)

// MismatchNames are label values for the restart mismatches.
var MismatchNames = [NumMismatchKinds]string{"rotated_recovered", "rotated_lost", "truncated", "rewritten"}

// Stats are one tailer's counters and gauges, read by the metrics code.
type Stats struct {
	Lines       atomic.Uint64 // complete lines handed on
	Bytes       atomic.Uint64 // bytes read
	Rotations   [NumRotationKinds]atomic.Uint64
	Mismatches  [NumMismatchKinds]atomic.Uint64
	CopyFound   atomic.Uint64 // truncations whose copy was found and read to its end
	Discovered  atomic.Uint64 // rotated files found that were never open, read from their start
	Unread      atomic.Uint64 // files whose end had to be read but were gone (lines may be lost)
	ReadErrors  atomic.Uint64 // open, stat and read errors other than "does not exist"
	BytesBehind atomic.Int64  // file sizes minus read positions at the last check
	Open        atomic.Bool   // the path names an open file
	Inotify     atomic.Bool   // change notification works (otherwise polling only)
	// LastRotation is when the last rotation was seen (Unix nanoseconds;
	// 0: none) and LastRotationKind its kind, for the status page.
	LastRotation     atomic.Int64
	LastRotationKind atomic.Int32
}

// rotated counts a rotation of kind seen at now.
func (s *Stats) rotated(kind int, now time.Time) {
	s.Rotations[kind].Add(1)
	s.LastRotationKind.Store(int32(kind))
	s.LastRotation.Store(now.UnixNano())
}
