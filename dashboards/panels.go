package dashboards

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// datasource is the Prometheus chosen in the dashboard's datasource variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// sel is the selector every query of the dashboards starts from.
const sel = `job=~"$job", instance=~"$instance"`

// query is one Prometheus query of a panel and its legend.
type query struct {
	expr, legend string
}

func q(expr, legend string) query { return query{expr, legend} }

func targets(qs []query) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for i, x := range qs {
		out = append(out, prometheus.NewDataqueryBuilder().
			Expr(x.expr).
			LegendFormat(x.legend).
			RefId(string(rune('A'+i))))
	}
	return out
}

// limit is a threshold line drawn on a time series: the target it shows.
type limit struct {
	value float64
	color string
}

func thresholds(limits ...limit) *dashboard.ThresholdsConfigBuilder {
	steps := []dashboard.Threshold{{Color: "green"}}
	for _, l := range limits {
		steps = append(steps, dashboard.Threshold{Value: cog.ToPtr(l.value), Color: l.color})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps)
}

// graph is a time series panel; limits are drawn as dashed lines.
func graph(title, description, unit string, w, h uint32, qs []query, limits ...limit) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Span(w).Height(h).
		Min(0).
		FillOpacity(10).
		LineWidth(1).
		ShowPoints(common.VisibilityModeNever).
		Targets(targets(qs)).
		Thresholds(thresholds(limits...))
	if len(limits) > 0 {
		p.ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))
	}
	return p
}

// signedGraph is a graph whose values can be negative (a clock offset).
func signedGraph(title, description, unit string, w, h uint32, qs []query, limits ...limit) *timeseries.PanelBuilder {
	p := graph(title, description, unit, w, h, qs, limits...)
	p.Min(-120).Max(120)
	return p
}

// single is a stat panel of the last value.
func single(title, description, unit string, w, h uint32, qs []query, limits ...limit) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Span(w).Height(h).
		Targets(targets(qs)).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		Thresholds(thresholds(limits...))
}

// upDown is a stat panel of a 0/1 gauge, red at 0.
func upDown(title, description string, w, h uint32, qs []query) *stat.PanelBuilder {
	return binary(title, description, w, h, qs, "down", "up")
}

// binary is a stat panel of a 0/1 gauge shown as words, red at 0.
func binary(title, description string, w, h uint32, qs []query, zero, one string) *stat.PanelBuilder {
	p := single(title, description, "none", w, h, qs)
	p.Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
		{Color: "red"}, {Value: cog.ToPtr(1.0), Color: "green"},
	}))
	p.Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
		Type: dashboard.MappingTypeValueToText,
		Options: map[string]dashboard.ValueMappingResult{
			"0": {Text: cog.ToPtr(zero), Color: cog.ToPtr("red")},
			"1": {Text: cog.ToPtr(one), Color: cog.ToPtr("green")},
		},
	}}})
	return p
}

// heat is a heatmap of a classic histogram's buckets.
func heat(title, description string, w, h uint32, expr string) *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit("s").
		Span(w).Height(h).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s")).
		CellValues(heatmap.NewCellValuesBuilder().Unit("short")).
		WithTarget(prometheus.NewDataqueryBuilder().
			Expr(expr).
			LegendFormat("{{le}}").
			Format(prometheus.PromQueryFormatHeatmap).
			RefId("A"))
}

// info is a table of a query's series, one row per series, its labels as
// columns. value names the value column and unit is its unit; with value
// "" the value is left out (an info metric's constant 1).
func info(title, description string, w, h uint32, expr, value, unit string) *table.PanelBuilder {
	p := table.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit("none").
		Span(w).Height(h).
		WithTarget(prometheus.NewDataqueryBuilder().
			Expr(expr).
			Instant().
			Format(prometheus.PromQueryFormatTable).
			RefId("A"))
	organize := map[string]any{"excludeByName": map[string]bool{"Time": true}}
	if value == "" {
		organize["excludeByName"].(map[string]bool)["Value"] = true
	} else {
		organize["renameByName"] = map[string]string{"Value": value}
		p.OverrideByName(value, []dashboard.DynamicConfigValue{{Id: "unit", Value: unit}})
	}
	return p.WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: organize})
}

