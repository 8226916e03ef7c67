package collector

import (
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// With krb5kdc -w 64, the per-worker series are most of a scrape's
// series (3 of every 5 at -w 64); prometheus.MustNewConstMetric checks,
// sorts and allocates their label pairs anew each time. A worker index's
// label pairs never change, so they are built once per index (the index
// is bounded by the number of workers) and shared, read-only, by every
// scrape's metrics.

// presetMetric is a const metric whose label pairs were built once.
// Its Write points into the metric itself (one allocation a series).
type presetMetric struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair
	value   float64
	counter bool
	g       dto.Gauge
	c       dto.Counter
}

func (m *presetMetric) Desc() *prometheus.Desc { return m.desc }

func (m *presetMetric) Write(out *dto.Metric) error {
	out.Label = m.labels
	if m.counter {
		m.c.Value = &m.value
		out.Counter = &m.c
	} else {
		m.g.Value = &m.value
		out.Gauge = &m.g
	}
	return nil
}

// workerLabels are the label pairs of one worker index: CPU by mode, and
// start time.
type workerLabels struct {
	user, system, start []*dto.LabelPair
}

// workerLabelSet builds and keeps the label pairs of each worker index.
type workerLabelSet struct {
	cpu, start *prometheus.Desc
	byIndex    []workerLabels
	lex        []int // 0 ... len(byIndex)-1 in the order of their strings
	pos        []int // reused by inOrder
}

// inOrder appends to out the positions in idx (worker indexes, distinct)
// in the order of the indexes as strings: "0", "1", "10", "11", ... "2".
func (w *workerLabelSet) inOrder(idx []int, out []int) []int {
	for _, i := range idx {
		w.get(i)
	}
	if len(w.lex) != len(w.byIndex) {
		w.lex = w.lex[:0]
		for i := range w.byIndex {
			w.lex = append(w.lex, i)
		}
		slices.SortFunc(w.lex, func(a, b int) int { return strings.Compare(strconv.Itoa(a), strconv.Itoa(b)) })
	}
	w.pos = slices.Grow(w.pos[:0], len(w.byIndex))[:len(w.byIndex)]
	for i := range w.pos {
		w.pos[i] = -1
	}
	for at, i := range idx {
		w.pos[i] = at
	}
	for _, i := range w.lex {
		if at := w.pos[i]; at >= 0 {
			out = append(out, at)
		}
	}
	return out
}

func (w *workerLabelSet) get(i int) *workerLabels {
	for len(w.byIndex) <= i {
		idx := strconv.Itoa(len(w.byIndex))
		w.byIndex = append(w.byIndex, workerLabels{
			user:   prometheus.MakeLabelPairs(w.cpu, []string{idx, "user"}),
			system: prometheus.MakeLabelPairs(w.cpu, []string{idx, "system"}),
			start:  prometheus.MakeLabelPairs(w.start, []string{idx}),
		})
	}
	return &w.byIndex[i]
}
