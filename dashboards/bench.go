package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Bench shows krb5-exporter bench's results (the krb5_bench_* series of
// the bench daemon's /metrics, or of node_exporter's textfile collector):
// the last run against its targets, and each metric's trend across runs
// with its target dashed.
func Bench() *dashboard.DashboardBuilder {
	b := newDashboard("Kerberos KDC bench", "krb5-bench",
		"Results of krb5-exporter bench, the KDC test suite of the performance document, run on a schedule: the last run's verdict and each test's metrics against their targets, and how they move from run to run.")
	b.Time("now-30d", "now")
	b.Refresh("5m")
	variables(b, false, "krb5_bench_last_run_timestamp_seconds", "The bench daemon (or the node_exporter whose textfile it writes).")

	b.WithRow(dashboard.NewRowBuilder("Last run"))
	b.WithPanel(binary("Verdict", "Whether every test of the last run passed (krb5_bench_last_run_success).", 4, 5,
		[]query{q(`krb5_bench_last_run_success{`+sel+`}`, "last run")}, "FAIL", "PASS"))
	b.WithPanel(single("Since the last run", "Time since the last run finished. The daemon runs the suite every --interval (24h by default): older than two intervals, it is stuck or failing to start (its log says why).", "s", 4, 5,
		[]query{q(`time() - krb5_bench_last_run_timestamp_seconds{`+sel+`}`, "age")},
		limit{36 * 3600, "orange"}, limit{48 * 3600, "red"}))
	b.WithPanel(binary("Tests", "Each test of the last run: PASS when it ran and every metric met its target; FAIL when one did not or the test could not run. Skipped tests are not shown.", 16, 5,
		[]query{q(`krb5_bench_test_success{`+sel+`}`, "{{test}}")}, "FAIL", "PASS"))
	// The last run's results against their targets, one table per unit:
	// the groups of the trend panels below.
	for _, g := range resultGroups {
		b.WithPanel(results(g))
	}

	// The comparison with an earlier run (bench --baseline DIR).
	b.WithRow(dashboard.NewRowBuilder("Compared with the baseline"))
	b.WithPanel(binary("Against the baseline", "Whether each metric of the last run got significantly worse than in the --baseline run (krb5_bench_baseline_verdict -1: Mann-Whitney U test p < 0.05, interval excluding 0, change beyond --change-floor), whatever its target says. Empty without --baseline.", 12, 5,
		[]query{q(`krb5_bench_baseline_verdict{`+sel+`} > bool -1`, "{{test}} {{metric}}")}, "WORSE", "not worse"))
	b.WithPanel(single("Settings that differ", "Settings that decide the numbers (krb5 version, kdc.conf, workers, pre-authentication, cores, pinning, the load) that differ from the baseline run's: above 0 the comparison answers a different question.", "suffix: settings", 4, 5,
		[]query{q(`krb5_bench_baseline_settings_differ{`+sel+`}`, "settings")}, limit{1, "orange"}))
	b.WithPanel(single("Change from the baseline", "Each metric's change from the baseline run, a share of the baseline's value (Hodges-Lehmann estimate from the runs' samples; krb5_bench_baseline_change_low_ratio and _high_ratio are its 95 % interval). For rates a fall is worse, for latencies, errors and CPU a rise.", "percentunit", 8, 5,
		[]query{q(`krb5_bench_baseline_change_ratio{`+sel+`}`, "{{test}} {{metric}}")}))

	b.WithRow(dashboard.NewRowBuilder("Trend"))
	b.WithPanel(trend("Throughput", "Logins per second (as, tcp), service tickets per second (tgs) and the slowest kadmin operation per second at full load; the target (dashed) is a floor.", "reqps",
		`.*_per_second`))
	b.WithPanel(trend("Latency", "Login and service ticket p95 and p99 of the latency test's open-loop load; the target (dashed) is a ceiling.", "s",
		`(login|ticket)_p9[59]_seconds`))
	b.WithPanel(trend("Startup and dump", "Time from starting the KDC to its first ticket, and of a database dump while the KDC serves; the target (dashed) is a ceiling.", "s",
		`startup_seconds|dump_seconds`))
	b.WithPanel(trend("Ratios", "Error ratio and KDC CPU (share of one core) under the latency load, the top concurrency level's share of the peak (a floor), and the degradation test's last-round slowdown (a ceiling).", "percentunit",
		`.*_ratio`))
	b.WithPanel(trend("KDC memory peak", "Peak resident memory of the KDC during the latency load; the target (dashed) is a ceiling.", "bytes",
		`kdc_rss_peak_bytes`))
	b.WithPanel(timeline("Test history", "PASS or FAIL of each test, run after run.", 12, 8,
		[]query{q(`krb5_bench_test_success{`+sel+`}`, "{{test}}")}, "FAIL", "PASS"))
	b.WithPanel(graph("Test duration", "Wall time each test took.", "s", 12, 8,
		[]query{q(`krb5_bench_test_duration_seconds{`+sel+`}`, "{{test}}")}))
	b.WithPanel(graph("Generator CPU against the KDC's", "The load generator's CPU per request divided by the KDC's during each load test. A ratio alone is no finding: the report warns that the generator was the limit only where it shared the KDC's CPU and the KDC waited for one (docs/bench.md); 0.2 (dashed) is a reference line.", "percentunit", 12, 8,
		[]query{q(`krb5_bench_generator_cpu_ratio{`+sel+`}`, "{{test}}")}, limit{0.2, "orange"}))
	return b
}

