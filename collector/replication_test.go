package collector

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

func startReplicaPair(t *testing.T) (p, r *realm.Realm) {
	t.Helper()
	p = realmtest.Realm(t, realm.Options{Users: 3, Services: 1})
	return p, realmtest.Replica(t, p)
}

// hostConfig is the configuration of an exporter next to one realm.
func hostConfig(r *realm.Realm) Config {
	cfg := DefaultConfig()
	cfg.Network = false
	cfg.KDCConfPath, cfg.Krb5ConfPath = r.KDCConf, r.Krb5Conf
	cfg.KDCPidFile, cfg.KadmindPidFile = r.KDCPidFile, r.KadmindPidFile
	if r.Replica != nil {
		cfg.KpropdPidFile = r.Replica.PidFile
	}
	cfg.DumpFile = r.DumpFile
	return cfg
}

// kproplog runs `kproplog -h` for the realm and returns its fields.
func kproplog(t *testing.T, r *realm.Realm) map[string]string {
	t.Helper()
	bin := "/usr/sbin/kproplog"
	if p, err := exec.LookPath("kproplog"); err == nil {
		bin = p
	}
	cmd := exec.Command(bin, "-h")
	cmd.Env = append(os.Environ(), r.Env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kproplog -h: %v: %s", err, out)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " : ")
		if ok {
			fields[k] = v
		}
	}
	return fields
}

// checkAgainstKproplog compares every header field the collector exports
// with what MIT's kproplog prints for the same file.
func checkAgainstKproplog(t *testing.T, who string, r *realm.Realm, s *scrape) {
	t.Helper()
	k := kproplog(t, r)
	num := func(field string) float64 {
		v, err := strconv.ParseFloat(k[field], 64)
		if err != nil {
			t.Fatalf("%s: kproplog %q = %q", who, field, k[field])
		}
		return v
	}
	rl := []string{"realm", r.Realm}
	for metric, field := range map[string]string{
		"krb5_iprop_ulog_version":          "Log version #",
		"krb5_iprop_ulog_block_size_bytes": "Entry block size",
		"krb5_iprop_ulog_entries":          "Number of entries",
		"krb5_iprop_ulog_first_serial":     "First serial #",
		"krb5_iprop_ulog_last_serial":      "Last serial #",
	} {
		if got, want := s.Value(metric, rl...), num(field); got != want {
			t.Errorf("%s: %s = %v, kproplog %q = %v", who, metric, got, field, want)
		}
	}
	state := strings.ToLower(k["Log state"])
	if v := s.Value("krb5_iprop_ulog_state", "realm", r.Realm, "state", state); v != 1 {
		t.Errorf("%s: krb5_iprop_ulog_state{state=%q} = %v", who, state, v)
	}
	if n := s.Count("krb5_iprop_ulog_state"); n != 4 {
		t.Errorf("%s: %d state series, want 4", who, n)
	}
	// kproplog prints ctime(3) of the seconds, in local time.
	for metric, field := range map[string]string{
		"krb5_iprop_ulog_first_update_time_seconds": "First time stamp",
		"krb5_iprop_ulog_last_update_time_seconds":  "Last time stamp",
	} {
		sec := s.Value(metric, rl...)
		if got := time.Unix(int64(sec), 0).Format(time.ANSIC); got != k[field] {
			t.Errorf("%s: %s = %v (%s), kproplog %q = %q", who, metric, sec, got, field, k[field])
		}
	}
}

