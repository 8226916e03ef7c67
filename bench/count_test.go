package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// order records the tests in the order the suite starts them.
type order struct{ started []string }

func (o *order) TestStarted(name string)     { o.started = append(o.started, name) }
func (o *order) TestDone(string, TestResult) {}

// --count 3: round k runs repetition k of as and latency (memory, run
// once, in the first round), every repetition reaches the KDC (its log
// counts three latency loads of logins), each repeated metric keeps its
// three values and is their median, judged again, and each section is
// the repetition nearest the median; report.md and report.json say so.
func TestCountRepeatsAlternating(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true})
	s := small("as", "latency", "memory")
	s.Duration = 400 * time.Millisecond
	s.Count = 3
	s.Targets.ASMinRate = 1e9 // every repetition fails: the median must too
	from := testutil.LogSize(t, r.KDCLog)
	o := &order{}
	rep := runSuite(t, RealmSystem(r), s, func(su *Suite) { su.Observer = o })
	want := []string{"as 1/3", "latency 1/3", "memory", "as 2/3", "latency 2/3", "as 3/3", "latency 3/3"}
	if !slices.Equal(o.started, want) {
		t.Errorf("started %q, want %q", o.started, want)
	}
	sessions := int(s.LoginRate * s.Duration.Seconds())
	if got := testutil.LogCount(t, r.KDCLog, from, realmtest.ASIssue); got < 3*sessions+rep.AS.Requests-rep.AS.Errors {
		t.Errorf("KDC log: %d logins issued, fewer than 3 latency loads of %d and one as load", got, sessions)
	}
	byName := map[string]Metric{}
	for _, m := range rep.Metrics {
		if _, dup := byName[m.Name]; dup {
			t.Errorf("metric %s twice", m.Name)
		}
		byName[m.Name] = m
	}
	for _, n := range []string{"as_logins_per_second", "login_p95_seconds", "error_ratio"} {
		// The median of three, computed here rather than by
		// report.Median, the suite's: the middle one in order.
		m := byName[n]
		if len(m.Repeats) != 3 || m.Value != slices.Sorted(slices.Values(m.Repeats))[1] {
			t.Errorf("%s: value %g, repeats %v", n, m.Value, m.Repeats)
		}
	}
	if m := byName["kdc_rss_peak_bytes"]; m.Repeats != nil || m.Value <= 0 {
		t.Errorf("memory, run once: %+v", m)
	}
	as := byName["as_logins_per_second"]
	if as.Verdict != Fail || test(rep, "as").Status != "fail" || rep.Verdict != Fail {
		t.Errorf("as at an unreachable target: metric %s, test %s, run %s", as.Verdict, test(rep, "as").Status, rep.Verdict)
	}
	if as.Repeats[0] == as.Repeats[1] && as.Repeats[1] == as.Repeats[2] {
		t.Errorf("three repetitions, one value: %v", as.Repeats)
	}
	tr := test(rep, "as")
	if tr.Repeats != 3 || tr.Detail < 1 || tr.Detail > 3 {
		t.Fatalf("as: %+v", tr)
	}
	near := as.Repeats[tr.Detail-1]
	for _, v := range as.Repeats {
		if math.Abs(v-as.Value) < math.Abs(near-as.Value) {
			t.Errorf("the section is repetition %d (%g), %g is nearer the median %g", tr.Detail, near, v, as.Value)
		}
	}
	if rep.AS.Rate != near {
		t.Errorf("the as section's rate %g, its repetition's %g", rep.AS.Rate, near)
	}
	if m := test(rep, "memory"); m.Repeats != 0 || m.Detail != 0 {
		t.Errorf("memory: %+v", m)
	}
	var md bytes.Buffer
	report.WriteMarkdown(&md, rep)
	if !strings.Contains(md.String(), fmt.Sprintf("median of 3 (%s–%s)", num(slices.Min(as.Repeats)), num(slices.Max(as.Repeats)))) ||
		!strings.Contains(md.String(), "ran 3 times, alternating") {
		t.Errorf("report.md:\n%s", md.String())
	}
	page, err := report.HTML(rep)
	if err != nil || !bytes.Contains(page, []byte("median of 3 (")) || !bytes.Contains(page, []byte("ran 3 times, alternating")) {
		t.Errorf("report.html: %v\n%s", err, page)
	}
	js, _ := json.Marshal(rep)
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || back.Settings.Count != 3 || !slices.Equal(back.Metrics[0].Repeats, rep.Metrics[0].Repeats) {
		t.Errorf("report.json round trip: %v, count %d", err, back.Settings.Count)
	}
}

// num formats as report.md does (fmtNum), computed here.
func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// A repeated test's warnings are said once per kind (format and test),
// with the repetitions that gave it; a test run once keeps its own.
func TestRepetitionWarningsOnce(t *testing.T) {
	r := &run{rep: &Report{}, count: 3}
	for round := 1; round <= 3; round++ {
		r.round, r.repeated = round, true
		r.warn("%s: the KDC waited %d %%", "as", 10*round)
		if round != 2 {
			r.warn("%s: the KDC waited %d %%", "tgs", 5)
		}
		if round == 3 {
			r.warn("%s: %d failed", "as", 1)
		}
		r.repeated = false
		if round == 1 {
			r.warn("dump: slow")
		}
	}
	r.medians()
	want := []string{
		"dump: slow",
		"as: the KDC waited 10 % (in 3 of 3 repetitions: 1, 2, 3; the numbers are repetition 1's)",
		"tgs: the KDC waited 5 % (in 2 of 3 repetitions: 1, 3; the numbers are repetition 1's)",
		"as: 1 failed (repetition 3 of 3)",
	}
	if !slices.Equal(r.rep.Warnings, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(r.rep.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

// Shards that repeated their loads are refused: repetition k of one
// shard need not have run with repetition k of another.
func TestMergeRefusesRepeatedShards(t *testing.T) {
	shard := func(i string, count int) Shard {
		s := Defaults()
		s.Shard, s.Count = i+"/2", count
		return Shard{Path: "s" + i, Report: &Report{Settings: s, Started: time.Unix(1e9, 0)}}
	}
	_, err := Merge([]Shard{shard("1", 5), shard("2", 5)})
	if err == nil || !strings.Contains(err.Error(), "s1 ran its loads 5 times (--count 5): merging repeated shards is not supported") {
		t.Errorf("merge of shards with --count 5: %v", err)
	}
}
