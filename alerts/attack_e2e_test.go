package alerts

import (
	"context"
	"fmt"
	"os"
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

// attackAlerts are the alerts of attack.rules.yml.
var attackAlerts = []string{"KDCPasswordSpraying", "KDCBruteForce", "KDCUserEnumeration", "KDCKerberoasting", "KDCASREPRoasting"}

// TestAttackAlertsEndToEnd runs attack.rules.yml in one real Prometheus
// scraping a real krb5-exporter that follows a harness KDC's log. A
// healthy load of MIT clients and P-256-only SPAKE clients against the
// KDC's edwards25519 (group fallbacks) leave every attack alert silent
// through evaluations that saw them; then MIT kinit with wrong passwords
// across principals and for one, unknown principals, kvno of services
// with RC4-only keys and a principal without requires_preauth fire each
// of the five.
func TestAttackAlertsEndToEnd(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	began := time.Now()
	phase := func(what string) { t.Logf("%.1fs: %s", time.Since(began).Seconds(), what) }
	e := newE2E(t, 2*time.Minute)
	ctx, tmp := e.ctx, e.tmp
	phase("exporter built")
	r := realmtest.Realm(t, realm.Options{Users: 8, Services: 6, Fillers: -1, NoKadmind: true, DisableLastSuccess: true,
		Enctypes: append(append([]string{}, realm.RHEL9Enctypes...), "arcfour-hmac")})

	x := e.exporter(logConfig(r) + `attack_signals:
  follow_logins: true
  spraying_principals: 5
  brute_force_failures: 4
  enumeration_principals: 5
`)

	// requests.rules.yml too: one client's refused etypes must not spend
	// the error budget.
	var rules []string
	for _, f := range []string{"attack.rules.yml", "requests.rules.yml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, filepath.Join(tmp, f))
		writeFile(t, rules[len(rules)-1], string(b))
	}
	prom, _ := startPrometheus(t, ctx, promBin, tmp, rules, scrapeConfig("", "", x))

	run := func(conf, stdin string, args ...string) error {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), r.Env()...)
		if conf != "" {
			cmd.Env = append(cmd.Env, "KRB5_CONFIG="+conf)
		}
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %v: %s", args, err, out)
		}
		return nil
	}
	ok := func(conf string, args ...string) {
		t.Helper()
		if err := run(conf, "", args...); err != nil {
			t.Fatal(err)
		}
	}
	// waitQuery waits until expr returns a series in Prometheus.
	waitQuery := func(expr string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, expr, func() bool {
			n, err := instantQuery(ctx, prom, expr)
			return err == nil && n > 0
		})
	}

	// The counters' zeros scraped first: an increase is seen from there.
	waitQuery(`krb5_kdc_attack_detections_total{signal="password_spraying"} == 0`)
	phase("realm, exporter and Prometheus up")

	// Healthy logins and service tickets, and 6 principals (spraying's
	// threshold is 5) logging in with P-256 as their only SPAKE group.
	data, err := os.ReadFile(r.Krb5Conf)
	if err != nil {
		t.Fatal(err)
	}
	p256 := filepath.Join(tmp, "krb5-p256.conf")
	writeFile(t, p256, strings.Replace(string(data), "spake_preauth_groups = edwards25519", "spake_preauth_groups = P-256", 1))
	for i := 1; i <= 6; i++ {
		ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(i))
		ok("", "kvno", "--no-store", r.Service(1), r.Service(2))
		ok(p256, "kinit", "-k", "-t", r.UserKeytab, r.User(i))
	}
	waitQuery(`krb5_kdc_preauth_failures_recovered_total{method="spake"} == 6 and on () krb5_kdc_requests_total{request="tgs",status="ISSUE"} == 12`)
	// Every alert evaluated on scrapes taken after the recovery wait.
	seen := time.Now()
	// The default recovery wait (5 s): with 1 s, a cold CI run's loaded
	// machine let a P-256 client's fallback come (or be read) more than
	// a second after its SPAKE failure, counted as a wrong password.
	testutil.Eventually(t, 30*time.Second, "the attack rules evaluated 3 s after the recovery wait", func() bool {
		return lastEvaluation(t, ctx, prom, "krb5-attack").After(seen.Add(config.DefaultAttackRecoveryWait + 3*time.Second))
	})
	phase("healthy load evaluated")
	active := activeAlerts(t, ctx, prom)
	t.Logf("active alerts after the healthy load: %v", active)
	for _, a := range attackAlerts {
		if active[a] != "" {
			t.Errorf("%s is %s under a healthy load and SPAKE group fallbacks", a, active[a])
		}
	}
	if n, err := instantQuery(ctx, prom, `krb5_kdc_attack_events_total{event="wrong_password"} == 0`); err != nil || n != 1 {
		t.Errorf("wrong passwords counted for group fallbacks (%d, %v)", n, err)
	}

	// The attacks.
	for i := 1; i <= 6; i++ {
		if run("", "wrong\n", "kinit", r.User(i)) == nil {
			t.Fatal("a wrong password succeeded")
		}
	}
	for range 3 { // 4 with the spray's
		if run("", "wrong again\n", "kinit", r.User(1)) == nil {
			t.Fatal("a wrong password succeeded")
		}
	}
	for i := range 6 {
		if run("", "x\n", "kinit", fmt.Sprintf("nosuch%d", i)) == nil {
			t.Fatal("an unknown principal logged in")
		}
	}
	for i := 3; i <= 6; i++ {
		if _, err := r.KadminLocal(ctx, "cpw -randkey -e arcfour-hmac:normal "+r.Service(i)); err != nil {
			t.Fatal(err)
		}
	}
	ok("", "kvno", "--no-store", r.Service(3), r.Service(4), r.Service(5), r.Service(6))
	if _, err := r.KadminLocal(ctx, "addprinc -clearpolicy -pw roastme -requires_preauth nopre"); err != nil {
		t.Fatal(err)
	}
	if err := run("", "roastme\n", "kinit", "nopre"); err != nil {
		t.Fatal(err)
	}
	// One client offering RC4 only (a roasting tool's choice), refused 20
	// times: the realm's krbtgt and user keys are AES, so the KDC answers
	// BAD_ENCRYPTION_TYPE. That spends no error budget:
	// KDCErrorBudgetBurnFast not even pending once the requests rules saw
	// it (on this realm's few logins, the old rules had it pending).
	rc4 := filepath.Join(tmp, "krb5-rc4.conf")
	writeFile(t, rc4, strings.Replace(regexp.MustCompile(`(?m)^(\s*default_(tkt|tgs)_enctypes =).*$`).ReplaceAllString(string(data), "$1 arcfour-hmac"),
		"[libdefaults]", "[libdefaults]\n\tallow_weak_crypto = true", 1))
	// The first refusal scraped alone: its series appears with it, and
	// rate() sees the next 19.
	for i := range 20 {
		if run(rc4, "", "kinit", "-k", "-t", r.UserKeytab, r.User(7)) == nil {
			t.Fatal("an RC4-only login to an AES-only realm succeeded")
		}
		if i == 0 {
			waitQuery(`krb5_kdc_requests_total{request="as",status="BAD_ENCRYPTION_TYPE"} == 1`)
		}
	}
	waitQuery(`krb5_kdc_requests_total{request="as",status="BAD_ENCRYPTION_TYPE"} == 20 and on () krb5_kdc_etype_refused_clients == 1`)
	refused := time.Now()
	testutil.Eventually(t, 30*time.Second, "the requests rules evaluated after the refusals", func() bool {
		return lastEvaluation(t, ctx, prom, "krb5-requests").After(refused.Add(2 * time.Second))
	})
	if a := activeAlerts(t, ctx, prom)["KDCErrorBudgetBurnFast"]; a != "" {
		t.Errorf("KDCErrorBudgetBurnFast %s for one client's 20 refused RC4-only requests", a)
	}
	phase("one client's refused etypes evaluated")
	defer func() {
		if t.Failed() { // what the exporter says
			if out, err := exec.Command("curl", "-s", "http://"+x.addr+"/metrics").Output(); err == nil {
				for _, l := range strings.Split(string(out), "\n") {
					if strings.HasPrefix(l, "krb5_kdc_attack") {
						t.Log(l)
					}
				}
			}
		}
	}()
	phase("attacks done")
	for _, a := range attackAlerts {
		waitFiring(t, ctx, prom, a)
	}
	phase("every attack alert firing")
}

// lastEvaluation is when Prometheus last evaluated the rule group.
func lastEvaluation(t *testing.T, ctx context.Context, prom, group string) time.Time {
	t.Helper()
	var resp struct {
		Data struct {
			Groups []struct {
				Name           string    `json:"name"`
				LastEvaluation time.Time `json:"lastEvaluation"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := getJSON(ctx, prom+"/api/v1/rules", &resp); err != nil {
		t.Fatal(err)
	}
	for _, g := range resp.Data.Groups {
		if g.Name == group {
			return g.LastEvaluation
		}
	}
	return time.Time{}
}