// TestReplicationFollowsAndFallsBehind is the acceptance test: the
// update log header read by the collector agrees field by field with
// kproplog on a primary and its replica; 20 principals added on the
// primary reach the replica within its poll; with the replica's kpropd
// stopped its serial stays while the primary's grows; and the recording
// rules and alert, fed those scraped values, report the lag and fire.
func TestReplicationFollowsAndFallsBehind(t *testing.T) {
	p, r := startReplicaPair(t)
	ctx := context.Background()
	_, pReg := newTestCollector(t, hostConfig(p))
	_, rReg := newTestCollector(t, hostConfig(r))

	ps, rs := gather(t, pReg), gather(t, rReg)
	checkAgainstKproplog(t, "primary", p, ps)
	checkAgainstKproplog(t, "replica", r, rs)
	for who, s := range map[string]*scrape{"primary": ps, "replica": rs} {
		if v := s.Value("krb5_exporter_collector_scrape_success", "collector", "replication"); v != 1 {
			t.Errorf("%s: replication collector failed", who)
		}
		if v := s.Value("krb5_iprop_enabled", "realm", p.Realm); v != 1 {
			t.Errorf("%s: iprop_enabled = %v", who, v)
		}
	}
	// The replica got its database by a full resync: kadmind dumped it
	// (.dump_ok) and kprop sent it (.HOST.last_prop), as MIT names them.
	host, _ := os.Hostname()
	host = strings.ToLower(host)
	for metric, file := range map[string]string{
		"krb5_kprop_dump_time_seconds":         p.DumpFile + ".dump_ok",
		"krb5_kprop_last_success_time_seconds": p.DumpFile + "." + host + ".last_prop",
	} {
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatalf("kprop left no %s: %v", file, err)
		}
		var labels []string
		if strings.HasSuffix(file, ".last_prop") {
			labels = []string{"replica", host}
		}
		if got := ps.Value(metric, labels...); got != float64(fi.ModTime().UnixNano())/1e9 {
			t.Errorf("%s = %v, file mtime %v", metric, got, fi.ModTime())
		}
	}
	if n := rs.Count("krb5_kprop_last_success_time_seconds"); n != 0 {
		t.Errorf("replica reports %d full propagations of its own", n)
	}

	// 20 principals on the primary: its serial moves by 20, the replica's
	// follows within its poll interval (awaited, bounded).
	in := samplePair(t, p, pReg, rReg)
	var adds []string
	for i := 0; i < 20; i++ {
		adds = append(adds, fmt.Sprintf("addprinc -randkey -clearpolicy repl%02d", i))
	}
	if _, err := p.KadminLocal(ctx, adds...); err != nil {
		t.Fatal(err)
	}
	moved := samplePair(t, p, pReg, rReg)
	if moved.PrimarySerial != in.PrimarySerial+20 {
		t.Fatalf("primary serial %v -> %v after 20 additions", in.PrimarySerial, moved.PrimarySerial)
	}
	caughtUp := awaitPair(t, p, pReg, rReg, 30*time.Second, func(s pairSample) bool { return s.ReplicaSerial == s.PrimarySerial })
	checkAgainstKproplog(t, "replica after catching up", r, gather(t, rReg))

	// kpropd stopped: the primary moves on, the replica stays.
	if err := r.StopKpropd(); err != nil {
		t.Fatal(err)
	}
	stopped := caughtUp
	for i := 0; i < 3 || stopped.PrimaryTime-stopped.ReplicaTime < 1; i++ {
		if i == 100 {
			t.Fatalf("primary's last update time did not pass the stopped replica's by 1s in 100 additions: %+v", stopped)
		}
		if _, err := p.KadminLocal(ctx, fmt.Sprintf("addprinc -randkey -clearpolicy late%03d", i)); err != nil {
			t.Fatal(err)
		}
		stopped = samplePair(t, p, pReg, rReg)
	}
	if stopped.ReplicaSerial != caughtUp.ReplicaSerial || stopped.PrimarySerial <= caughtUp.PrimarySerial {
		t.Fatalf("with kpropd stopped: replica serial %v -> %v, primary %v -> %v", caughtUp.ReplicaSerial, stopped.ReplicaSerial, caughtUp.PrimarySerial, stopped.PrimarySerial)
	}
	if stopped.ReplicaKpropd != 0 || caughtUp.ReplicaKpropd != 1 {
		t.Errorf("krb5_process_up{program=kpropd} on the replica: %v running, %v stopped", caughtUp.ReplicaKpropd, stopped.ReplicaKpropd)
	}
	t.Logf("in sync: %+v", caughtUp)
	t.Logf("behind:  %+v", stopped)

	runPromtool(t, p.Realm, caughtUp, stopped)
}

// pairSample is what the two exporters report at one moment.
type pairSample struct {
	PrimarySerial, ReplicaSerial   float64
	PrimaryTime, ReplicaTime       float64
	PrimaryKadmind, ReplicaKadmind float64
	ReplicaKpropd                  float64
}

func samplePair(t *testing.T, p *realm.Realm, pReg, rReg prometheus.Gatherer) pairSample {
	t.Helper()
	ps, rs := gather(t, pReg), gather(t, rReg)
	rl := []string{"realm", p.Realm}
	return pairSample{
		PrimarySerial:  ps.Value("krb5_iprop_ulog_last_serial", rl...),
		ReplicaSerial:  rs.Value("krb5_iprop_ulog_last_serial", rl...),
		PrimaryTime:    ps.Value("krb5_iprop_ulog_last_update_time_seconds", rl...),
		ReplicaTime:    rs.Value("krb5_iprop_ulog_last_update_time_seconds", rl...),
		PrimaryKadmind: ps.Value("krb5_process_up", "program", "kadmind"),
		ReplicaKadmind: rs.Value("krb5_process_up", "program", "kadmind"),
		ReplicaKpropd:  rs.Value("krb5_process_up", "program", "kpropd"),
	}
}

