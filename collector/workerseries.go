package collector

import (
	"strconv"

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
type presetMetric struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair
	value   float64
	counter bool
}

func (m *presetMetric) Desc() *prometheus.Desc { return m.desc }

func (m *presetMetric) Write(out *dto.Metric) error {
	out.Label = m.labels
	v := m.value
	if m.counter {
		out.Counter = &dto.Counter{Value: &v}
	} else {
		out.Gauge = &dto.Gauge{Value: &v}
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
