package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// shortened are the alerts whose for: the end-to-end test sets to 5s, so
// that they fire within the test.
var shortened = []string{"KDCProbeFailing", "KDCRealmUnavailable", "KDCDown", "KDCErrorBudgetBurnFast"}

// TestEndToEnd runs the rules and the dashboards' queries in a real
// Prometheus that scrapes two real krb5-exporters: one following and
// probing a harness realm (krb5kdc -w 2) under a small load of real MIT
// clients, one next to a replica of that realm (kpropd over iprop); and a
// real krb5-exporter bench daemon that runs a short suite against its own
// small realm. It checks that every dashboard query (template variables
// substituted) and every recording rule returns data (the realm's exporter
// runs the opt-in kdcservice collector, so its series are there too), that
// the replication rules find the replica as the replica, that no rule
// fails to evaluate, that the README's /probe relabelling works, that the
// load's requests for an unknown service are client errors and do not
// spend the error budget,
// and that stopping the KDC makes KDCProbeFailing go pending, then firing,
// with KDCRealmUnavailable, KDCDown and KDCErrorBudgetBurnFast (the probes'
// refusals are the SLI's failures). The rules are the committed files with
// one change: the for: of the alerts in shortened is 5s.
func TestEndToEnd(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	e := newE2E(t, 4*time.Minute)
	ctx, tmp, bin := e.ctx, e.tmp, e.bin

	// The bench daemon first: its suite runs while the realms come up.
	benchAddr := freeAddr(t)
	benchLog := &testutil.LockedBuffer{}
	startBench(t, benchLog, bin, tmp, benchAddr)

	// With a trusted realm beside it, for the cross-realm probe, and a KDC
	// proxy, for the probe through it (the probes dashboard's rows of both).
	r := realmtest.Realm(t, realm.Options{Users: 5, Services: 2, Fillers: 20, Workers: 2, Trust: realmtest.TrustRealm, KDCProxy: true})
	replica := realmtest.Replica(t, r)
	// An update after the replica's full resync: both update logs hold
	// one, so both have a last update time to compare.
	if _, err := r.KadminLocal(ctx, "addprinc -randkey -clearpolicy e2e-replicated"); err != nil {
		t.Fatal(err)
	}

	// kadmind's probes too: the probes dashboard's kadmind row.
	kadmindModules := fmt.Sprintf(`  kpasswd: {prober: kpasswd, realm: %[1]s, client: %[2]s, keytab: %[3]s, kdc: "%[4]s", timeout: 2s}
  kadmin: {prober: kadmin, timeout: 2s}
`, r.Realm, r.ProbePrincipal, r.ProbeKeytab, r.KDCAddr)
	x := e.exporter("modules:\n"+probeModule(r, "udp", 2*time.Second)+probeModule(r, "tcp", 2*time.Second)+kadmindModules+fmt.Sprintf(`  xrealm:
    realm: %[4]s
    client: %[3]s
    keytab: %[5]s
    service: %[6]s
    realm_kdcs: {%[7]s: ["%[8]s"]}
    timeout: 2s
  https:
    realm: %[4]s
    client: %[3]s
    keytab: %[5]s
    service: %[11]s
    transport: https
    timeout: 5s
    proxy_ca_file: %[10]s
probes:
  - {name: kdc-udp, address: "%[1]s", module: udp, interval: 1s}
  - {name: kdc-tcp, address: "%[1]s", module: tcp, interval: 1s}
  - {name: trust, address: "%[1]s", module: xrealm, interval: 1s}
  - {name: kdc-https, address: "%[9]s", module: https, interval: 1s}
  - {name: kpasswd, address: "127.0.0.1:%[12]d", module: kpasswd, interval: 1s}
  - {name: kadmin, address: "%[13]s", module: kadmin, interval: 1s}
logs:
  - path: %[2]s
    type: kdc
    start_at: beginning
    probe_principals: [%[3]s]
top_talkers:
  window: 5s # the overview's top-talkers tables within the test
`, r.KDCAddr, r.KDCLog, r.ProbePrincipal, r.Realm, r.ProbeKeytab, r.Trusted.Service(1), r.Trusted.Realm, r.Trusted.KDCAddr,
		r.KDCProxy.URL, r.KDCProxy.CA, r.Service(1), r.KpasswdPort, r.KadmindAddr),
		"--collector.process.krb5kdc-pidfile", r.KDCPidFile, "--collector.process.kadmind-pidfile", r.KadmindPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf,
		"--collector.replication.dump-file", r.DumpFile, "--collector.kdcservice")

	// The exporter next to the replica: its KDC's and kpropd's logs, its
	// own daemons by their pid files (kadmind runs only on the primary:
	// that is how the rules tell the primary).
	rx := e.exporter(fmt.Sprintf(`logs:
  - {path: %s, type: kdc, start_at: beginning}
  - {path: %s, type: kpropd, start_at: beginning}
`, replica.KDCLog, replica.Replica.Log),
		"--collector.process.krb5kdc-pidfile", replica.KDCPidFile, "--collector.process.kadmind-pidfile", replica.KadmindPidFile,
		"--collector.process.kpropd-pidfile", replica.Replica.PidFile,
		"--collector.kdcconf.path", replica.KDCConf, "--collector.kdcconf.krb5-config", replica.Krb5Conf,
		"--collector.replication.dump-file", replica.DumpFile)
	exporterAddr, replicaAddr := x.addr, rx.addr

	// Prometheus, with the rule files as committed except for one for:.
	copies := ruleCopies(t, filepath.Join(tmp, "rules"), func(r rule) string {
		if slices.Contains(shortened, r.Alert) {
			return "5s"
		}
		return ""
	})
	prom, promLog := startPrometheus(t, ctx, promBin, tmp, copies, fmt.Sprintf(`scrape_configs:
  - job_name: krb5
    static_configs: [{targets: ["%s", "%s"]}]
  - job_name: krb5-bench
    static_configs: [{targets: ["%s"]}]
  - job_name: krb5-probe
    scrape_interval: 2s
    scrape_timeout: 2s
    metrics_path: /probe
    params: {module: [udp]}
    static_configs: [{targets: ["%s"]}]
    relabel_configs:
      - {source_labels: [__address__], target_label: __param_target}
      - {source_labels: [__param_target], target_label: instance}
      - {target_label: __address__, replacement: "%s"}
`, exporterAddr, replicaAddr, benchAddr, r.KDCAddr, exporterAddr))

	// A small steady load of real MIT clients: logins and service
	// tickets, one in ten for a service that does not exist.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadDone sync.WaitGroup
	loadDone.Add(1)
	go func() {
		defer loadDone.Done()
		load(loadCtx, r, filepath.Join(tmp, "ccache"))
	}()
	defer func() { stopLoad(); loadDone.Wait() }()

	// Every dashboard query and every recording rule, until all return
	// data or the deadline passes.
	// The variables as Grafana substitutes them with the KDCs' exporters
	// (or the bench daemon) chosen.
	vars := map[string]dashboardVars{
		"krb5-kdc-overview.json": {job: "krb5", instances: []string{exporterAddr, replicaAddr}},
		"krb5-probes.json":       {job: "krb5", instances: []string{exporterAddr, replicaAddr}},
		"krb5-bench.json":        {job: "krb5-bench", instances: []string{benchAddr}},
	}
	queries := map[string]string{} // query -> where it comes from
	// The disk waits exist only while the kernel's task delay accounting
	// is on; off, the exporter says so instead.
	delayacct, _ := os.ReadFile("/proc/sys/kernel/task_delayacct")
	noDiskWaits := strings.TrimSpace(string(delayacct)) == "0"
	// What needs a realm of two loaded KDCs (the N-1 headroom: the
	// replica here answers little more than its probes, too few requests
	// for a capacity estimate) or a bench run's report beside the exporter
	// (capacity against the bench) is left out; TestHeadroomEndToEnd
	// drives the capacity series.
	headroomOnly := func(expr string) bool {
		for _, s := range []string{"capacity_n_minus_1", "capacity_to_bench", "krb5_kdc_bench_capacity"} {
			if strings.Contains(expr, s) {
				return true
			}
		}
		return false
	}
	for where, expr := range dashboardQueries(t, vars) {
		if noDiskWaits && strings.Contains(expr, "_disk_wait_seconds_total") || headroomOnly(expr) {
			continue
		}
		queries[expr] = where
	}
	if noDiskWaits {
		queries[`krb5_exporter_task_delayacct_enabled == 0`] = "kernel.task_delayacct is 0"
	}
	// The realm's exporter runs --collector.kdcservice (the replica's does
	// not): its programs must be attached to that KDC's processes.
	queries[`krb5_kdc_service_tracing_up == 1`] = "the kdcservice collector traces the KDC"
	for _, rl := range allRules(t) {
		if rl.Record != "" && !headroomOnly(rl.Record) {
			queries[rl.Record] = "recording rule"
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		var missing []string
		for expr, where := range queries {
			n, err := instantQuery(ctx, prom, expr)
			if err != nil {
				t.Fatalf("%s: %q: %v", where, expr, err)
			}
			if n == 0 {
				missing = append(missing, where+": "+expr)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90s, %d of %d queries return no data:\n%s\nexporter log:\n%s\nreplica's exporter log:\n%s\nbench log:\n%s",
				len(missing), len(queries), strings.Join(missing, "\n"), x.log.String(), rx.log.String(), benchLog.String())
		}
		sleep(ctx, time.Second)
	}
	t.Logf("%d dashboard and recording rule queries return data", len(queries))
	checkRuleHealth(t, ctx, prom)
	checkVariables(t, ctx, prom, vars)
	checkBenchAgainstReport(t, ctx, prom, filepath.Join(tmp, "bench-results"))
	// The rules take the host whose kadmind runs for the primary: the lag
	// is the replica's alone.
	for expr, want := range map[string]int{
		`krb5:iprop_replica_lag_updates`:                                        1,
		fmt.Sprintf(`krb5:iprop_replica_lag_updates{instance=%q}`, replicaAddr): 1,
		`krb5:iprop_replica_lag_seconds`:                                        1,
	} {
		if n, err := instantQuery(ctx, prom, expr); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", expr, n, err, want)
		}
	}

	// The README's /probe scrape configuration logs in through the KDC.
	// (One success in the last minute: on a loaded machine a probe may
	// overrun the scrape's timeout now and then.)
	if n, err := instantQuery(ctx, prom, `max_over_time(probe_success{job="krb5-probe"}[1m]) == 1`); err != nil || n != 1 {
		t.Errorf(`max_over_time(probe_success{job="krb5-probe"}[1m]) == 1: %d series, %v`, n, err)
	}
	// The unknown service's LOOKING_UP_SERVER lines are client errors:
	// counted as such, and not in the SLI.
	waitQuery(t, ctx, prom, fmt.Sprintf(`instance:krb5_kdc_client_errors:rate5m{instance=%q} > 0`, exporterAddr))
	active := activeAlerts(t, ctx, prom)
	if active["KDCErrorBudgetBurnFast"] != "" {
		t.Errorf("KDCErrorBudgetBurnFast %s while the KDC answers every valid request", active["KDCErrorBudgetBurnFast"])
	}
	t.Logf("active alerts before the KDC stops: %v", active)
	// (Pending is possible: on a loaded machine one probe may time out.)
	for _, a := range []string{"KDCProbeFailing", "KDCRealmUnavailable", "KDCDown"} {
		if active[a] == "firing" {
			t.Fatalf("%s is firing while the KDC runs", a)
		}
	}

	stopLoad()
	loadDone.Wait()
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	alertDeadline := stopped.Add(45 * time.Second)
	seen := map[string]bool{}
	for !seen["firing"] {
		state := alertState(t, ctx, prom, "KDCProbeFailing")
		if state == "firing" && !seen["pending"] {
			t.Fatal("KDCProbeFailing fired without being pending first")
		}
		if !seen[state] {
			t.Logf("KDCProbeFailing %q %.1fs after the KDC stopped", state, time.Since(stopped).Seconds())
		}
		seen[state] = true
		if time.Now().After(alertDeadline) {
			t.Fatalf("KDCProbeFailing did not fire within 45s after the KDC stopped (seen: %v)\nprometheus log:\n%s", seen, promLog.String())
		}
		sleep(ctx, 200*time.Millisecond)
	}
	waitFiring(t, ctx, prom, "KDCRealmUnavailable")
	waitFiring(t, ctx, prom, "KDCDown")
	waitFiring(t, ctx, prom, "KDCErrorBudgetBurnFast")
}

