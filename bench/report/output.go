package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// WriteAll writes report.md, report.json, raw/*.csv and, when textfile is
// set, the Prometheus textfile, into dir (created 0755; files 0644, each
// written by safefile.Write: synced and renamed into place, so a reader
// never sees half and a symbolic link planted at a name is replaced, not
// followed).
func WriteAll(rep *Report, dir, textfile string) error {
	if err := os.MkdirAll(filepath.Join(dir, "raw"), 0o755); err != nil {
		return err
	}
	var md bytes.Buffer
	WriteMarkdown(&md, rep)
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"report.md":   md.Bytes(),
		"report.json": append(js, '\n'),
	}
	for name, data := range rawCSVs(rep) {
		files[filepath.Join("raw", name)] = data
	}
	if h, err := HTML(rep); err == nil {
		files["report.html"] = h
	} else {
		return fmt.Errorf("report.html: %w", err)
	}
	for name, data := range files {
		if err := safefile.Write(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	if textfile != "" {
		var b bytes.Buffer
		if err := WriteTextfile(&b, rep); err != nil {
			return err
		}
		if err := safefile.Write(textfile, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ValueText is a metric's value with its unit and, for a repeated test,
// "median of N (min–max)".
func ValueText(m Metric) string {
	v := fmtNum(m.Value) + " " + m.Unit
	if len(m.Repeats) > 1 {
		v += fmt.Sprintf(", median of %d (%s–%s)", len(m.Repeats), fmtNum(slices.Min(m.Repeats)), fmtNum(slices.Max(m.Repeats)))
	}
	return v
}

// repetitionsNote says how the load tests were repeated and which
// repetition each section shows.
func repetitionsNote(rep *Report) string {
	var shown []string
	for _, t := range rep.Tests {
		if t.Detail > 0 {
			shown = append(shown, fmt.Sprintf("%s %d", t.Name, t.Detail))
		}
	}
	s := fmt.Sprintf("The load tests (%s) ran %d times, alternating (round k: repetition k of each); a value is the median of its repetitions, judged against the target",
		strings.Join(Repeated(rep), ", "), rep.Settings.Count)
	if len(shown) > 0 {
		s += "; each test's section and raw CSVs show its repetition nearest the median (" + strings.Join(shown, ", ") + ")"
	}
	return s
}

// Repeated are the tests of rep that ran more than once.
func Repeated(rep *Report) []string {
	var out []string
	for _, t := range rep.Tests {
		if t.Repeats > 1 {
			out = append(out, t.Name)
		}
	}
	return out
}

// fmtNum prints a value with precision that suits its size.
func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10 || v <= -10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1 || v <= -1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// WriteSummary prints the summary table (stdout of `bench --once`).
func WriteSummary(w io.Writer, rep *Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TEST\tMETRIC\tVALUE\tTARGET\tRESULT")
	for _, m := range rep.Metrics {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s %s\t%s\n", m.Test, m.Label, ValueText(m), m.Op, fmtNum(m.Target), m.Unit, m.Verdict)
	}
	for _, t := range rep.Tests {
		if t.Status == "error" || t.Status == "skipped" {
			fmt.Fprintf(tw, "%s\t%s\t\t\t%s\n", t.Name, oneLine(t.Error), strings.ToUpper(t.Status))
		}
	}
	tw.Flush()
	for _, wn := range rep.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", wn)
	}
	if note := VerdictNote(rep); note != "" {
		fmt.Fprintf(w, "warnings: %s\n", note)
	}
	if c := rep.Capacity; c != nil {
		for _, r := range c.Rows {
			if r.EstimatePerS > 0 && r.MeasuredPerS > 0 {
				fmt.Fprintf(w, "capacity %s %s: estimate %s/s at the latency load, measured %s/s (%.2fx), KDC own-time ceiling %s/s (%sx)\n",
					r.Source, r.Request, fmtNum(r.EstimatePerS), fmtNum(r.MeasuredPerS), r.Ratio, orDash(r.OwnCeilingPerS), ratioText(r.OwnRatio))
			}
		}
	}
	if rep.Settings.Count > 1 {
		fmt.Fprintf(w, "%s.\n", repetitionsNote(rep))
	}
	fmt.Fprintf(w, "verdict: %s (%d metrics, %s)\n", rep.Verdict, len(rep.Metrics), rep.Finished.Sub(rep.Started).Round(100*time.Millisecond))
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// WriteMarkdown writes report.md in the seed's layout: one table with
// value, target and PASS/FAIL per metric, then a section per test.
func WriteMarkdown(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "# KDC performance report: %s\n\n", rep.Verdict)
	fmt.Fprintf(w, "Run %s – %s on %d cores (%s), kernel %s, MIT krb5 %s.\n\n",
		rep.Started.UTC().Format(time.RFC3339), rep.Finished.UTC().Format(time.RFC3339),
		rep.Machine.Cores, rep.Machine.Model, rep.Machine.Kernel, rep.Machine.KRB5Version)
	fmt.Fprintln(w, "| # | Test | Metric | Value | Target | Result |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---|")
	for i, m := range rep.Metrics {
		fmt.Fprintf(w, "| %d | `%s` | %s | %s | %s %s %s | **%s** |\n", i+1, m.Test, m.Label, ValueText(m), m.Op, fmtNum(m.Target), m.Unit, m.Verdict)
	}
	if n := rep.Settings.Count; n > 1 {
		fmt.Fprintf(w, "\n%s.\n", repetitionsNote(rep))
	}
	for _, t := range rep.Tests {
		if t.Status == "error" || t.Status == "skipped" {
			fmt.Fprintf(w, "| – | `%s` | %s | | | **%s** |\n", t.Name, mdEscape(oneLine(t.Error)), strings.ToUpper(t.Status))
		}
	}
	if rep.Baseline != nil {
		writeComparisonMarkdown(w, rep.Baseline, "Compared with the baseline")
	}
	if len(rep.Warnings) > 0 {
		fmt.Fprintln(w, "\n## Warnings")
		for _, wn := range rep.Warnings {
			fmt.Fprintf(w, "- %s\n", wn)
		}
		fmt.Fprintf(w, "\nWhat they mean for the verdict: %s.\n", VerdictNote(rep))
	}
	fmt.Fprintln(w, "\n## Settings")
	for _, kv := range settingsRows(rep) {
		fmt.Fprintf(w, "- %s: `%s`\n", kv[0], kv[1])
	}

	if st := rep.Startup; st != nil {
		fmt.Fprintln(w, "\n## startup")
		fmt.Fprintln(w, "| Round | Time to first ticket | Logins tried |\n|---:|---:|---:|")
		for i, v := range st.RoundsMS {
			fmt.Fprintf(w, "| %d | %s ms | %d |\n", i+1, fmtNum(v), st.Tries[i])
		}
		fmt.Fprintf(w, "\nAverage %s ms, slowest %s ms.\n", fmtNum(st.AvgMS), fmtNum(st.MaxMS))
	}
	loadSection := func(title string, l *Load, unit string) {
		fmt.Fprintf(w, "\n## %s\n", title)
		fmt.Fprintf(w, "| Clients | Transport | %s | Requests | Failed %% | avg ms | p50 | p95 | p99 | max | KDC CPU/req µs | Generator CPU/req µs | Generator/KDC |\n", unit)
		fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		loadRow(w, l)
		if u := l.CPU; u.KDCCores > 0 {
			busy := fmt.Sprintf("%s %% of the %d core(s) it may use (CPU %s %%, waiting for a CPU %s %%, waiting for its own disk writes %s %%; idle %s %%)",
				fmtNum(u.KDCBusyTotalPct), u.KDCCores, fmtNum(u.KDCCoresBusyPct), fmtNum(u.KDCCPUWaitPct), fmtNum(u.KDCDiskWaitPct), fmtNum(u.KDCIdlePct))
			if u.KDCStateSamples == 0 {
				busy = strings.Replace(busy, "disk writes 0 %", "disk writes not sampled", 1)
			}
			fmt.Fprintf(w, "\nKDC busy %s; KDC %s µs CPU per request, generator %s µs (%.2fx the KDC's).\n",
				busy, fmtNum(u.KDCPerRequestUS), fmtNum(u.GeneratorPerRequestUS), u.Ratio)
			if u.SPAKEFloorUS > 0 {
				fmt.Fprintf(w, "\nSPAKE floor: the client's scalar multiplications take %s µs per login here (%.2fx the KDC's); the generator's other work %s µs.\n",
					fmtNum(u.SPAKEFloorUS), u.SPAKEFloorUS/max(u.KDCPerRequestUS, 1e-9), fmtNum(u.GeneratorPerRequestUS-u.SPAKEFloorUS))
			}
		}
		kdcServiceOf(w, title+" requests", l)
		errorsOf(w, l)
	}
	if rep.AS != nil {
		loadSection("as", rep.AS, "Logins/s")
	}
	if rep.TGS != nil {
		loadSection("tgs", rep.TGS, "Tickets/s")
	}
	if ol := rep.Latency; ol != nil {
		fmt.Fprintln(w, "\n## latency")
		fmt.Fprintf(w, "Open loop: %g logins/s, each followed by %d service tickets, %d sessions; latency counted from the scheduled time. Sessions started more than 1 ms late: %d (worst %s ms).\n\n",
			ol.LoginRate, ol.TGSPerLogin, ol.Sessions, ol.Behind, fmtNum(ol.MaxBehindMS))
		fmt.Fprintln(w, "| Request | Count | Errors | avg | p50 | p90 | p95 | p99 | p99.9 | max (ms) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range []struct {
			n string
			l *Load
		}{{"logins", ol.Logins}, {"service tickets", ol.Tickets}} {
			L := x.l.Latency
			fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", x.n, x.l.Requests, x.l.Errors,
				fmtNum(L.AvgMS), fmtNum(L.P50MS), fmtNum(L.P90MS), fmtNum(L.P95MS), fmtNum(L.P99MS), fmtNum(L.P999MS), fmtNum(L.MaxMS))
		}
		fmt.Fprintf(w, "\nErrors: %s %% of all requests.\n", fmtNum(ol.ErrorPct))
		kdcServiceOf(w, "logins' AS requests", ol.Logins)
		kdcServiceOf(w, "service tickets", ol.Tickets)
		errorsOf(w, ol.Logins)
		errorsOf(w, ol.Tickets)
		fmt.Fprintln(w, "\n## cpu")
		u := ol.CPU
		fmt.Fprintf(w, "KDC busy %s %% of one core (per KDC process); %s ms CPU per 1,000 requests; generator %s µs CPU per request (%.2fx the KDC's).\n",
			fmtNum(u.KDCBusyPct), fmtNum(u.KDCPerRequestUS), fmtNum(u.GeneratorPerRequestUS), u.Ratio)
	}
	if rep.Capacity != nil {
		writeCapacityMarkdown(w, rep)
	}
	if m := rep.Memory; m != nil {
		fmt.Fprintln(w, "\n## memory")
		fmt.Fprintf(w, "KDC RSS (all krb5kdc processes): idle %s MB, peak during the latency load %s MB.\n", fmtNum(float64(m.IdleBytes)/(1<<20)), fmtNum(float64(m.PeakBytes)/(1<<20)))
	}
	if c := rep.Concurrency; c != nil {
		fmt.Fprintln(w, "\n## concurrency")
		fmt.Fprintln(w, "| Clients | Transport | Logins/s | Requests | Failed % | avg ms | p50 | p95 | p99 | max | KDC CPU/req µs | Generator CPU/req µs | Generator/KDC |")
		fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, l := range c.Levels {
			loadRow(w, l)
		}
		fmt.Fprintf(w, "\nPeak %s logins/s; the top level reached %s %% of it.\n", fmtNum(c.PeakRate), fmtNum(c.TopPct))
	}
	if t := rep.TCP; t != nil {
		loadSection("tcp", t.Load, "Logins/s")
		if t.UDPRateRef > 0 {
			fmt.Fprintf(w, "\n%s %% of the UDP rate (%s logins/s).\n", fmtNum(t.PctOfUDP), fmtNum(t.UDPRateRef))
		}
	}
	if k := rep.Kadmin; k != nil {
		fmt.Fprintln(w, "\n## kadmin")
		fmt.Fprintln(w, "| Kind | Command | Completed | Seconds | Operations/s | First error |\n|---|---|---:|---:|---:|---|")
		for _, b := range k.Kinds {
			fmt.Fprintf(w, "| %s | `%s` | %d / %d | %s | %s | %s |\n", b.Kind, b.Command, b.Completed, k.Operations, fmtNum(b.Seconds), fmtNum(b.Rate), mdEscape(b.FirstErr))
		}
		fmt.Fprintf(w, "\nTest principals removed afterwards: %d.\n", k.Removed)
	}
	if d := rep.Dump; d != nil {
		fmt.Fprintln(w, "\n## dump")
		fmt.Fprintf(w, "Rounds: %v s; average %s s; %d bytes per dump (deleted after each round: it holds keys).\n", roundAll(d.RoundsS), fmtNum(d.AvgS), d.Bytes)
	}
	if d := rep.Degradation; d != nil {
		fmt.Fprintln(w, "\n## degradation")
		fmt.Fprintf(w, "%d logins, each followed by a service ticket, per round.\n\n| Round | Seconds |\n|---:|---:|\n", d.LoginsPerRound)
		for i, v := range d.RoundsS {
			fmt.Fprintf(w, "| %d | %s |\n", i+1, fmtNum(v))
		}
		fmt.Fprintf(w, "\nSlope %s %% of the first round per round; last round %s %% slower than the first; %d errors.\n", fmtNum(d.SlopePctRound), fmtNum(d.LastVsFirstPct), d.Errors)
	}
}

func roundAll(vs []float64) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmtNum(v)
	}
	return out
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func loadRow(w io.Writer, l *Load) {
	L := l.Latency
	fmt.Fprintf(w, "| %d | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %.2fx |\n", l.Clients, l.Transport, fmtNum(l.Rate), l.Requests, fmtNum(l.FailedPct),
		fmtNum(L.AvgMS), fmtNum(L.P50MS), fmtNum(L.P95MS), fmtNum(L.P99MS), fmtNum(L.MaxMS), fmtNum(l.CPU.KDCPerRequestUS), fmtNum(l.CPU.GeneratorPerRequestUS), l.CPU.Ratio)
}

// kdcServiceOf prints the KDC's own account of a load's requests beside
// the clients' latency, when the run timed them (--kdc-service).
func kdcServiceOf(w io.Writer, name string, l *Load) {
	if l == nil || l.KDCService == nil {
		return
	}
	k, L := l.KDCService, l.Latency
	fmt.Fprintf(w, "\nThe KDC's own service time of the %s (in the kernel, receive to reply; bounds of 9 %%-wide buckets): %d requests, avg %s ms, p50 ≤ %s, p95 ≤ %s, p99 ≤ %s ms (on CPU %s %%, waiting for a CPU %s %%, blocked %s %%, stolen by the hypervisor %s %%; waited in the socket %s ms on average), beside the clients' p50 %s, p95 %s, p99 %s ms.\n",
		name, k.Requests, fmtNum(k.AvgMS), fmtNum(k.P50MS), fmtNum(k.P95MS), fmtNum(k.P99MS), fmtNum(k.CPUPct), fmtNum(k.RunqueuePct), fmtNum(k.BlockedPct), fmtNum(k.StolenPct), fmtNum(k.QueueAvgMS),
		fmtNum(L.P50MS), fmtNum(L.P95MS), fmtNum(L.P99MS))
}

func errorsOf(w io.Writer, l *Load) {
	if l == nil || len(l.ErrorClasses) == 0 {
		return
	}
	fmt.Fprintln(w, "\n| Error | Count | Text |\n|---|---:|---|")
	cls := make([]string, 0, len(l.ErrorClasses))
	for c := range l.ErrorClasses {
		cls = append(cls, c)
	}
	slices.Sort(cls)
	for _, c := range cls {
		fmt.Fprintf(w, "| %s | %d | %s |\n", c, l.ErrorClasses[c], mdEscape(l.ErrorTexts[c]))
	}
}

// sampleColumns are raw/resource-samples.csv's: a Sample per row (CPU,
// CPU wait and the state sampler's counts cumulative, as in
// report.json's samples), and kdc_disk_wait_ratio, the KDC's disk-wait
// share of its cores since the previous row.
var sampleColumns = []string{"at_s", "test", "kdc_cpu_s", "kdc_rss_bytes", "kdc_processes", "generator_cpu_s",
	"kdc_cpu_wait_s", "kdc_cores", "kdc_state_ticks", "kdc_state_core_ticks", "kdc_state_disk_wait", "kdc_disk_wait_ratio"}

// requestColumns are the raw/*-requests.csv columns: a Record per row
// (ReadRun reads them back).
var requestColumns = []string{"load", "clients", "transport", "kind", "start_s", "latency_ms", "result"}

// requestFiles name the raw CSV of each load's requests.
const (
	fileAS          = "as-requests.csv"
	fileTGS         = "tgs-requests.csv"
	fileLatency     = "latency-requests.csv"
	fileConcurrency = "concurrency-requests.csv"
	fileTCP         = "tcp-requests.csv"
)

// rawCSVs: every request of every load, and the resource samples.
func rawCSVs(rep *Report) map[string][]byte {
	out := map[string][]byte{}
	reqs := func(name string, loads ...*Load) {
		var b bytes.Buffer
		cw := csv.NewWriter(&b)
		cw.Write(requestColumns)
		n := 0
		for i, l := range loads {
			if l == nil {
				continue
			}
			for _, rc := range l.Records {
				cw.Write([]string{strconv.Itoa(i + 1), strconv.Itoa(l.Clients), l.Transport, rc.Kind,
					strconv.FormatFloat(rc.Start.Seconds(), 'f', 6, 64), strconv.FormatFloat(ms(rc.Latency), 'f', 3, 64), rc.Class})
				n++
			}
		}
		cw.Flush()
		if n > 0 {
			out[name] = b.Bytes()
		}
	}
	for name, loads := range requestLoads(rep) {
		reqs(name, loads...)
	}
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write(sampleColumns)
	for i, s := range rep.Samples {
		// The disk-wait share since the previous sample: the state
		// sampler's looks in between (empty when it made none).
		diskRatio := ""
		if i > 0 {
			p := rep.Samples[i-1]
			if c := s.KDCStateCores - p.KDCStateCores; c > 0 {
				diskRatio = strconv.FormatFloat(float64(s.KDCStateDisk-p.KDCStateDisk)/float64(c), 'f', 4, 64)
			}
		}
		cw.Write([]string{strconv.FormatFloat(s.At.Seconds(), 'f', 3, 64), s.Test, strconv.FormatFloat(s.KDCCPU.Seconds(), 'f', 6, 64),
			strconv.FormatInt(s.KDCRSS, 10), strconv.Itoa(s.KDCProcesses), strconv.FormatFloat(s.GenCPU.Seconds(), 'f', 6, 64),
			strconv.FormatFloat(s.KDCRunDelay.Seconds(), 'f', 6, 64), strconv.Itoa(s.KDCCores),
			strconv.FormatInt(s.KDCStateTicks, 10), strconv.FormatInt(s.KDCStateCores, 10), strconv.FormatInt(s.KDCStateDisk, 10), diskRatio})
	}
	cw.Flush()
	out["resource-samples.csv"] = b.Bytes()
	return out
}

// settingsRows are the settings that decide the run's numbers, as report.md
// and report.html list them: the realm and the KDC, its kdc.conf and host
// settings, the suite's.
func settingsRows(rep *Report) [][2]string {
	out := [][2]string{
		{"realm", rep.System.Realm}, {"KDC", rep.System.KDC},
		{"load-test users", strconv.Itoa(rep.System.Users)}, {"services", strconv.Itoa(rep.System.Services)},
		{"the generator's pre-authentication", rep.System.Preauth},
	}
	keys := make([]string, 0, len(rep.System.Settings))
	for k := range rep.System.Settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, [2]string{k, rep.System.Settings[k]})
	}
	s := rep.Settings
	shard := s.Shard
	if shard == "" {
		shard = "1/1"
	}
	return append(out,
		[2]string{"CLIENTS, DURATION, LOGIN_RATE, TGS_PER_LOGIN", fmt.Sprintf("%d, %s, %g, %d", s.Clients, s.Duration, s.LoginRate, s.TGSPerLogin)},
		[2]string{"CLIENT_LEVELS", fmt.Sprintf("%v, %s each", s.ClientLevels, s.LevelDuration)},
		[2]string{"STARTUP_ROUNDS, KADMIN_OPERATIONS, DUMP_ROUNDS", fmt.Sprintf("%d, %d, %d", s.StartupRounds, s.KadminOperations, s.DumpRounds)},
		[2]string{"DEGRADATION_ROUNDS × logins", fmt.Sprintf("%d × %d", s.DegradationRounds, s.DegradationLogins)},
		[2]string{"as and tgs generator", fmt.Sprintf("%s (%d in flight when batched)", s.Generator, s.BatchInflight)},
		[2]string{"request timeout", s.Timeout.String()},
		[2]string{"shard", shard},
	)
}

