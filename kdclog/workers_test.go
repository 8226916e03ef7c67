package kdclog

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestWorkerRequests: a real krb5kdc -w 4 under a known load. The
// per-worker series add up to krb5_kdc_requests_total and to the replies
// the clients received, and, worker by worker, to the request lines each
// pid wrote (read from the log with a regexp, not the parser). A killed
// worker takes the KDC down (MIT 1.20); after the restart the new workers
// reuse the indexes 0-3: no new label value.
func TestWorkerRequests(t *testing.T) {
	needMIT(t)
	r := realmtest.Realm(t, realm.Options{Workers: 4, NoKadmind: true, DisableLastSuccess: true})
	src := config.LogSource{Path: r.KDCLog, Type: "kdc", StartAt: "beginning", PollInterval: 20 * time.Millisecond,
		ProbePrincipals: []string{realm.ReadyPrincipal}}
	w, err := kdcproc.NewWorkers("/proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	tm := startManager(t, "", src)
	tm.m.SetWorkerIndex(w) // no request line but the harness's readiness probes is in the log yet

	const perClient, clients = 40, 4
	sent := sendLoad(t, r, clients, perClient)
	waitValue(t, tm.reg, sent, "krb5_kdc_requests_total", "request", "as", "status", "NEEDED_PREAUTH")
	waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
	first := perWorker(t, tm)
	checkWorkers(t, first, nil, linesByPID(t, r.KDCLog, nil), sent)
	t.Logf("requests by worker: %v", first)

	// Kill a worker: the supervisor stops the others and exits.
	pids := r.KDCPids()
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the KDC to exit after a worker died", func() bool { return len(r.KDCPids()) == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.StartKDC(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "4 new workers", func() bool { return len(r.KDCPids()) == 5 })
	old := map[int]bool{}
	for p := range linesByPID(t, r.KDCLog, nil) {
		old[p] = true
	}
	sent += sendLoad(t, r, clients, perClient)
	waitValue(t, tm.reg, sent, "krb5_kdc_requests_total", "request", "as", "status", "NEEDED_PREAUTH")
	waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
	checkWorkers(t, perWorker(t, tm), first, linesByPID(t, r.KDCLog, old), sent)

	// A line whose pid is no KDC process (forged with logger, or read long
	// after its worker exited): counted once, under worker="unknown".
	data := string(testutil.MustRead(t, r.KDCLog))
	m := requestLine.FindAllStringSubmatchIndex(data, -1)
	last := m[len(m)-1]
	line := data[last[0]:last[1]]
	line = line[:last[2]-last[0]] + "1" + line[last[3]-last[0]:] // pid 1: init
	end := strings.Index(data[last[1]:], "\n")
	f, err := os.OpenFile(r.KDCLog, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The whole line: its head (date, host) as the KDC wrote it, pid 1.
	lineStart := strings.LastIndex(data[:last[0]], "\n") + 1
	forged := data[lineStart:last[0]] + line + data[last[1]:last[1]+end] + "\n"
	if _, err := f.WriteString(forged); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sent++
	waitValue(t, tm.reg, sent, "krb5_kdc_requests_total", "request", "as", "status", "NEEDED_PREAUTH")
	got := perWorker(t, tm)
	if got["unknown"] != 1 {
		t.Errorf("forged line of pid 1: worker=\"unknown\" is %v, want 1 (%v)", got["unknown"], got)
	}
	var total float64
	for _, v := range got {
		total += v
	}
	if total != sent {
		t.Errorf("per-worker series add up to %v after the forged line, want %v", total, sent)
	}
}

// sendLoad is realmtest.PreauthLoad, every request answered.
func sendLoad(t *testing.T, r *realm.Realm, clients, n int) float64 {
	t.Helper()
	replies := realmtest.PreauthLoad(t, r, clients, n)
	if replies != clients*n {
		t.Fatalf("%d replies to %d requests", replies, clients*n)
	}
	return float64(replies)
}

var requestLine = regexp.MustCompile(`krb5kdc\[(\d+)\]\(info\): (AS|TGS)_REQ .*: [A-Z_ ]+: (\S+) for `)

// linesByPID counts the request lines of each pid in the log (the
// readiness probes and the pids in skip left out).
func linesByPID(t *testing.T, path string, skip map[int]bool) map[int]float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]float64{}
	for _, m := range requestLine.FindAllStringSubmatch(string(data), -1) {
		pid, _ := strconv.Atoi(m[1])
		if skip[pid] || m[3] == realm.ReadyPrincipal || strings.HasPrefix(m[3], realm.ReadyPrincipal+"@") {
			continue
		}
		out[pid]++
	}
	return out
}

// perWorker sums krb5_kdc_worker_requests_total by worker.
func perWorker(t *testing.T, tm *testManager) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	mfs, err := tm.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "krb5_kdc_worker_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "worker" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// checkWorkers compares the per-worker counts (less before) with the log's
// per-pid counts and the total sent.
func checkWorkers(t *testing.T, got, before map[string]float64, byPID map[int]float64, sent float64) {
	t.Helper()
	var total float64
	var deltas, want []float64
	for worker, v := range got {
		if i, err := strconv.Atoi(worker); err != nil || i < 0 || i > 3 {
			t.Errorf("worker label %q: want 0-3 (4 workers, indexes reused)", worker)
		}
		total += v
		if d := v - before[worker]; d > 0 {
			deltas = append(deltas, d)
		}
	}
	for _, v := range byPID {
		want = append(want, v)
	}
	slices.Sort(deltas)
	slices.Sort(want)
	if total != sent {
		t.Errorf("per-worker series add up to %v, the clients got %v replies", total, sent)
	}
	if !slices.Equal(deltas, want) {
		t.Errorf("per-worker counts %v (%v), the log's per-pid counts %v", deltas, got, want)
	}
}

// BenchmarkParseCountWorkers is BenchmarkParseCount with the per-worker
// counter on (a real kdcproc index: the benchmark log's pids are not
// running, so every line takes the cached "unknown" path a live worker's
// takes too). Compare the two side by side for the counter's cost.
func BenchmarkParseCountWorkers(b *testing.B) {
	_, data := benchLog(b)
	lines := splitLines(data)
	w, err := kdcproc.NewWorkers("/proc", nil)
	if err != nil {
		b.Fatal(err)
	}
	c := newCounts()
	var idx WorkerIndex = w
	c.workers.index.Store(&idx)
	src := benchSource(c)
	benchHandle(b, src, lines)
	var n uint64
	for i := range c.workers.rows {
		if r := c.workers.rows[i].Load(); r != nil {
			for q := range r {
				for s := range r[q] {
					n += r[q][s].Load()
				}
			}
		}
	}
	var total uint64
	for q := range c.requests {
		for s := range c.requests[q] {
			total += c.requests[q][s].Load()
		}
	}
	if n != total || n == 0 {
		b.Fatalf("per-worker %d, requests %d", n, total)
	}
}