// waitQuery waits up to 45 s for expr to return a series.
func waitQuery(t *testing.T, ctx context.Context, prom, expr string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		n, err := instantQuery(ctx, prom, expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s returned nothing for 45s", expr)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// needPrometheus skips an end-to-end test under -short and returns the
// prometheus binary; a missing MIT krb5 or prometheus fails it.
func needPrometheus(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: real KDC, exporter and Prometheus")
	}
	realmtest.RequireMIT(t)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not found: install the Debian package prometheus (make deps)")
	}
	return promBin
}

// waitFiring waits up to 45 s for an alert to fire.
func waitFiring(t *testing.T, ctx context.Context, prom, alert string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for alertState(t, ctx, prom, alert) != "firing" {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not fire within 45s; active: %v", alert, activeAlerts(t, ctx, prom))
		}
		sleep(ctx, 200*time.Millisecond)
	}
	t.Logf("%s firing", alert)
}

// probeModule is a module of the exporter's configuration that logs the
// realm's probe principal in through its KDC over transport (its name).
func probeModule(r *realm.Realm, transport string, timeout time.Duration) string {
	return fmt.Sprintf(`  %[1]s:
    realm: %[2]s
    client: %[3]s
    keytab: %[4]s
    service: %[5]s
    transport: %[1]s
    timeout: %[6]s
    allowed_kdcs: ["%[7]s"]
`, transport, r.Realm, r.ProbePrincipal, r.ProbeKeytab, r.Service(1), timeout, r.KDCAddr)
}