// timeline is a state timeline of 0/1 gauges shown as words, red at 0.
func timeline(title, description string, w, h uint32, qs []query, zero, one string) *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit("none").
		Span(w).Height(h).
		Targets(targets(qs)).
		ShowValue(common.VisibilityModeNever).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
			{Color: "red"}, {Value: cog.ToPtr(1.0), Color: "green"},
		})).
		Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
			Type: dashboard.MappingTypeValueToText,
			Options: map[string]dashboard.ValueMappingResult{
				"0": {Text: cog.ToPtr(zero), Color: cog.ToPtr("red")},
				"1": {Text: cog.ToPtr(one), Color: cog.ToPtr("green")},
			},
		}}})
}

// dashed draws the series whose legend ends in " target" as dashed lines:
// a target that comes from a metric, not a fixed threshold.
func dashed(p *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	return p.OverrideByRegexp(".* target$", []dashboard.DynamicConfigValue{
		{Id: "custom.lineStyle", Value: common.LineStyle{Fill: cog.ToPtr(common.LineStyleFillDash), Dash: []float64{10, 10}}},
		{Id: "custom.fillOpacity", Value: 0},
	})
}

// tag is the tag of every dashboard here: their links to each other find
// them by it.
const tag = "krb5-exporter"

// newDashboard starts a dashboard with the settings all share: the links
// to the others (by tag, keeping the time range and variables), the
// firing alerts of the selected exporters as annotations, and the
// runbook variable the panels' links use.
func newDashboard(title, uid, description string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"kerberos", tag}).
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("krb5-exporter dashboards").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{tag}).
			AsDropdown(false).
			IncludeVars(true).
			KeepTime(true)).
		Link(dashboard.NewDashboardLinkBuilder("Runbook").
			Type(dashboard.DashboardLinkTypeLink).
			Url("${runbook}").
			Tooltip("What each alert means and what to do (alerts/runbook.md; every exporter also serves it at /runbook).").
			TargetBlank(true)).
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("Alerts").
			Datasource(datasource).
			Enable(true).
			IconColor("red").
			Expr(`ALERTS{alertstate="firing", ` + sel + `}`).
			Step("60s").
			TitleFormat("{{alertname}}").
			TextFormat("{{severity}}: {{instance}}").
			TagKeys("alertname,severity")).
		WithVariable(dashboard.NewTextBoxVariableBuilder("runbook").
			Label("Runbook").
			Description("Where the panels' runbook links go: the runbook in the project's repository, or http://EXPORTER:10088/runbook, which every exporter serves (offline).").
			DefaultValue(dashboard.StringOrMap{String: cog.ToPtr(runbookURL)}).
			Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr(runbookURL)}, Value: dashboard.StringOrArrayOfString{String: cog.ToPtr(runbookURL)}}))
}

// runbookURL is the runbook the panels link to by default.
const runbookURL = "https://github.com/krb5-exporter/krb5-exporter/blob/main/alerts/runbook.md"

// runbook links a panel to the runbook sections of the alerts it shows.
func runbook(alerts ...string) []cog.Builder[dashboard.DashboardLink] {
	var out []cog.Builder[dashboard.DashboardLink]
	for _, a := range alerts {
		out = append(out, dashboard.NewDashboardLinkBuilder("Runbook: "+a).
			Type(dashboard.DashboardLinkTypeLink).
			Url("${runbook}#"+strings.ToLower(a)).
			TargetBlank(true))
	}
	return out
}

// variables are the datasource, job and instance template variables every
// dashboard has; jobs and instances are those that have the series from.
func variables(b *dashboard.DashboardBuilder, instanceMulti bool, from, instanceDescription string) {
	b.WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
		Label("Data source").
		Type("prometheus"))
	b.WithVariable(dashboard.NewQueryVariableBuilder("job").
		Label("Job").
		Description("Prometheus job of the scrapes.").
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(` + from + `, job)`)}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".+"))
	b.WithVariable(dashboard.NewQueryVariableBuilder("instance").
		Label("KDC").
		Description(instanceDescription).
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(` + from + `{job=~"$job"}, instance)`)}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(instanceMulti).
		IncludeAll(instanceMulti).
		AllValue(".+"))
}