// resultGroup is a group of bench metrics of one unit (by a regular
// expression on the metric label): a results table and a trend panel.
type resultGroup struct {
	title, unit, metrics string
}

var resultGroups = []resultGroup{
	{"Rates against targets", "reqps", `.*_per_second`},
	{"Times against targets", "s", `(login|ticket)_p9[59]_seconds|startup_seconds|dump_seconds`},
	{"Ratios against targets", "percentunit", `.*_ratio`},
	{"Memory against its target", "bytes", `kdc_rss_peak_bytes`},
}

// results is the table of the last run's metrics of one group: each with
// its value, the target it was held to, in the group's unit, and whether
// it met it.
func results(g resultGroup) *table.PanelBuilder {
	instant := func(expr, ref string) *prometheus.DataqueryBuilder {
		return prometheus.NewDataqueryBuilder().Expr(expr).Instant().Format(prometheus.PromQueryFormatTable).RefId(ref)
	}
	m := sel + `, metric=~"` + g.metrics + `"`
	return table.NewPanelBuilder().
		Title(g.title).
		Description("The last run's metrics of this unit, the target each was held to (a floor for rates and the concurrency share, a ceiling for the rest), and whether it met it.").
		Datasource(datasource).
		Unit(g.unit).
		Span(12).Height(7).
		WithTarget(instant(`krb5_bench_result{`+m+`}`, "A")).
		WithTarget(instant(`krb5_bench_target{`+m+`}`, "B")).
		WithTarget(instant(`krb5_bench_pass{`+m+`}`, "C")).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "job": true, "instance": true},
			"indexByName":   map[string]int{"test": 0, "metric": 1, "Value #A": 2, "Value #B": 3, "Value #C": 4},
			"renameByName":  map[string]string{"Value #A": "result", "Value #B": "target", "Value #C": "met"},
		}}).
		OverrideByName("met", []dashboard.DynamicConfigValue{
			{Id: "unit", Value: "none"},
			{Id: "mappings", Value: []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
				Type: dashboard.MappingTypeValueToText,
				Options: map[string]dashboard.ValueMappingResult{
					"0": {Text: cog.ToPtr("FAIL"), Color: cog.ToPtr("red")},
					"1": {Text: cog.ToPtr("PASS"), Color: cog.ToPtr("green")},
				},
			}}}},
			{Id: "custom.cellOptions", Value: map[string]string{"type": "color-text"}},
		})
}

// trend is one group of bench metrics (by a regular expression on the
// metric label) run after run, each with its target dashed.
func trend(title, description, unit, metrics string) *timeseries.PanelBuilder {
	m := sel + `, metric=~"` + metrics + `"`
	return dashed(graph(title, description, unit, 12, 8, []query{
		q(`krb5_bench_result{`+m+`}`, "{{test}} {{metric}}"),
		q(`krb5_bench_target{`+m+`}`, "{{test}} {{metric}} target"),
	}))
}
