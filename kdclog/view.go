package kdclog

import (
	"time"

	"github.com/krb5-exporter/krb5-exporter/tailer"
)

// SourceStatus is what the status page shows of one log source.
type SourceStatus struct {
	Path, Type string
	Journal    bool
	// Open: the path names a file being followed (a journal source: a
	// journalctl runs).
	Open bool
	// Offset is the read position in the current file (bytes); Cursor a
	// journal source's last entry counted.
	Offset int64
	Cursor string
	// Lines read (journal: entries), Unparsed of them not understood.
	Lines, Unparsed, ReadErrors uint64
	// BytesBehind is the lag: bytes written but not yet read.
	BytesBehind int64
	Rotations   uint64
	// LastRotation is zero when none was seen since the start.
	LastRotation     time.Time
	LastRotationKind string
}

// Sources returns the configured sources, sorted by path: read when asked
// from the counters the metrics read.
func (m *Manager) Sources() []SourceStatus {
	srcs, _, _ := m.snapshot()
	out := make([]SourceStatus, 0, len(srcs))
	for _, ps := range srcs {
		s := SourceStatus{Path: ps.path, Type: ps.cfg.Type, Journal: ps.isJournal}
		for r := range ps.parse.unparsed {
			s.Unparsed += ps.parse.unparsed[r].Load()
		}
		pos, _ := m.store.Get(ps.path)
		if ps.isJournal {
			s.Open = ps.jour.Running.Load()
			s.Lines = ps.jour.Entries.Load()
			s.ReadErrors = ps.jour.ReadErrors.Load()
			s.Cursor = pos.Cursor
			out = append(out, s)
			continue
		}
		st := &ps.tail
		s.Open = st.Open.Load()
		s.Lines = st.Lines.Load()
		s.ReadErrors = st.ReadErrors.Load()
		s.BytesBehind = st.BytesBehind.Load()
		if pos.Current != nil {
			s.Offset = pos.Current.Offset
		}
		for k := range st.Rotations {
			s.Rotations += st.Rotations[k].Load()
		}
		if ns := st.LastRotation.Load(); ns != 0 {
			s.LastRotation = time.Unix(0, ns)
			s.LastRotationKind = tailer.RotationNames[st.LastRotationKind.Load()]
		}
		out = append(out, s)
	}
	return out
}
