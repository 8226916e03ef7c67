package report

import (
	"io"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Collector exposes the last report as krb5_bench_* metrics (docs/metrics.md,
// section "Bench"). Labels are bounded: test and metric names are fixed.
type Collector struct {
	result, target, pass, testOK, testDur, genRatio, kdcBusy, kdcDisk, lastRun, lastOK *prometheus.Desc
	// The comparison with --baseline's run.
	baseChange, baseLow, baseHigh, baseVerdict, baseDiffer *prometheus.Desc

	mu  sync.Mutex
	rep *Report
}

// NewCollector builds the descriptors once; Set installs a report.
func NewCollector() *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("krb5_bench_"+name, help, labels, nil)
	}
	return &Collector{
		result:   d("result", "Measured value of a bench metric, in base units (the metric name says which).", "test", "metric"),
		target:   d("target", "Target of a bench metric, in the same units as krb5_bench_result.", "test", "metric"),
		pass:     d("pass", "1 if the bench metric met its target in the last run, else 0.", "test", "metric"),
		testOK:   d("test_success", "1 if the test ran and all its metrics passed, 0 if it failed or could not run; skipped tests are absent.", "test"),
		testDur:  d("test_duration_seconds", "Wall time the test took.", "test"),
		genRatio: d("generator_cpu_ratio", "Load generator CPU per request divided by the KDC's during the test's load.", "test"),
		kdcBusy:  d("kdc_busy_ratio", "How busy the KDC was during the test's load, as a fraction of the cores it may use (its processes, at most its CPUs): its CPU time, its waits for a CPU and for its disk; near 1 the KDC was the limit.", "test"),
		kdcDisk:  d("kdc_disk_wait_ratio", "Share of the cores the KDC may use that it spent waiting for its own disk writes (database updates) during the test's load, sampled.", "test"),
		lastRun:  d("last_run_timestamp_seconds", "Unix time the last bench run finished."),
		lastOK:   d("last_run_success", "1 if every test of the last bench run passed, else 0."),

		baseChange:  d("baseline_change_ratio", "Change of a bench metric from the baseline run (--baseline), as a fraction of the baseline's value: the Hodges-Lehmann estimate from the runs' samples.", "test", "metric"),
		baseLow:     d("baseline_change_low_ratio", "Lower end of the 95 % confidence interval of krb5_bench_baseline_change_ratio (absent when too few samples).", "test", "metric"),
		baseHigh:    d("baseline_change_high_ratio", "Upper end of the 95 % confidence interval of krb5_bench_baseline_change_ratio (absent when too few samples).", "test", "metric"),
		baseVerdict: d("baseline_verdict", "-1 if the bench metric got significantly worse than in the baseline run (slower or worse, beyond the floor), 1 if better, 0 if no significant change.", "test", "metric"),
		baseDiffer:  d("baseline_settings_differ", "Settings that decide the numbers (krb5 version, kdc.conf, workers, pre-authentication, cores, pinning, load) that differ from the baseline run's."),
	}
}

// Set makes rep the report the collector exposes.
func (c *Collector) Set(rep *Report) {
	c.mu.Lock()
	c.rep = rep
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.result, c.target, c.pass, c.testOK, c.testDur, c.genRatio, c.kdcBusy, c.kdcDisk, c.lastRun, c.lastOK,
		c.baseChange, c.baseLow, c.baseHigh, c.baseVerdict, c.baseDiffer} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	rep := c.rep
	c.mu.Unlock()
	if rep == nil {
		return
	}
	g := prometheus.GaugeValue
	for _, m := range rep.Metrics {
		ch <- prometheus.MustNewConstMetric(c.result, g, m.Base, m.Test, m.Name)
		scale := 1.0
		if m.Value != 0 {
			scale = m.Base / m.Value
		} else {
			scale = MetricScale(m.Name)
		}
		ch <- prometheus.MustNewConstMetric(c.target, g, m.Target*scale, m.Test, m.Name)
		ch <- prometheus.MustNewConstMetric(c.pass, g, b2f(m.Verdict == Pass), m.Test, m.Name)
	}
	for _, t := range rep.Tests {
		if t.Status == "skipped" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.testOK, g, b2f(t.Status == "pass"), t.Name)
		ch <- prometheus.MustNewConstMetric(c.testDur, g, t.Duration, t.Name)
	}
	ratio := func(test string, u CPUUse) {
		if u.Ratio > 0 {
			ch <- prometheus.MustNewConstMetric(c.genRatio, g, u.Ratio, test)
		}
		if u.KDCCores > 0 {
			ch <- prometheus.MustNewConstMetric(c.kdcBusy, g, u.KDCBusyTotalPct/100, test)
		}
		if u.KDCStateSamples > 0 {
			ch <- prometheus.MustNewConstMetric(c.kdcDisk, g, u.KDCDiskWaitPct/100, test)
		}
	}
	if rep.AS != nil {
		ratio("as", rep.AS.CPU)
	}
	if rep.TGS != nil {
		ratio("tgs", rep.TGS.CPU)
	}
	if rep.Latency != nil {
		ratio("latency", rep.Latency.CPU)
	}
	if rep.TCP != nil {
		ratio("tcp", rep.TCP.Load.CPU)
	}
	if b := rep.Baseline; b != nil {
		for _, m := range b.Metrics {
			if m.Missing != "" {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.baseChange, g, m.ChangePct/100, m.Test, m.Name)
			if m.Tested {
				ch <- prometheus.MustNewConstMetric(c.baseLow, g, m.LowPct/100, m.Test, m.Name)
				ch <- prometheus.MustNewConstMetric(c.baseHigh, g, m.HighPct/100, m.Test, m.Name)
			}
			v := 0.0
			switch {
			case m.IsWorse:
				v = -1
			case m.Verdict != NoChange:
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.baseVerdict, g, v, m.Test, m.Name)
		}
		ch <- prometheus.MustNewConstMetric(c.baseDiffer, g, float64(b.Differ))
	}
	ch <- prometheus.MustNewConstMetric(c.lastRun, g, float64(rep.Finished.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(c.lastOK, g, b2f(rep.Verdict == Pass))
}

// MetricScale is the display-to-base factor of a metric (needed where
// its value is 0 and Base/Value cannot tell).
func MetricScale(name string) float64 {
	switch name {
	case "startup_seconds", "login_p95_seconds", "login_p99_seconds", "ticket_p95_seconds", "ticket_p99_seconds":
		return 1e-3
	case "error_ratio", "top_level_peak_ratio", "kdc_cpu_ratio", "last_round_slowdown_ratio":
		return 1e-2
	case "kdc_rss_peak_bytes":
		return 1 << 20
	}
	return 1
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// WriteTextfile writes the report's metrics in the text format, for
// node_exporter's textfile collector.
func WriteTextfile(w io.Writer, rep *Report) error {
	reg := prometheus.NewPedanticRegistry()
	c := NewCollector()
	c.Set(rep)
	if err := reg.Register(c); err != nil {
		return err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}
