package alerts

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// faultForScale divides every alert's for: (and keep_firing_for:) in
// TestAlertFaultsEndToEnd: their order is kept (KDCClockOffsetHigh's 1m
// before KDCProbeFailing's 2m), the test takes seconds.
const faultForScale = 20

// TestAlertFaultsEndToEnd injects faults into a realm (krb5kdc -w 2 and a
// KDC proxy) watched by an exporter probing it directly and through the
// proxy, a real Prometheus with every rule file (each for: divided by
// faultForScale) and Alertmanager with the shipped alertmanager.yml, and
// checks that each fault makes one notification, of its own alert:
//   - the KDC proxy stopped: KDCProxyFailing, a ticket; no page (the
//     proxy's failures are not the KDC's budget) and no KDCProbeFailing
//     ticket for the proxy's target (inhibited);
//   - the KDC's clock stepped 10 minutes: KDCClockOffsetHigh, a ticket;
//     the probes failing on the skew are held back;
//   - a worker killed (MIT's supervisor then stops the KDC): one page,
//     KDCRealmUnavailable; after the KDC is started again no page of the
//     error budget for the failures of the stop.
//
// The table of what each fault sent is logged.
func TestAlertFaultsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: real KDC, KDC proxy, exporter, Prometheus and Alertmanager")
	}
	realmtest.RequireMIT(t)
	promBin := testutil.RequireProgram(t, "prometheus")
	amBin := testutil.RequireProgram(t, "prometheus-alertmanager", "alertmanager")
	testutil.RequireProgram(t, "faketime") // libfaketime, for the clock step
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	begin := time.Now()
	tmp := t.TempDir()
	bin := exporterBinary(t)
	r := realmtest.Realm(t, realm.Options{Users: 3, Services: 1, Fillers: -1, NoKadmind: true, DisableLastSuccess: true, Workers: 2, KDCProxy: true})

	am, hook, amLog := startAlertmanager(t, ctx, amBin, tmp, r.Realm)

	cfg := filepath.Join(tmp, "exporter.yml")
	writeFile(t, cfg, "modules:\n"+probeModule(r, "udp", 2*time.Second)+fmt.Sprintf(`  https:
    realm: %[1]s
    client: %[2]s
    keytab: %[3]s
    service: %[4]s
    transport: https
    timeout: 2s
    proxy_ca_file: %[5]s
probes:
  - {name: kdc, address: "%[6]s", module: udp, interval: 1s}
  - {name: kdc-https, address: "%[7]s", module: https, interval: 1s}
logs:
  - path: %[8]s
    type: kdc
    start_at: beginning
    probe_principals: [%[2]s]
`, r.Realm, r.ProbePrincipal, r.ProbeKeytab, r.Service(1), r.KDCProxy.CA, r.KDCAddr, r.KDCProxy.URL, r.KDCLog))
	exporterAddr := freeAddr(t)
	exporterLog := &testutil.LockedBuffer{}
	start(t, exporterLog, bin, "--web.listen-address", exporterAddr, "--config.file", cfg,
		"--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf,
		"--no-collector.replication", "--kdclog.position-file", filepath.Join(tmp, "positions.json"))
	waitHTTP(t, ctx, "http://"+exporterAddr+"/-/ready", exporterLog)

	// The probes' latency alerts keep their for: (15m): on a loaded test
	// machine the KDC's own p95 may pass the targets, no fault of these.
	copies := ruleCopies(t, filepath.Join(tmp, "rules"), func(r rule) string {
		if r.For == "" || matches(`^KDC(Login|Ticket)LatencyP9[59]High$`, r.Alert) {
			return ""
		}
		d, err := model.ParseDuration(r.For)
		if err != nil {
			t.Fatalf("%s: for: %v", r.Alert, err)
		}
		return max(time.Duration(d)/faultForScale, time.Second).String()
	})
	prom, _ := startPrometheus(t, ctx, promBin, tmp, copies, fmt.Sprintf(`alerting:
  alertmanagers:
    - static_configs: [{targets: ["%s"]}]
scrape_configs:
  - job_name: krb5
    static_configs: [{targets: ["%s"], labels: {realm: %q}}]
`, strings.TrimPrefix(am, "http://"), exporterAddr, r.Realm))
	waitQuery(t, ctx, prom, `count(krb5_probe_success{exchange=~"as|tgs"} == 1) == 4`)
	t.Logf("realm, exporter, Prometheus and Alertmanager ready after %.1fs", time.Since(begin).Seconds())

	// settle waits long enough for every alert of a fault to have fired
	// (the longest scaled for: of those that could, 5m/20, and the
	// critical group_wait) and returns what was sent since mark.
	settle := func(mark int) []notification {
		sleep(ctx, 25*time.Second)
		return hook.since(mark)
	}
	var table []string
	record := func(fault string, sent []notification) {
		table = append(table, fmt.Sprintf("%-34s %s", fault, summarize(sent)))
	}
	// firing returns the alert names sent firing to receivers matching re.
	firing := func(sent []notification, re string) []string {
		var out []string
		for _, n := range sent {
			if !matches(re, n.Receiver) {
				continue
			}
			for _, a := range n.Alerts {
				if a.Status == "firing" && !slices.Contains(out, a.Labels["alertname"]) {
					out = append(out, a.Labels["alertname"])
				}
			}
		}
		sort.Strings(out)
		return out
	}

	// Healthy: nothing.
	mark := hook.count()
	if sent := settle(mark); len(sent) != 0 {
		t.Fatalf("notifications from a healthy realm: %v", sent)
	}
	record("none (healthy)", nil)

	// The KDC proxy stopped.
	mark = hook.count()
	if err := r.StopKDCProxy(); err != nil {
		t.Fatal(err)
	}
	waitNotification(t, ctx, hook, "tickets", "KDCProxyFailing", "firing")
	sent := settle(mark)
	record("KDC proxy stopped", sent)
	if got := firing(sent, ""); !slices.Equal(got, []string{"KDCProxyFailing"}) {
		t.Errorf("KDC proxy stopped: sent firing %v, want KDCProxyFailing alone: %v", got, sent)
	}
	if err := r.StartKDCProxy(ctx); err != nil {
		t.Fatal(err)
	}
	waitNotification(t, ctx, hook, "tickets", "KDCProxyFailing", "resolved")
	waitQuery(t, ctx, prom, `count(ALERTS{alertstate="firing",severity!="info"}) == 0 or absent(ALERTS{alertstate="firing",severity!="info"})`)

	// The KDC's clock stepped 10 minutes ahead.
	mark = hook.count()
	if err := r.RestartKDCShifted(ctx, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	waitNotification(t, ctx, hook, "tickets", "KDCClockOffsetHigh", "firing")
	sent = settle(mark)
	record("KDC clock stepped +10 min", sent)
	if got := firing(sent, ""); !slices.Equal(got, []string{"KDCClockOffsetHigh"}) {
		t.Errorf("clock step: sent firing %v, want KDCClockOffsetHigh alone: %v", got, sent)
	}
	if state := alertState(t, ctx, prom, "KDCProbeFailing"); state != "firing" {
		t.Errorf("clock step: KDCProbeFailing is %q in Prometheus, want firing (held back by Alertmanager only)", state)
	}
	if err := r.RestartKDCShifted(ctx, 0); err != nil {
		t.Fatal(err)
	}
	waitNotification(t, ctx, hook, "tickets", "KDCClockOffsetHigh", "resolved")
	waitQuery(t, ctx, prom, `count(ALERTS{alertstate="firing",severity!="info"}) == 0 or absent(ALERTS{alertstate="firing",severity!="info"})`)

	// A worker killed: MIT's supervisor stops the whole KDC.
	pids := r.KDCPids()
	if len(pids) != 3 {
		t.Fatalf("krb5kdc -w 2: pids %v, want the supervisor and 2 workers", pids)
	}
	mark = hook.count()
	if err := syscall.Kill(pids[len(pids)-1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitNotification(t, ctx, hook, "pager", "KDCRealmUnavailable", "firing")
	waitFlushes(t, ctx, amLog, "KDCDown", 2)
	if err := r.StartKDC(ctx); err != nil {
		t.Fatal(err)
	}
	waitNotification(t, ctx, hook, "pager", "KDCRealmUnavailable", "resolved")
	sent = settle(mark)
	record("worker killed, KDC started again", sent)
	if got := firing(sent, "pager"); !slices.Equal(got, []string{"KDCRealmUnavailable"}) {
		t.Errorf("worker killed: paged %v, want KDCRealmUnavailable alone: %v", got, sent)
	}
	if got := firing(sent, "tickets"); len(got) != 0 {
		t.Errorf("worker killed: tickets %v, want none (inhibited by KDCRealmUnavailable): %v", got, sent)
	}
	t.Logf("fault -> notifications (receiver status [alert=status]):\n%s", strings.Join(table, "\n"))
	var p95 struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, prom+"/api/v1/query?query="+url.QueryEscape(`target_exchange:krb5_probe_duration_seconds:p95_30m`), &p95); err == nil {
		for _, r := range p95.Data.Result {
			t.Logf("probe p95 over the test: %s %s %v s", r.Metric["target"], r.Metric["exchange"], r.Value[1])
		}
	}
}

// summarize is one line of the fault table: each notification's receiver,
// status and alerts.
func summarize(sent []notification) string {
	if len(sent) == 0 {
		return "none"
	}
	var s []string
	for _, n := range sent {
		s = append(s, n.String())
	}
	return fmt.Sprintf("%d: %s", len(sent), strings.Join(s, "; "))
}