// VerdictNote says in one line whether the run's warnings put its verdict
// in doubt ("" without warnings). A figure the environment held down
// understates the KDC: a metric that met its target even so stands, one
// that failed may be the environment's and not the KDC's.
func VerdictNote(rep *Report) string {
	if len(rep.Warnings) == 0 {
		return ""
	}
	var doubtful []string
	for _, m := range rep.Metrics {
		if m.Verdict == Fail && slices.Contains(rep.EnvironmentLimited, m.Test) {
			doubtful = append(doubtful, m.Test+" ("+strings.ToLower(m.Label)+")")
		}
	}
	switch {
	case len(doubtful) > 0:
		return fmt.Sprintf("the FAIL of %s may be the environment's, not the KDC's: something else held %s down (the warnings say what); run again with the KDC and the generator pinned apart (--kdc-cpu, --generator-cpu) on a quiet host",
			strings.Join(doubtful, ", "), strings.Join(rep.EnvironmentLimited, ", "))
	case rep.Verdict == Pass && len(rep.EnvironmentLimited) > 0:
		return fmt.Sprintf("the verdict stands: %s ran below the KDC's limit (the warnings say why), and met the targets even so", strings.Join(rep.EnvironmentLimited, ", "))
	case rep.Verdict == Pass:
		return "the verdict stands: no warning says the environment held a figure down"
	}
	return "the verdict stands: no warning says the environment held a failed figure down"
}
