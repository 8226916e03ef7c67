package alerts

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestDistributedAttackAlertsEndToEnd runs attack.rules.yml (the
// distributed alerts' for: shortened to 5 s) in a real Prometheus
// scraping a real krb5-exporter that follows a harness KDC's log, driven
// by the project's load tool, `realm load`. The demo's load (5 users,
// wrong passwords and an unknown name now and then) and one user's burst
// of 12 typos leave KDCDistributedPasswordSpraying and
// KDCDistributedUserEnumeration silent through every evaluation; 30
// users' wrong passwords from 30 loopback addresses of 127.0.1.0/24, and
// 30 unknown names from 30 of 127.0.2.0/24, fire them, while no address
// reaches a per-address threshold (the per-address alerts stay silent).
// The truth is what the load sent, read back from the KDC's log.
func TestDistributedAttackAlertsEndToEnd(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	began := time.Now()
	phase := func(what string) { t.Logf("%.1fs: %s", time.Since(began).Seconds(), what) }
	e := newE2E(t, 3*time.Minute)
	ctx, tmp, bin := e.ctx, e.tmp, e.bin
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(tmp, "realm"), Users: 30, Services: 3, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	x := e.exporter(logConfig(r))

	distributed := []string{"KDCDistributedPasswordSpraying", "KDCDistributedUserEnumeration"}
	text := string(testutil.MustRead(t, "attack.rules.yml"))
	for _, a := range distributed {
		text = testutil.ShortenFor(text, a, "for", "5s")
	}
	rules := filepath.Join(tmp, "attack.rules.yml")
	writeFile(t, rules, text)
	prom, _ := startPrometheus(t, ctx, promBin, tmp, []string{rules}, scrapeConfig("", r.Realm, x))
	query := func(expr string) int {
		t.Helper()
		n, err := instantQuery(ctx, prom, expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return n
	}
	waitQuery(t, ctx, prom, `krb5_kdc_attack_distinct_principals_total{kind="wrong_password"} == 0`)
	phase("realm, exporter and Prometheus up")

	logAt := func() int { return len(testutil.MustRead(t, r.KDCLog)) }
	load := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append([]string{"realm", "load", "--dir", r.Dir, "--tickets", "0", "--weak-enctype-every", "0"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("realm load %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	// settle waits for the attack rules to be evaluated on scrapes taken
	// after every failure of the log so far was decided (the recovery
	// wait).
	settle := func(what string) {
		t.Helper()
		at := time.Now()
		testutil.Eventually(t, 30*time.Second, what, func() bool {
			return lastEvaluation(t, ctx, prom, "krb5-attack").After(at.Add(config.DefaultAttackRecoveryWait + 3*time.Second))
		})
	}
	// fromLog waits for the log since offset to hold 30 distinct
	// addresses of prefix answered status, and returns them with the
	// principal of each (the last).
	fromLog := func(offset int, prefix, status string) map[string]string {
		t.Helper()
		pairs := map[string]string{}
		re := regexp.MustCompile(`\) (` + regexp.QuoteMeta(prefix) + `\d+): ` + status + `: (\S+)@`)
		testutil.Eventually(t, 10*time.Second, "30 addresses of "+prefix+" answered "+status+" in the KDC's log", func() bool {
			for _, m := range re.FindAllStringSubmatch(string(testutil.MustRead(t, r.KDCLog)[offset:]), -1) {
				pairs[m[1]] = m[2]
			}
			return len(pairs) >= 30
		})
		return pairs
	}

	// The demo's load, its failures made frequent: 5 users, a wrong
	// password every 10th login, the unknown demo-nosuch-user0001 every
	// 15th; then one user's 12 typos from a host of its own.
	load("--rate", "3", "--users", "5", "--duration", "15s", "--wrong-password-every", "10", "--unknown-user-every", "15")
	load("--rate", "12", "--users", "1", "--duration", "1s", "--source", "127.0.0.9", "--wrong-password-every", "1", "--unknown-user-every", "0")
	settle("the rules evaluated after the demo's load and the typos")
	phase("demo load and typos evaluated")
	if n := query(`count_over_time(ALERTS{alertname=~"KDCDistributed.*"}[5m])`); n != 0 {
		t.Errorf("a distributed attack alert was pending or firing under the demo's load and one user's typos: %v", activeAlerts(t, ctx, prom))
	}
	if n := query(`krb5_kdc_attack_distinct_principals_total{kind="wrong_password"} >= 1 <= 5`); n != 1 {
		t.Errorf("wrong-password principals not between 1 (the typist) and 5 (every user of the load)")
	}
	if n := query(`krb5_kdc_attack_distinct_principals_total{kind="unknown_client"} == 1`); n != 1 {
		t.Errorf("unknown principals not 1 (demo-nosuch-user0001)")
	}

	// The distributed spray: each of 30 users once from an address of its
	// own, a wrong password.
	off := logAt()
	load("--rate", "15", "--users", "30", "--duration", "3s", "--source", "127.0.1.0/24", "--wrong-password-every", "1", "--unknown-user-every", "0")
	if sprayed := fromLog(off, "127.0.1.", "PREAUTH_FAILED"); len(sprayed) != 30 {
		t.Fatalf("the spray's wrong passwords came from %d addresses of 127.0.1.0/24, want 30: %v", len(sprayed), sprayed)
	}
	phase("spray sent")
	// The enumeration: 30 unknown names, each from an address of its own.
	off = logAt()
	load("--rate", "15", "--users", "1", "--duration", "3s", "--source", "127.0.2.0/24", "--unknown-users", "30", "--unknown-user-every", "1", "--wrong-password-every", "0")
	if enumerated := fromLog(off, "127.0.2.", "CLIENT_NOT_FOUND"); len(enumerated) != 30 {
		t.Fatalf("the enumeration's unknown names came from %d addresses of 127.0.2.0/24, want 30: %v", len(enumerated), enumerated)
	}
	for _, a := range distributed {
		waitFiring(t, ctx, prom, a)
	}
	phase("both distributed alerts firing")
	// Counted across all addresses, once each in the window: user0001 to
	// user0030 (the demo's and the typist's among them) and
	// demo-nosuch-user0001 to 0030 (the demo's among them).
	settle("the rules evaluated after the attacks")
	if n := query(`krb5_kdc_attack_distinct_principals_total{kind="wrong_password"} == 30`); n != 1 {
		t.Errorf("wrong-password principals after the spray not 30")
	}
	if n := query(`krb5_kdc_attack_distinct_principals_total{kind="unknown_client"} == 30`); n != 1 {
		t.Errorf("unknown principals after the enumeration not 30")
	}
	// No address past a per-address threshold.
	if n := query(`krb5_kdc_attack_detections_total{signal=~"password_spraying|user_enumeration"} > 0`); n != 0 {
		t.Errorf("a per-address detection for attacks of one principal an address")
	}
	for _, a := range []string{"KDCPasswordSpraying", "KDCUserEnumeration"} {
		if s := alertState(t, ctx, prom, a); s != "" {
			t.Errorf("%s %s for one principal an address", a, s)
		}
	}
	if t.Failed() {
		if out, err := exec.Command("curl", "-s", "http://"+x.addr+"/metrics").Output(); err == nil {
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "krb5_kdc_attack") {
					t.Log(l)
				}
			}
		}
	}
}
