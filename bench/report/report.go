// Package report is what one bench run found (Report, the schema of
// report.json) and its renderings: report.md, report.json, raw CSVs,
// report.html and the krb5_bench_* metrics. It knows nothing of how the
// numbers were made: everything it renders is in the Report.
package report

import (
	"slices"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/record"
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
	// EnvironmentLimited are the tests whose figures something other
	// than the KDC held down (the generator, other processes on its CPUs,
	// the round trips, the hypervisor, a late generator): their FAILs may
	// not be the KDC's (VerdictNote).
	EnvironmentLimited []string `json:"environment_limited,omitempty"`

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
	// Capacity is the live capacity estimate at the latency load beside
	// the measured ceilings.
	Capacity *Capacity `json:"capacity,omitempty"`
	// Samples are the once-a-second resource readings of the whole run.
	Samples []Sample `json:"samples"`
	// Baseline is the comparison with an earlier run (bench --baseline).
	Baseline *Comparison `json:"baseline,omitempty"`
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
	// Repeats are the metric's values in each repetition of its test
	// (bench --count N, N > 1), in Unit and in the order they ran; Value
	// is their median and the verdict is the median's. Absent for a test
	// that ran once.
	Repeats []float64 `json:"repeats,omitempty"`
}

// TestResult says whether a test ran.
type TestResult struct {
	Name     string  `json:"name"`
	Status   string  `json:"status"` // "pass", "fail", "error", "skipped"
	Error    string  `json:"error,omitempty"`
	Duration float64 `json:"duration_s"` // all its repetitions
	// Repeats is how many times it ran (bench --count); absent: once.
	Repeats int `json:"repeats,omitempty"`
	// Detail is the repetition whose numbers the test's section and raw
	// CSVs show (1-based; the one nearest the median); absent: the only.
	Detail int `json:"detail_repetition,omitempty"`
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

// Request kinds in records and raw CSVs: package record's.
const (
	KindAS  = record.KindAS
	KindTGS = record.KindTGS
)

// Record is one request as the generator wrote it: when it was due (open
// loop) or sent (closed loop), relative to the start of its load, how
// long it took, its kind and record.ClassSuccess or its error class. The
// generator's own type (package record's), so a load's records reach the
// report uncopied and the report does not link the generator.
type Record = record.Record

// Load is the result of one load (as, tgs, tcp, a concurrency level,
// latency, a degradation round).
type Load struct {
	Transport string        `json:"transport"`
	Clients   int           `json:"clients"`
	Wall      time.Duration `json:"wall_ns"`
	Requests  int           `json:"requests"`
	Errors    int           `json:"errors"`
	// Rate is successful requests (logins or tickets) per second.
	Rate float64 `json:"rate_per_s"`
	// FailedPct is failed requests as % of all.
	FailedPct float64 `json:"failed_pct"`
	Latency   Latency `json:"latency"`
	// ErrorClasses counts failures by class; ErrorTexts keeps the first
	// text of each class.
	ErrorClasses map[string]int    `json:"error_classes,omitempty"`
	ErrorTexts   map[string]string `json:"error_texts,omitempty"`
	CPU          CPUUse            `json:"cpu"`
	// KDCService is the KDC's own account of the load's requests, timed in
	// the kernel (Settings.KDCService); nil without it.
	KDCService *KDCService `json:"kdc_service,omitempty"`
	// GeneratorWaits is how often the batched generator blocked (sleeps
	// and polls): each wake-up costs CPU, so it wakes once per many
	// requests.
	GeneratorWaits int `json:"generator_waits,omitempty"`

	// Not in report.json: the generator's own counts, and the requests
	// (raw/*.csv).
	Sockets int      `json:"-"` // sockets the generator opened (the batched tcp load)
	Lowest  int      `json:"-"` // fewest requests in flight at a batch wait of any goroutine
	Records []Record `json:"-"`
	Kind    string   `json:"-"` // of the requests summarised
}

// OpenLoop is the latency load: sessions (a login then TGSPerLogin
// tickets) started by the clock, whatever the KDC's answers do.
type OpenLoop struct {
	LoginRate   float64 `json:"login_rate"`
	TGSPerLogin int     `json:"tgs_per_login"`
	Sessions    int     `json:"sessions"`
	Logins      *Load   `json:"logins"`
	Tickets     *Load   `json:"tickets"`
	// ErrorPct is failed requests (logins and tickets) as % of all.
	ErrorPct float64 `json:"error_pct"`
	// Behind counts sessions the generator started more than 1 ms after
	// their scheduled time; MaxBehindMS is the worst. Latencies are
	// measured from the scheduled time, so lateness shows in them too
	// (no coordinated omission), but a late generator means the KDC did
	// not get the load the schedule says.
	Behind      int     `json:"behind"`
	MaxBehindMS float64 `json:"max_behind_ms"`
	CPU         CPUUse  `json:"cpu"`
}

// Sample is one reading of the KDC's processes and of the generator.
type Sample struct {
	At     time.Duration `json:"at_ns"` // since the sampler started
	Test   string        `json:"test"`
	KDCCPU time.Duration `json:"kdc_cpu_ns"` // cumulative, all krb5kdc processes
	// KDCRunDelay is the time they waited, runnable, for a CPU (cumulative).
	KDCRunDelay  time.Duration `json:"kdc_cpu_wait_ns"`
	KDCRSS       int64         `json:"kdc_rss_bytes"`
	KDCProcesses int           `json:"kdc_processes"`
	// KDCCores is how many cores the KDC can keep busy: its processes
	// (each single-threaded), at most the CPUs they may run on.
	KDCCores int `json:"kdc_cores"`
	// SharedCPUs is how many CPUs both the serving KDC processes and the
	// generator may run on (0, left out: pinned apart, or a report from
	// before the field).
	SharedCPUs int           `json:"shared_cpus,omitempty"`
	GenCPU     time.Duration `json:"generator_cpu_ns"` // cumulative, this process
	// KDCSteal is the steal time of the StealCPUs CPUs the serving KDC
	// processes may run on (/proc/stat, cumulative): time a hypervisor
	// gave those virtual CPUs to another guest (0 on bare metal).
	KDCSteal  time.Duration `json:"kdc_cpus_steal_ns"`
	StealCPUs int           `json:"steal_cpus"`
	// The state sampler's counts so far (cumulative, see kdcStates): looks
	// at the serving KDC processes, the cores counted, those waiting for
	// the disk (D). Zero when no test was running.
	KDCStateTicks int64 `json:"kdc_state_ticks"`
	KDCStateCores int64 `json:"kdc_state_core_ticks"`
	KDCStateDisk  int64 `json:"kdc_state_disk_wait"`
}

// CPUUse compares the KDC's and the generator's CPU over one load.
type CPUUse struct {
	KDCPerRequestUS       float64 `json:"kdc_cpu_per_request_us"`
	GeneratorPerRequestUS float64 `json:"generator_cpu_per_request_us"`
	// Ratio is generator CPU / KDC CPU per request (what the generator
	// costs; whether it was the limit the waits and SharedCPUs tell).
	Ratio      float64 `json:"generator_to_kdc_ratio"`
	KDCBusyPct float64 `json:"kdc_busy_pct"` // % of one core per KDC process, averaged
	GenBusyPct float64 `json:"generator_busy_pct"`
	// KDCCores is how many cores the KDC could keep busy (Sample.KDCCores)
	// and KDCCoresBusyPct the % of them it did: near 100 the KDC was the
	// limit; well below, the generator or the network was.
	KDCCores        int     `json:"kdc_cores"`
	KDCCoresBusyPct float64 `json:"kdc_cores_busy_pct"`
	// KDCCPUWaitPct is the time the KDC was runnable but waited for a CPU
	// other processes had (schedstat run_delay), % of its cores.
	KDCCPUWaitPct float64 `json:"kdc_cpu_wait_pct"`
	// SharedCPUs is how many CPUs the KDC and the generator both may run
	// on throughout the load (Sample.SharedCPUs; 0: pinned apart, the
	// generator cannot have taken the KDC's CPU; left out of report.json).
	SharedCPUs int `json:"shared_cpus,omitempty"`
	// KDCDiskWaitPct is the share of its cores the KDC spent waiting for
	// its disk (the database writes after each AS with last_success or
	// lockout on), sampled every few milliseconds (bench.DefaultStatePeriod) from each serving process's
	// /proc state (KDCStateSamples looks; 0 when not sampled). CPU time
	// misses it.
	KDCStateSamples int64   `json:"kdc_state_samples"`
	KDCDiskWaitPct  float64 `json:"kdc_disk_wait_pct"`
	// KDCBusyTotalPct is how busy the KDC was on the cores it may use: its
	// CPU time, its waits for a CPU and for its disk (at most 100);
	// KDCIdlePct the rest, waiting for requests.
	KDCBusyTotalPct float64 `json:"kdc_busy_total_pct"`
	KDCIdlePct      float64 `json:"kdc_idle_pct"`
	// KDCStealPct is the share of the time of the CPUs the KDC may use
	// that the hypervisor gave to another guest (steal time): the KDC's
	// CPU time and its waits miss it, so that it shows as idle.
	KDCStealPct float64 `json:"kdc_steal_pct"`
	// SPAKEFloorUS is, for a load of SPAKE logins, the CPU of the client's
	// two scalar multiplications per login (one variable-base, one
	// fixed-base, edwards25519), timed on the generator's CPU just after
	// the load: what no generator of such logins can go below.
	SPAKEFloorUS float64 `json:"spake_floor_us,omitempty"`
}

// Settings are the knobs of the suite; the zero value of a field means the
// seed's default (see Defaults). Every field is a flag of `krb5-exporter
// bench` and a key of its configuration file.
type Settings struct {
	Tests             []string      `yaml:"tests" json:"tests"`
	Clients           int           `yaml:"clients" json:"clients"`
	Duration          time.Duration `yaml:"duration" json:"duration_ns"`
	LoginRate         float64       `yaml:"login_rate" json:"login_rate"`
	TGSPerLogin       int           `yaml:"tgs_per_login" json:"tgs_per_login"`
	ClientLevels      []int         `yaml:"client_levels" json:"client_levels"`
	LevelDuration     time.Duration `yaml:"level_duration" json:"level_duration_ns"`
	StartupRounds     int           `yaml:"startup_rounds" json:"startup_rounds"`
	KadminOperations  int           `yaml:"kadmin_operations" json:"kadmin_operations"`
	DumpRounds        int           `yaml:"dump_rounds" json:"dump_rounds"`
	DegradationRounds int           `yaml:"degradation_rounds" json:"degradation_rounds"`
	DegradationLogins int           `yaml:"degradation_logins" json:"degradation_logins"`
	// Generator of the as and tgs loads: GeneratorBatched (default) or
	// GeneratorBlocking.
	Generator string `yaml:"generator" json:"generator"`
	// BatchInflight is how many requests the batched generator keeps in
	// flight (more lets each system call carry more of them).
	BatchInflight int `yaml:"batch_inflight" json:"batch_inflight"`
	// Preauth is how the generator's logins pre-authenticate: auto (SPAKE
	// when the KDC offers it, else encrypted timestamp, as kinit), spake
	// or encrypted_timestamp.
	Preauth string `yaml:"preauth" json:"preauth"`
	// Shard "i/n" makes this generator the i-th of n against one KDC: it
	// uses every n-th user (a disjoint set) and 1/n of the latency rate;
	// startup, kadmin and dump run in shard 1 only. Empty: "1/1".
	Shard string `yaml:"shard" json:"shard,omitempty"`
	// Count is how many times the load tests (as, tgs, latency, cpu,
	// concurrency, tcp) run, alternating: each metric's value is the
	// median of its repetitions. 0 means 1.
	Count int `yaml:"count" json:"count,omitempty"`
	// KDCService times the KDC's requests in the kernel during the as,
	// tgs, tcp and latency loads (the kdcservice collector's BPF program):
	// the KDC's own service-time distribution beside the clients' latency.
	// Needs root or CAP_BPF and CAP_PERFMON, and the KDC on this host.
	KDCService bool `yaml:"kdc_service" json:"kdc_service,omitempty"`
	// Timeout bounds one request (a login's two round trips count apart).
	Timeout time.Duration `yaml:"request_timeout" json:"request_timeout_ns"`
	Targets Targets       `yaml:"targets" json:"targets"`
}

// Targets are the pass marks, in the units a person reads in the report.
type Targets struct {
	StartupMaxMS      float64 `yaml:"startup_max_ms" json:"startup_max_ms"`
	ASMinRate         float64 `yaml:"as_min_rate" json:"as_min_rate"`
	TGSMinRate        float64 `yaml:"tgs_min_rate" json:"tgs_min_rate"`
	LoginP95MaxMS     float64 `yaml:"login_p95_max_ms" json:"login_p95_max_ms"`
	LoginP99MaxMS     float64 `yaml:"login_p99_max_ms" json:"login_p99_max_ms"`
	TicketP95MaxMS    float64 `yaml:"ticket_p95_max_ms" json:"ticket_p95_max_ms"`
	TicketP99MaxMS    float64 `yaml:"ticket_p99_max_ms" json:"ticket_p99_max_ms"`
	ErrorMaxPct       float64 `yaml:"error_max_pct" json:"error_max_pct"`
	ConcurrencyMinPct float64 `yaml:"concurrency_min_pct" json:"concurrency_min_pct"`
	TCPMinRate        float64 `yaml:"tcp_min_rate" json:"tcp_min_rate"`
	KadminMinRate     float64 `yaml:"kadmin_min_rate" json:"kadmin_min_rate"`
	DumpMaxS          float64 `yaml:"dump_max_s" json:"dump_max_s"`
	CPUMaxPct         float64 `yaml:"cpu_max_pct" json:"cpu_max_pct"`
	MemoryMaxMB       float64 `yaml:"memory_max_mb" json:"memory_max_mb"`
	DegradationMaxPct float64 `yaml:"degradation_max_pct" json:"degradation_max_pct"`
	// GeneratorWarnFactor no longer decides a warning (the generator is
	// blamed from the KDC's waits for a CPU they share); kept so that
	// configurations and reports that set it still load.
	GeneratorWarnFactor float64 `yaml:"generator_warn_factor" json:"generator_warn_factor"`
	// KDCBusyWarnPct: warn when the KDC waited for a CPU or its disk
	// 100-KDCBusyWarnPct % of the time or more, or was less busy than
	// this (% of the cores it may use) during the as and tgs loads.
	KDCBusyWarnPct float64 `yaml:"kdc_busy_warn_pct" json:"kdc_busy_warn_pct"`
}

// Latency summarises request durations in milliseconds.
// KDCService is the service time of a load's requests as the KDC's
// process saw them, from the receive of each to the send of its reply
// (internal/kdcbpf): quantiles are upper bounds of the 9 %-wide buckets
// they fall in; the shares are of the summed service time.
type KDCService struct {
	Requests    int     `json:"requests"`
	AvgMS       float64 `json:"avg_ms"`
	P50MS       float64 `json:"p50_ms"`
	P95MS       float64 `json:"p95_ms"`
	P99MS       float64 `json:"p99_ms"`
	CPUPct      float64 `json:"cpu_pct"`
	RunqueuePct float64 `json:"runqueue_pct"`
	BlockedPct  float64 `json:"blocked_pct"`
	// StolenPct is the share on a CPU the hypervisor took (steal time).
	StolenPct float64 `json:"stolen_pct"`
	// QueueAvgMS is the mean time the UDP requests waited in the socket
	// before the KDC read them (0 for TCP).
	QueueAvgMS float64 `json:"queue_avg_ms"`
}

type Latency struct {
	Count  int     `json:"count"`
	AvgMS  float64 `json:"avg_ms"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P95MS  float64 `json:"p95_ms"`
	P99MS  float64 `json:"p99_ms"`
	P999MS float64 `json:"p99_9_ms"`
	MaxMS  float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// Median of xs (the mean of the middle two when their number is even);
// 0 for none.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
