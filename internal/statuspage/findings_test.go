package statuspage

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/collector"
	"github.com/krb5-exporter/krb5-exporter/internal/probestatus"
	"github.com/krb5-exporter/krb5-exporter/kdclog"
	"github.com/krb5-exporter/krb5-exporter/kdclog/talkers"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// storm is a window of 60 s in which one address (and its client) sent
// n logins of total, the others spread over many quiet addresses.
func storm(t *testing.T, addr string, n, total int) *talkers.Snapshot {
	t.Helper()
	s := &talkers.Snapshot{Start: t0.Add(-time.Minute), Window: time.Minute, Requests: [2]uint64{uint64(total), 0}}
	other := uint64(min(total-n, 60))
	s.Lists[talkers.RequestsAddressAS] = []talkers.Talker{{Name: addr, Count: uint64(n)}, {Name: "10.0.0.1", Count: other}}
	s.Lists[talkers.RequestsClientAS] = []talkers.Talker{{Name: "u" + addr, Count: uint64(n)}, {Name: "u10.0.0.1", Count: other}}
	return s
}

// The headline is the most severe finding: a stopped KDC before its
// probes' failures (said as its consequence, since when they fail), then
// a storm, then a log that is not followed; each names its runbook entry.
func TestFindingsOrder(t *testing.T) {
	probes := []probestatus.Target{
		{Name: "kdc-udp", FailingSince: t0.Add(-40 * time.Second), Recent: []probestatus.Record{{Start: t0.Add(-time.Second), AS: "connection_refused", TGS: "no_tgt"}}},
		{Name: "kdc-tcp", FailingSince: t0.Add(-30 * time.Second), Recent: []probestatus.Record{{Start: t0.Add(-time.Second), AS: "connection_refused", TGS: "no_tgt"}}},
	}
	host := &collector.Status{Programs: []collector.ProgramStatus{{Name: "krb5kdc", LastSeen: t0.Add(-45 * time.Second)}}}
	logs := []kdclog.SourceStatus{{Path: "/var/log/krb5kdc.log", Type: "kdc"}}
	got := findings(t0, probes, logs, host, storm(t, "127.0.0.5", 3000, 3600))
	var titles []string
	for _, f := range got {
		titles = append(titles, f.Severity.String()+" "+f.Runbook+" "+f.Title)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^critical KDCDown krb5kdc is not running$`),
		regexp.MustCompile(`^critical KDCDown 2 probes failing: kdc-udp: login connection_refused; kdc-tcp: login connection_refused$`),
		regexp.MustCompile(`^warning KDCClientStorm storm: address 127.0.0.5 sends 50.0 requests/s, 83 % of the KDC's$`),
		regexp.MustCompile(`^warning KDCClientStorm storm: client u127.0.0.5 sends 50.0 requests/s, 83 % of the KDC's$`),
		regexp.MustCompile(`^warning Krb5ExporterLogMissing log /var/log/krb5kdc.log: no such file$`),
	}
	if len(titles) != len(want) {
		t.Fatalf("findings:\n%s", strings.Join(titles, "\n"))
	}
	for i, re := range want {
		if !re.MatchString(titles[i]) {
			t.Errorf("finding %d: %q, want %s", i, titles[i], re)
		}
	}
	if !got[0].Since.Equal(t0.Add(-45*time.Second)) || got[0].SinceLabel != "last seen running" {
		t.Errorf("KDC down: %s %v, want last seen running %v", got[0].SinceLabel, got[0].Since, t0.Add(-45*time.Second))
	}
	if !got[1].Since.Equal(t0.Add(-40 * time.Second)) {
		t.Errorf("probes failing since %v, want the first target's %v", got[1].Since, t0.Add(-40*time.Second))
	}
}

// A storm is a rate and a share: many requests from everyone is a busy
// KDC, not a storm, and a share of a trickle is nobody's storm.
func TestStormThresholds(t *testing.T) {
	for _, c := range []struct {
		n, total int
		storm    bool
	}{
		{3000, 3600, true},  // 50/s, 83 %
		{1799, 3600, false}, // 30/s less a request, 50 %
		{1900, 3600, true},  // 31.7/s, 53 %
		{2000, 5000, false}, // 33/s, 40 %: busy, others too
		{6100, 20000, true}, // 101.7/s whatever its share
		{100, 100, false},   // 100 % of 1.7/s
	} {
		got := len(stormFindings(t0, storm(t, "127.0.0.5", c.n, c.total))) > 0
		if got != c.storm {
			t.Errorf("%d of %d requests in 60 s: storm %v, want %v", c.n, c.total, got, c.storm)
		}
	}
}

