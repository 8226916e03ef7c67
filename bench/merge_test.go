package bench

import (
	"context"
	"maps"
	"math"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/compare"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Two shards (1/2, 2/2: 8 logins in flight each, 50 sessions/s each)
// against one realm and, at the same moment, one run of the summed load
// (16 in flight, 100 sessions/s) against a second realm alike, both KDCs
// pinned to one CPU so that the machine treats them alike. The merge
// sums requests and rates exactly, summarises latencies from every
// request (checked here by nearest rank over the shards' requests), and
// compared with the single run the logins' rate is not called (one run
// each: the 2x floor, as TestRealAAAndAB's; a shard lost or counted
// twice is 2x). Shards
// of different runs are refused, each with the reason.
func TestMergeRealShards(t *testing.T) {
	testutil.Alone(t)
	testutil.RequireProgram(t, "taskset")
	opts := realm.Options{Users: 16, Services: 4, NoKadmind: true, DisableLastSuccess: true}
	r1, r2 := upRealm(t, opts), upRealm(t, opts)
	for _, r := range []*realm.Realm{r1, r2} {
		for _, pid := range r.KDCPids() {
			if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", strconv.Itoa(pid)).CombinedOutput(); err != nil {
				t.Fatalf("taskset: %v: %s", err, out)
			}
		}
	}
	set := func(shard string, inflight int) Settings {
		s := Defaults()
		s.Tests = []string{"as", "latency"}
		s.Duration = 1600 * time.Millisecond
		s.BatchInflight = inflight
		s.TGSPerLogin = 2
		s.Shard = shard
		// Encrypted timestamp: a tenth of SPAKE's client CPU, so that the
		// KDCs, not the generators, are the limit (under -race too): one
		// generator against two would otherwise be a difference of its own.
		s.Preauth = "encrypted_timestamp"
		return s
	}
	// A P per generator: the batched one sleeps holding its P.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(6))
	runs := []struct {
		r *realm.Realm
		s Settings
	}{{r1, set("1/2", 8)}, {r1, set("2/2", 8)}, {r2, set("", 16)}}
	reps := make([]*Report, len(runs))
	var wg sync.WaitGroup
	for i, x := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep, err := (&Suite{Sys: RealmSystem(x.r), Settings: x.s}).Run(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			reps[i] = rep
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, rep := range reps {
		for _, tr := range rep.Tests {
			if tr.Status == "error" {
				t.Fatalf("run %d: %s: %s", i, tr.Name, tr.Error)
			}
		}
	}
	// As bench merge does: each shard written out and read back.
	var shards []Shard
	for _, i := range []int{1, 0} {
		dir := t.TempDir()
		if err := report.WriteAll(reps[i], dir, ""); err != nil {
			t.Fatal(err)
		}
		rep, _, err := report.ReadRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, Shard{dir, rep})
	}
	m, err := Merge(shards)
	if err != nil {
		t.Fatal(err)
	}
	a, b := reps[0], reps[1]
	if m.AS.Requests != a.AS.Requests+b.AS.Requests || m.AS.Rate != a.AS.Rate+b.AS.Rate {
		t.Errorf("as: %d requests at %g/s, shards %d+%d at %g+%g", m.AS.Requests, m.AS.Rate, a.AS.Requests, b.AS.Requests, a.AS.Rate, b.AS.Rate)
	}
	if m.Latency.LoginRate != 100 || m.Latency.Sessions != a.Latency.Sessions+b.Latency.Sessions {
		t.Errorf("latency: %g sessions/s, %d sessions", m.Latency.LoginRate, m.Latency.Sessions)
	}
	nearest := func(kind string, q float64) float64 {
		var ms []float64
		for _, r := range []*Report{a, b} {
			for _, rc := range r.Latency.Logins.Records {
				if rc.Kind == kind && rc.Class == krb5.ClassSuccess {
					ms = append(ms, float64(rc.Latency)/1e6)
				}
			}
		}
		slices.Sort(ms)
		return ms[int(math.Ceil(q*float64(len(ms))))-1]
	}
	// raw/*.csv keep latencies to the microsecond.
	if got, want := m.Latency.Logins.Latency.P95MS, nearest(kindAS, 0.95); math.Abs(got-want) > 0.001 {
		t.Errorf("merged login p95 %g ms, nearest rank over both shards %g", got, want)
	}
	if got, want := m.Latency.Tickets.Latency.P99MS, nearest(kindTGS, 0.99); math.Abs(got-want) > 0.001 {
		t.Errorf("merged ticket p99 %g ms, nearest rank over both shards %g", got, want)
	}
	for _, mm := range m.Metrics {
		if mm.Name == "as_logins_per_second" && (mm.Value != m.AS.Rate || mm.Verdict != map[bool]string{true: Pass, false: Fail}[mm.Value >= mm.Target]) {
			t.Errorf("merged as metric %+v, rate %g", mm, m.AS.Rate)
		}
	}
	// The rates: the merged shards against one run of their summed load.
	// (Latencies are logged, not held to it: each shard starts its
	// latency load when its own as load has drained, so one shard's
	// sessions can meet the other's last full-speed logins.)
	// One run each: the single-run floor, as TestRealAAAndAB's.
	c := compare.Compare(reps[2], m, compare.Options{})
	for _, ch := range c.Metrics {
		t.Logf("single -> merged %s: %.3g -> %.3g, %+.1f %% [%+.1f, %+.1f] %s", ch.Name, ch.Old, ch.New, ch.ChangePct, ch.LowPct, ch.HighPct, ch.Verdict)
		if (ch.Name == "as_logins_per_second" || ch.Name == "error_ratio") && ch.Verdict != "no significant change" {
			t.Errorf("%s: merged shards against one run of their summed load: %s", ch.Name, ch.Verdict)
		}
	}

	// Refusals, each on a copy of a real shard with one thing changed.
	edit := func(r *Report, f func(*Report)) *Report {
		c := *r
		f(&c)
		return &c
	}
	for _, tc := range []struct {
		name   string
		shards []Shard
		want   string
	}{
		{"another KDC", []Shard{{"s1", a}, {"s2", edit(b, func(r *Report) { r.System.KDC = reps[2].System.KDC })}}, "has KDC"},
		{"another realm", []Shard{{"s1", a}, {"s2", edit(b, func(r *Report) { r.System.Realm = "OTHER.TEST" })}}, "has realm PERF.TEST, s2 has OTHER.TEST"},
		{"a kdc.conf setting", []Shard{{"s1", a}, {"s2", edit(b, func(r *Report) {
			r.System.Settings = maps.Clone(r.System.Settings)
			r.System.Settings["disable_last_success"] = "false"
		})}}, "disable_last_success"},
		{"other settings", []Shard{{"s1", a}, {"s2", edit(b, func(r *Report) { r.Settings.Duration = time.Minute })}}, "different settings (duration)"},
		{"the same shard twice", []Shard{{"s1", a}, {"s1bis", a}}, "s1 and s1bis are both shard 1/2"},
		{"a shard missing", []Shard{{"s1", a}, {"s2", edit(b, func(r *Report) { r.Settings.Shard = "2/3" })}}, "not shards of one run"},
		{"shards of three, one missing", []Shard{{"s1", edit(a, func(r *Report) { r.Settings.Shard = "1/3" })}, {"s2", edit(b, func(r *Report) { r.Settings.Shard = "2/3" })}}, "shard(s) 3 of 3 missing"},
		{"started far apart", []Shard{{"s1", a}, {"s2", edit(b, func(r *Report) { r.Started = a.Started.Add(time.Minute) })}}, "started 1m0s apart, more than half the 1.6s DURATION"},
		{"not a shard", []Shard{{"one", reps[2]}, {"two", reps[2]}}, "are both shard 1/1"},
	} {
		_, err := Merge(tc.shards)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
