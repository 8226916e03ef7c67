package collector

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// prometheus.MustNewConstMetric checks, sorts and allocates a series'
// label pairs anew at every scrape: about half of the collectors' own
// allocations. A series' label pairs depend only on its descriptor and
// label values, which repeat from scrape to scrape, so gauge and counter
// keep them, built once (by MustNewConstMetric, which also checks the
// values as before) and shared read-only by every scrape's metrics, as
// workerseries.go does for the per-worker series.

// maxPairLabels is the most label values a kept series has (five:
// krb5_kdcconf_info); series with more are built as before.
const maxPairLabels = 5

// maxKeptPairs bounds the kept series, whatever label values the host
// shows (replica names, ports): at the bound they are dropped, all at
// once, and built again as they come.
const maxKeptPairs = 4096

type pairKey struct {
	desc   *prometheus.Desc
	n      int
	values [maxPairLabels]string
}

// keptPairs is shared by every collector of the process (descriptors are
// per collector, so keys never collide); Collect runs one scrape at a
// time per KDCCollector, but tests run several.
var keptPairs = struct {
	sync.Mutex
	m    map[pairKey][]*dto.LabelPair
	slab []presetMetric // not yet handed out (newPreset)
}{m: map[pairKey][]*dto.LabelPair{}}

// constMetric is prometheus.MustNewConstMetric with the label pairs kept.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels []string) prometheus.Metric {
	if len(labels) > maxPairLabels {
		return prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	k := pairKey{desc: d, n: len(labels)}
	copy(k.values[:], labels)
	keptPairs.Lock()
	lp, ok := keptPairs.m[k]
	var m *presetMetric
	if ok {
		m = newPreset()
	}
	keptPairs.Unlock()
	if ok {
		m.desc, m.labels, m.value, m.counter = d, lp, v, t == prometheus.CounterValue
		return m
	}
	cm := prometheus.MustNewConstMetric(d, t, v, labels...)
	var out dto.Metric
	if t != prometheus.GaugeValue && t != prometheus.CounterValue || cm.Write(&out) != nil {
		return cm
	}
	keptPairs.Lock()
	if len(keptPairs.m) >= maxKeptPairs {
		clear(keptPairs.m)
	}
	keptPairs.m[k] = out.Label
	keptPairs.Unlock()
	return cm
}

// presetSlab is how many presetMetrics are allocated at once: a scrape
// sends about 80, which were as many allocations. Each is handed out once
// and never reused (the registry's dto.Metric of a scrape points into it
// until that scrape's reply is written); a slab is garbage once all its
// metrics are.
const presetSlab = 64

// newPreset returns a zero presetMetric from the current slab; call with
// keptPairs locked.
func newPreset() *presetMetric {
	if len(keptPairs.slab) == 0 {
		keptPairs.slab = make([]presetMetric, presetSlab)
	}
	m := &keptPairs.slab[0]
	keptPairs.slab = keptPairs.slab[1:]
	return m
}