// awaitPair scrapes both until ok holds, for at most limit.
func awaitPair(t *testing.T, p *realm.Realm, pReg, rReg prometheus.Gatherer, limit time.Duration, ok func(pairSample) bool) pairSample {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		s := samplePair(t, p, pReg, rReg)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reached in %v: %+v", limit, s)
		}
		time.Sleep(50 * time.Millisecond) // the replica polls every second
	}
}

// runPromtool feeds the recording rules and the alert of
// alerts/replication.rules.yml the values scraped above: ten minutes in
// sync, then the replica stalled at its real serial and time stamp while
// the primary's are at theirs.
func runPromtool(t *testing.T, realmName string, inSync, behind pairSample) {
	t.Helper()
	promtool := testutil.RequireProgram(t, "promtool") // Debian's package prometheus
	rules, err := filepath.Abs("../alerts/replication.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	series := func(name, instance, extra string, a, b float64) string {
		return fmt.Sprintf("      - series: '%s{job=\"krb5\",instance=\"%s\"%s}'\n        values: '%sx9 %sx40'\n", name, instance, extra, f(a), f(b))
	}
	rl := fmt.Sprintf(",realm=\"%s\"", realmName)
	var in strings.Builder
	in.WriteString(series("krb5_iprop_ulog_last_serial", "primary:10088", rl, inSync.PrimarySerial, behind.PrimarySerial))
	in.WriteString(series("krb5_iprop_ulog_last_serial", "replica:10088", rl, inSync.ReplicaSerial, behind.ReplicaSerial))
	in.WriteString(series("krb5_iprop_ulog_last_update_time_seconds", "primary:10088", rl, inSync.PrimaryTime, behind.PrimaryTime))
	in.WriteString(series("krb5_iprop_ulog_last_update_time_seconds", "replica:10088", rl, inSync.ReplicaTime, behind.ReplicaTime))
	in.WriteString(series("krb5_process_up", "primary:10088", `,program="kadmind"`, inSync.PrimaryKadmind, behind.PrimaryKadmind))
	in.WriteString(series("krb5_process_up", "replica:10088", `,program="kadmind"`, inSync.ReplicaKadmind, behind.ReplicaKadmind))
	in.WriteString(series("krb5_process_up", "replica:10088", `,program="kpropd"`, inSync.ReplicaKpropd, behind.ReplicaKpropd))
	labels := fmt.Sprintf(`{job="krb5",instance="replica:10088",realm="%s"}`, realmName)
	test := fmt.Sprintf(`rule_files: [%q]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
%s    promql_expr_test:
      - expr: krb5:iprop_replica_lag_updates
        eval_time: 5m
        exp_samples: [{labels: 'krb5:iprop_replica_lag_updates%[3]s', value: %[4]s}]
      - expr: krb5:iprop_replica_lag_updates
        eval_time: 30m
        exp_samples: [{labels: 'krb5:iprop_replica_lag_updates%[3]s', value: %[5]s}]
      - expr: krb5:iprop_replica_lag_seconds
        eval_time: 5m
        exp_samples: [{labels: 'krb5:iprop_replica_lag_seconds%[3]s', value: %[6]s}]
      - expr: krb5:iprop_replica_lag_seconds
        eval_time: 30m
        exp_samples: [{labels: 'krb5:iprop_replica_lag_seconds%[3]s', value: %[7]s}]
    alert_rule_test:
      - {eval_time: 9m, alertname: Krb5ReplicaBehind}
      - {eval_time: 13m, alertname: Krb5ReplicaBehind}
      - eval_time: 20m
        alertname: Krb5ReplicaBehind
        exp_alerts:
          - exp_labels: {severity: warning, job: krb5, instance: "replica:10088", realm: %[8]q}
            exp_annotations:
              summary: A KDC replica lacks updates its primary has.
              description: 'Replica replica:10088 of %[8]s is behind its primary and has not advanced: logins there see old passwords and keys.'
              runbook_url: https://github.com/krb5-exporter/krb5-exporter/blob/main/alerts/runbook.md#krb5replicabehind
`, rules, in.String(), labels,
		f(inSync.PrimarySerial-inSync.ReplicaSerial), f(behind.PrimarySerial-behind.ReplicaSerial),
		f(inSync.PrimaryTime-inSync.ReplicaTime), f(behind.PrimaryTime-behind.ReplicaTime), realmName)
	path := filepath.Join(t.TempDir(), "replication_test.yml")
	if err := os.WriteFile(path, []byte(test), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules with the scraped values: %v\n%s\n%s", err, out, test)
	}
}
