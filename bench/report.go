package bench

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// SchemaVersion of report.json (docs/bench.md); bumped on any change that
// is not an added field.
const SchemaVersion = 1

// Verdicts of a metric and of a report.
const (
	Pass = "PASS"
	Fail = "FAIL"
)

// Report is everything one run found; report.json is this struct.
type Report struct {
	Schema   int       `json:"schema"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Verdict is PASS when every metric passed and no test failed to run.
	Verdict  string       `json:"verdict"`
	Machine  Machine      `json:"machine"`
	System   SystemInfo   `json:"system"`
	Settings Settings     `json:"settings"`
	Metrics  []Metric     `json:"metrics"`
	Tests    []TestResult `json:"tests"`
	Warnings []string     `json:"warnings"`

	Startup     *Startup     `json:"startup,omitempty"`
	AS          *Load        `json:"as,omitempty"`
	TGS         *Load        `json:"tgs,omitempty"`
	Latency     *OpenLoop    `json:"latency,omitempty"`
	Memory      *Memory      `json:"memory,omitempty"`
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	TCP         *TCP         `json:"tcp,omitempty"`
	Kadmin      *Kadmin      `json:"kadmin,omitempty"`
	Dump        *Dump        `json:"dump,omitempty"`
	Degradation *Degradation `json:"degradation,omitempty"`
	// Samples are the once-a-second resource readings of the whole run.
	Samples []Sample `json:"samples"`
}

// Machine is where the run happened.
type Machine struct {
	Cores       int    `json:"cores"`
	Model       string `json:"cpu_model"`
	Kernel      string `json:"kernel"`
	KRB5Version string `json:"krb5_version"`
	GoVersion   string `json:"go_version"`
}

// SystemInfo is what decides the numbers on the KDC's side.
type SystemInfo struct {
	Realm    string            `json:"realm"`
	KDC      string            `json:"kdc"`
	Users    int               `json:"users"`
	Services int               `json:"services"`
	Settings map[string]string `json:"settings"`
	// Preauth is the pre-authentication the generator used.
	Preauth string `json:"generator_preauth"`
}

// Metric is one row of the summary table: a measured value against its
// target. Value and Target are in Unit (what a person reads); Base is the
// value in base units, as exported to Prometheus under Name.
type Metric struct {
	Test    string  `json:"test"`
	Name    string  `json:"name"`
	Label   string  `json:"label"`
	Unit    string  `json:"unit"`
	Value   float64 `json:"value"`
	Op      string  `json:"op"` // ">=" or "<="
	Target  float64 `json:"target"`
	Verdict string  `json:"verdict"`
	Base    float64 `json:"base_value"`
}

// TestResult says whether a test ran.
type TestResult struct {
	Name     string  `json:"name"`
	Status   string  `json:"status"` // "pass", "fail", "error", "skipped"
	Error    string  `json:"error,omitempty"`
	Duration float64 `json:"duration_s"`
}

// Per-test details.
type (
	// Startup: time from starting the KDC to the first ticket, per round.
	Startup struct {
		RoundsMS []float64 `json:"rounds_ms"`
		AvgMS    float64   `json:"avg_ms"`
		MaxMS    float64   `json:"max_ms"`
		// Tries is the number of logins tried (every 10 ms) per round.
		Tries []int `json:"tries"`
	}
	// Memory: KDC resident memory before and during the latency load.
	Memory struct {
		IdleBytes int64 `json:"idle_bytes"`
		PeakBytes int64 `json:"peak_bytes"`
	}
	// Concurrency: the as load at each client level.
	Concurrency struct {
		Levels   []*Load `json:"levels"`
		PeakRate float64 `json:"peak_rate"`
		TopPct   float64 `json:"top_level_pct_of_peak"`
	}
	// TCP: the as load over TCP.
	TCP struct {
		Load       *Load   `json:"load"`
		PctOfUDP   float64 `json:"pct_of_udp_rate,omitempty"`
		UDPRateRef float64 `json:"udp_rate,omitempty"`
	}
	// Kadmin: one batch per kind of operation.
	Kadmin struct {
		Prefix     string        `json:"-"` // never reported: harmless, but unique per run
		Operations int           `json:"operations"`
		Kinds      []KadminBatch `json:"kinds"`
		Slowest    float64       `json:"slowest_ops_per_s"`
		Removed    int           `json:"cleanup_removed"`
	}
	// KadminBatch is one kadmin session of one kind.
	KadminBatch struct {
		Kind      string  `json:"kind"`
		Command   string  `json:"command"`
		Completed int     `json:"completed"`
		Seconds   float64 `json:"seconds"`
		Rate      float64 `json:"ops_per_s"`
		FirstErr  string  `json:"first_error,omitempty"`
	}
	// Dump: kdb5_util dump rounds.
	Dump struct {
		RoundsS []float64 `json:"rounds_s"`
		AvgS    float64   `json:"avg_s"`
		Bytes   int64     `json:"bytes"`
	}
	// Degradation: the same work repeated.
	Degradation struct {
		LoginsPerRound int       `json:"logins_per_round"`
		RoundsS        []float64 `json:"rounds_s"`
		SlopePctRound  float64   `json:"slope_pct_per_round"`
		LastVsFirstPct float64   `json:"last_vs_first_pct"`
		Errors         int       `json:"errors"`
	}
)

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("klist", "-V").Output(); err == nil {
		m.KRB5Version = strings.TrimSpace(string(bytes.TrimPrefix(out, []byte("Kerberos 5 version "))))
	}
	return m
}