// A storm's window is today's only while the next one has not ended: a
// KDC that logs nothing more (stopped, idle) shows no storm, and the
// talkers' table says so.
func TestStormStale(t *testing.T) {
	s := storm(t, "127.0.0.5", 3000, 3600) // the minute to t0
	if len(stormFindings(t0.Add(59*time.Second), s)) == 0 {
		t.Error("the storm of the window before the current one is not shown")
	}
	if f := stormFindings(t0.Add(time.Minute), s); len(f) != 0 {
		t.Errorf("a window ended a whole window ago still shows a storm: %+v", f)
	}
	cfg := fixture()
	cfg.Now = func() time.Time { return t0.Add(time.Minute) }
	cfg.Talkers = func() *talkers.Snapshot { return s }
	_, body := get(t, New(cfg), "/")
	if !strings.Contains(body, `id="talkers-stale"`) || strings.Contains(body, "storm:") {
		t.Errorf("stale window: no stale note, or a storm shown")
	}
}

// Probes answering slower than the seed's targets: the median of the
// last logins over 20 ms (not one slow probe).
func TestSlowProbes(t *testing.T) {
	rec := func(login, ticket time.Duration) probestatus.Record {
		return probestatus.Record{Success: true, Login: login, Ticket: ticket, AS: "success", TGS: "success"}
	}
	slow := probestatus.Target{Name: "kdc1", Recent: []probestatus.Record{rec(30*time.Millisecond, time.Millisecond), rec(25*time.Millisecond, time.Millisecond), rec(2*time.Millisecond, time.Millisecond)}}
	f, ok := slowProbe(slow)
	if !ok || f.Runbook != "KDCLoginLatencyP95High" || !strings.Contains(f.Title, "logins take 25.0 ms (median of the last 3), over the 20.0 ms target") {
		t.Errorf("slow logins: %v %+v", ok, f)
	}
	one := probestatus.Target{Name: "kdc1", Recent: []probestatus.Record{rec(90*time.Millisecond, time.Millisecond), rec(2*time.Millisecond, time.Millisecond), rec(3*time.Millisecond, time.Millisecond)}}
	if f, ok := slowProbe(one); ok {
		t.Errorf("one slow login of three: %+v", f)
	}
	tickets := probestatus.Target{Name: "kdc1", Recent: []probestatus.Record{rec(time.Millisecond, 11*time.Millisecond), rec(time.Millisecond, 12*time.Millisecond), rec(time.Millisecond, 15*time.Millisecond)}}
	if f, ok := slowProbe(tickets); !ok || f.Runbook != "KDCTicketLatencyP95High" {
		t.Errorf("slow tickets: %v %+v", ok, f)
	}
}

// Every finding's runbook entry is a section of the runbook the exporter
// serves: its link lands on the alert's heading.
func TestFindingsLinkTheServedRunbook(t *testing.T) {
	h := New(fixture())
	_, book := get(t, h, "/"+RunbookPath)
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`<h[1-6] id="([^"]+)"`).FindAllStringSubmatch(book, -1) {
		ids[m[1]] = true
	}
	if len(ids) < 40 || !ids["kdcdown"] || !ids["kdcclientstorm"] {
		t.Fatalf("the served runbook has %d section ids; kdcdown %v", len(ids), ids["kdcdown"])
	}
	for _, name := range []string{"KDCDown", "KDCProbeFailing", "KDCClientStorm", "Krb5ExporterLogMissing", "Krb5ExporterLogBehind",
		"Krb5ExporterCollectorFailing", "KDCServiceTracingDown", "KDCLoginLatencyP95High", "KDCTicketLatencyP95High"} {
		if !ids[strings.ToLower(name)] {
			t.Errorf("finding's runbook %s: no section #%s in the served runbook", name, strings.ToLower(name))
		}
	}
	for _, raw := range []string{"<script", "style="} {
		if strings.Contains(book, raw) {
			t.Errorf("the runbook page holds %q", raw)
		}
	}
	// The page links there.
	_, page := get(t, h, "/")
	if !strings.Contains(page, `href="runbook#krb5exportercollectorfailing"`) {
		t.Errorf("the page does not link its finding to the served runbook")
	}
}

// The header's colour follows the state.
func TestHeaderState(t *testing.T) {
	cfg := fixture()
	_, body := get(t, New(cfg), "/")
	if !strings.Contains(body, `<header class="critical">`) {
		t.Errorf("a failing probe: header not critical")
	}
	cfg.Probes = func() []probestatus.Target { return nil }
	_, body = get(t, New(cfg), "/")
	if !strings.Contains(body, `<header class="warning">`) {
		t.Errorf("a failing collector only: header not warning")
	}
	cfg.Host = func() collector.Status {
		return collector.Status{Programs: []collector.ProgramStatus{{Name: "krb5kdc", Running: true, PID: 1}}}
	}
	_, body = get(t, New(cfg), "/")
	if !strings.Contains(body, `<header class="ok">`) || !strings.Contains(body, "The KDC is OK") {
		t.Errorf("nothing wrong: header not ok:\n%s", body)
	}
}
