package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Capacity is the daemon's live capacity estimate (package capacity's
// model, krb5_kdc_capacity_requests_per_second) taken over the latency
// load, beside the ceilings the as and tgs loads measured: every run
// checks the model. Absent from reports of runs before it, of runs
// without latency, and of shards and their merge.
type Capacity struct {
	// Workers is how many KDC processes served; CPUs how many CPUs
	// they could run on (0: unknown).
	Workers int `json:"workers"`
	CPUs    int `json:"cpus"`
	// LoadPerS is the KDC requests per second of the latency load (AS
	// and TGS): the load the estimate was taken at.
	LoadPerS float64       `json:"load_per_s"`
	Rows     []CapacityRow `json:"rows"`
}

// CapacityRow is one source's estimate for one request type (as, tgs,
// or mix: the latency load's shares of AS and TGS requests), in KDC
// requests per second.
type CapacityRow struct {
	Source  string `json:"source"` // proc, or kdcservice (with --kdc-service)
	Request string `json:"request"`
	// Requests of the type in the latency load.
	Requests float64 `json:"requests"`
	// CPUUS and OwnUS are the model's costs of a request: on CPU; on CPU
	// and blocked (or waiting for its disk).
	CPUUS float64 `json:"cpu_per_request_us"`
	OwnUS float64 `json:"own_per_request_us"`
	// EstimatePerS is the estimate; 0 when there is none, Why says why.
	EstimatePerS float64 `json:"estimate_per_s"`
	Why          string  `json:"why,omitempty"`
	// MeasuredPerS is the ceiling the as (logins/s times AS requests a
	// login) or tgs load measured; for mix, the two combined at the
	// latency load's shares (the harmonic mean so weighted). 0: not
	// measured. Ratio is the estimate over it.
	MeasuredPerS float64 `json:"measured_per_s"`
	Ratio        float64 `json:"estimate_to_measured"`
	// OwnCeilingPerS is the measured ceiling over the share of its cores
	// the KDC spent on its own work during the load (its CPU time and its
	// waits for its disk): what it would have answered with its cores to
	// itself, where other processes took CPU from it. OwnRatio is the
	// estimate over it.
	OwnCeilingPerS float64 `json:"own_time_ceiling_per_s"`
	OwnRatio       float64 `json:"estimate_to_own_time_ceiling"`
}

// writeCapacityMarkdown is report.md's capacity section.
func writeCapacityMarkdown(w io.Writer, rep *Report) {
	c := rep.Capacity
	fmt.Fprintln(w, "\n## capacity")
	fmt.Fprintf(w, "The daemon's capacity estimate (krb5_kdc_capacity_requests_per_second) at the latency load (%s KDC requests/s; %d serving process(es), %d CPU(s)) against the ceilings the as and tgs loads measured, in KDC requests per second.\n\n",
		fmtNum(c.LoadPerS), c.Workers, c.CPUs)
	fmt.Fprintln(w, "| Source | Request | Requests | CPU/req µs | Own/req µs | Estimate/s | Measured/s | Estimate/measured | KDC own-time ceiling/s | Estimate/own-time |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range c.Rows {
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", r.Source, r.Request, r.Requests, orDash(r.CPUUS), orDash(r.OwnUS),
			CapacityEstimateText(r), orDash(r.MeasuredPerS), ratioText(r.Ratio), orDash(r.OwnCeilingPerS), ratioText(r.OwnRatio))
	}
	var held []string
	for _, t := range []string{"as", "tgs"} {
		if slices.Contains(rep.EnvironmentLimited, t) {
			held = append(held, t)
		}
	}
	if len(held) > 0 {
		fmt.Fprintf(w, "\nSomething other than the KDC held %s down (the warnings): its measured ceiling is the host's; the KDC's own-time ceiling is the one the model predicts.\n", strings.Join(held, " and "))
	}
}

// CapacityEstimateText is a row's estimate, or why there is none.
func CapacityEstimateText(r CapacityRow) string {
	if r.EstimatePerS > 0 {
		return fmtNum(r.EstimatePerS)
	}
	if r.Why == "" {
		return "–"
	}
	return "none (" + r.Why + ")"
}

func orDash(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmtNum(v)
}

func ratioText(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}