// startPrometheus runs Prometheus for the rest of the test, scraping and
// evaluating every second, with the rule files rules and the rest of its
// configuration (scrape_configs, alerting) in config; it returns its URL
// once ready, and its log.
func startPrometheus(t *testing.T, ctx context.Context, bin, tmp string, rules []string, config string) (string, *testutil.LockedBuffer) {
	t.Helper()
	addr := freeAddr(t)
	cfg := filepath.Join(tmp, "prometheus.yml")
	writeFile(t, cfg, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%s]
`, strings.Join(rules, ", "))+config)
	log := &testutil.LockedBuffer{}
	start(t, log, bin, "--config.file", cfg, "--storage.tsdb.path", filepath.Join(tmp, "tsdb"), "--web.listen-address", addr)
	url := "http://" + addr
	waitHTTP(t, ctx, url+"/-/ready", log)
	return url, log
}

// ruleCopies writes the rule files into dir, each alert's for: (and
// keep_firing_for:) replaced by what forOf returns for it (unless empty),
// and returns their paths.
func ruleCopies(t *testing.T, dir string, forOf func(rule) string) []string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var copies []string
	for _, f := range ruleFiles(t) {
		text := string(testutil.MustRead(t, f))
		var rf ruleFile
		readYAML(t, f, &rf)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if d := forOf(r); r.Alert != "" && d != "" {
					if r.For == "" {
						t.Fatalf("%s: alert %s has no for: to shorten", f, r.Alert)
					}
					text = testutil.ShortenFor(text, r.Alert, "for", d)
					if r.KeepFiring != "" {
						text = testutil.ShortenFor(text, r.Alert, "keep_firing_for", d)
					}
				}
			}
		}
		writeFile(t, filepath.Join(dir, f), text)
		copies = append(copies, filepath.Join(dir, f))
	}
	return copies
}

// dashboardVars are the values of one dashboard's template variables in
// this test: the job, and the instances chosen (all of the job's).
type dashboardVars struct {
	job       string
	instances []string
}

// dashboardQueries returns every panel query of the committed dashboards
// with the template variables substituted as Grafana would for vars (a
// multi-value variable as a regular expression (a|b); all targets).
func dashboardQueries(t *testing.T, vars map[string]dashboardVars) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in ../dashboards: %v", err)
	}
	out := map[string]string{}
	for _, f := range files {
		v, ok := vars[filepath.Base(f)]
		if !ok {
			t.Fatalf("%s: no variables for it in this test", f)
		}
		sub := strings.NewReplacer(`$job`, v.job, `$instance`, "("+strings.Join(v.instances, "|")+")", `$target`, ".+",
			`$__rate_interval`, "10s", `$__interval`, "2s")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			for i, q := range p.Targets {
				out[fmt.Sprintf("%s %q query %d", filepath.Base(f), p.Title, i+1)] = sub.Replace(q.Expr)
			}
		}
	}
	return out
}

// instantQuery returns how many series expr returns now.
func instantQuery(ctx context.Context, prom, expr string) (int, error) {
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, prom+"/api/v1/query?query="+url.QueryEscape(expr), &resp); err != nil {
		return 0, err
	}
	if resp.Status != "success" {
		return 0, fmt.Errorf("%s: %s", resp.Status, resp.Error)
	}
	return len(resp.Data.Result), nil
}

// checkBenchAgainstReport checks what Prometheus scraped from the bench
// daemon against the run's own report.json: every metric's result in base
// units, and nothing else.
func checkBenchAgainstReport(t *testing.T, ctx context.Context, prom, results string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(results, "*", "report.json"))
	if len(files) != 1 {
		t.Fatalf("bench reports %v, want one", files)
	}
	var rep bench.Report
	if err := json.Unmarshal(testutil.MustRead(t, files[0]), &rep); err != nil {
		t.Fatal(err)
	}
	scraped := map[string]float64{}
	for _, r := range vector(t, ctx, prom, `krb5_bench_result{job="krb5-bench"}`) {
		scraped[r.Metric["test"]+" "+r.Metric["metric"]] = r.Value
	}
	if len(scraped) != len(rep.Metrics) || len(rep.Metrics) == 0 {
		t.Errorf("Prometheus has %d bench results, the report %d: %v", len(scraped), len(rep.Metrics), scraped)
	}
	for _, m := range rep.Metrics {
		key := m.Test + " " + m.Name
		if got, ok := scraped[key]; !ok || got != m.Base {
			t.Errorf("krb5_bench_result %s: Prometheus %v (scraped: %v), report.json %v", key, got, ok, m.Base)
		}
	}
	t.Logf("%d bench results in Prometheus match report.json (verdict %s)", len(rep.Metrics), rep.Verdict)
}

// checkRuleHealth fails the test for a rule Prometheus could not evaluate.
func checkRuleHealth(t *testing.T, ctx context.Context, prom string) {
	t.Helper()
	var resp struct {
		Data struct {
			Groups []struct {
				Name           string  `json:"name"`
				EvaluationTime float64 `json:"evaluationTime"`
				Rules          []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := getJSON(ctx, prom+"/api/v1/rules", &resp); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range resp.Data.Groups {
		t.Logf("rule group %s: %d rules evaluated in %.2f ms", g.Name, len(g.Rules), g.EvaluationTime*1000)
		for _, rl := range g.Rules {
			n++
			if rl.Health != "ok" {
				t.Errorf("rule %s: health %q: %s", rl.Name, rl.Health, rl.LastError)
			}
		}
	}
	if want := len(allRules(t)); n != want {
		t.Errorf("Prometheus loaded %d rules, the files have %d", n, want)
	}
}

// labelValues matches a Grafana query variable on Prometheus.
var labelValues = regexp.MustCompile(`^label_values\((.+), (\w+)\)$`)

// checkVariables runs the dashboards' query variables as Grafana does
// (label values of the series a selector matches) and checks that each
// offers the values this test's setup has: the job, every instance, the
// probe target kdc-udp.
func checkVariables(t *testing.T, ctx context.Context, prom string, vars map[string]dashboardVars) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "dashboards", "*.json"))
	for _, f := range files {
		dv := vars[filepath.Base(f)]
		want := map[string][]string{"job": {dv.job}, "instance": dv.instances, "target": {"kdc-udp"}}
		sub := strings.NewReplacer(`$job`, dv.job, `$instance`, "("+strings.Join(dv.instances, "|")+")")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Templating struct {
				List []struct {
					Type  string `json:"type"`
					Name  string `json:"name"`
					Query any    `json:"query"`
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			q, _ := v.Query.(string)
			m := labelValues.FindStringSubmatch(q)
			if m == nil {
				t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", f, v.Name, q)
				continue
			}
			var resp struct {
				Status string   `json:"status"`
				Data   []string `json:"data"`
			}
			u := prom + "/api/v1/label/" + m[2] + "/values?match[]=" + url.QueryEscape(sub.Replace(m[1]))
			if err := getJSON(ctx, u, &resp); err != nil {
				t.Fatal(err)
			}
			if len(want[v.Name]) == 0 {
				t.Errorf("%s: variable %s: this test does not know what it should offer", filepath.Base(f), v.Name)
			}
			for _, w := range want[v.Name] {
				if !slices.Contains(resp.Data, w) {
					t.Errorf("%s: variable %s offers %v, want %q among them", filepath.Base(f), v.Name, resp.Data, w)
				}
			}
		}
	}
}

// promAlert is one alert of Prometheus's /api/v1/alerts.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// promAlerts returns Prometheus's pending and firing alerts.
func promAlerts(t *testing.T, ctx context.Context, prom string) []promAlert {
	t.Helper()
	var resp struct {
		Data struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := getJSON(ctx, prom+"/api/v1/alerts", &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Data.Alerts
}

// activeAlerts returns the pending and firing alerts by name.
func activeAlerts(t *testing.T, ctx context.Context, prom string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range promAlerts(t, ctx, prom) {
		if out[a.Labels["alertname"]] != "firing" {
			out[a.Labels["alertname"]] = a.State
		}
	}
	return out
}

// alertState is the state of an alert in Prometheus: "", pending or firing.
func alertState(t *testing.T, ctx context.Context, prom, name string) string {
	t.Helper()
	return activeAlerts(t, ctx, prom)[name]
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: HTTP %d: %v: %.200s", u, resp.StatusCode, err, b)
	}
	return nil
}

// load logs users in and asks for service tickets with MIT's kinit and
// kvno, about 10 times a second, at most 600 times, until ctx ends; every
// tenth service ticket is for a service that does not exist (the KDC logs
// LOOKING_UP_SERVER: a failed request).
func load(ctx context.Context, r *realm.Realm, ccache string) {
	env := append(os.Environ(), r.Env()...)
	env = append(env, "KRB5CCNAME=FILE:"+ccache)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < 600; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		kinit := exec.CommandContext(ctx, "kinit", "-k", "-t", r.UserKeytab, r.User(i%5+1))
		kinit.Env = env
		if kinit.Run() != nil {
			continue
		}
		service := r.Service(i%2 + 1)
		if i%10 == 9 {
			service = "HTTP/nowhere." + r.Domain + "@" + r.Realm
		}
		kvno := exec.CommandContext(ctx, "kvno", service)
		kvno.Env = env
		kvno.Run()
	}
}

// freeAddr returns a loopback address reserved for the test (outside
// the ephemeral range, locked against other suites) for a daemon to bind.
func freeAddr(t *testing.T) string { return realmtest.Addr(t) }

// start runs a daemon for the rest of the test, its output in log.
func start(t *testing.T, log *testutil.LockedBuffer, bin string, args ...string) {
	t.Helper()
	startCmd(t, log, exec.Command(bin, args...))
}

// startCmd runs cmd for the rest of the test, its output in log.
func startCmd(t *testing.T, log *testutil.LockedBuffer, cmd *exec.Cmd) {
	t.Helper()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

// startBench runs krb5-exporter bench as a daemon serving /metrics on
// addr: one short run of the tests whose metrics the bench dashboard shows
// (throughput, latency, ratios, memory, dump) against its own small
// ephemeral realm, then nothing for an hour. It is stopped with SIGTERM
// (killed after 30 s), so that a run cut short removes its realm.
func startBench(t *testing.T, log *testutil.LockedBuffer, bin, tmp, addr string) {
	t.Helper()
	benchTmp := filepath.Join(tmp, "bench-tmp") // its realm and lock files
	if err := os.Mkdir(benchTmp, 0o700); err != nil {
		t.Fatal(err)
	}
	// A stored run as the baseline, so that the bench dashboard's
	// comparison panels have data (the daemon's --baseline path).
	baseline, err := filepath.Abs(filepath.Join("..", "bench", "compare", "testdata", "slow"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "bench", "--web.listen-address", addr, "--interval", "1h", "--baseline", baseline,
		"--output-dir", filepath.Join(tmp, "bench-results"), "--tests", "as,latency,cpu,memory,dump",
		"--realm.users=6", "--realm.services=3", "--realm.fillers=-1",
		"--clients", "2", "--duration", "500ms", "--login-rate", "30", "--tgs-per-login", "1", "--dump-rounds", "1")
	cmd.Env = append(os.Environ(), "TMPDIR="+benchTmp)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("bench daemon still running 30s after SIGTERM; killed")
			cmd.Process.Kill()
			<-done
		}
	})
}

func waitHTTP(t *testing.T, ctx context.Context, u string, log *testutil.LockedBuffer) {
	t.Helper()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never answered 200:\n%s", u, log.String())
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
