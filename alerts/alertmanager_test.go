package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestAlertmanagerConfig checks the example alertmanager.yml with amtool
// and its routing: pages by realm, tickets, nothing for info.
func TestAlertmanagerConfig(t *testing.T) {
	t.Parallel()
	amtool := testutil.RequireProgram(t, "amtool")
	if out, err := exec.Command(amtool, "check-config", "alertmanager.yml").CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config alertmanager.yml: %v\n%s", err, out)
	}
	for labels, want := range map[string]string{
		"severity=critical realm=EXAMPLE.COM":                   "pager-example-com",
		"severity=critical realm=OTHER.ORG instance=kdc1:10088": "pager",
		"severity=critical":                                     "pager",
		"severity=warning realm=EXAMPLE.COM":                    "tickets",
		"severity=info":                                         "blackhole",
	} {
		args := append([]string{"config", "routes", "test", "--config.file=alertmanager.yml"}, strings.Fields(labels)...)
		out, err := exec.Command(amtool, args...).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != want {
			t.Errorf("amtool config routes test %s: %q (%v), want %q", labels, got, err, want)
		}
	}
}

// notification is what Alertmanager's webhook receiver posts.
type notification struct {
	Receiver string `json:"receiver"`
	Status   string `json:"status"`
	Alerts   []struct {
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
	} `json:"alerts"`
}

func (n notification) String() string {
	var names []string
	for _, a := range n.Alerts {
		where := a.Labels["instance"]
		if tg := a.Labels["target"]; tg != "" {
			where += " " + tg
		}
		names = append(names, a.Labels["alertname"]+"{"+where+"}="+a.Status)
	}
	return fmt.Sprintf("%s %s %v", n.Receiver, n.Status, names)
}

// webhook collects the notifications Alertmanager sends.
type webhook struct {
	mu  sync.Mutex
	got []notification
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var n notification
	if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	w.got = append(w.got, n)
	w.mu.Unlock()
}

// sent returns the notifications so far to receivers matching re.
func (w *webhook) sent(re string) []notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []notification
	for _, n := range w.got {
		if matches(re, n.Receiver) {
			out = append(out, n)
		}
	}
	return out
}

// count returns how many notifications came so far: a mark for since.
func (w *webhook) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.got)
}

// since returns the notifications that came after mark.
func (w *webhook) since(mark int) []notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got[mark:])
}

func matches(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

// The test's copy of alertmanager.yml: short waits, so the test is short.
const (
	amCriticalGroupWait = 8 * time.Second // > the gap between KDCDown and KDCRealmUnavailable firing here
	amGroupWait         = 2 * time.Second
	amGroupInterval     = 2 * time.Second
)

// TestAlertmanagerEndToEnd runs the example alertmanager.yml in Debian's
// prometheus-alertmanager, fed by a real Prometheus with every rule file
// (each for: cut to 3s, the error budget's burn-rate alerts' left as they
// are: a probe timing out on a loaded machine is a real failure of the
// SLI), which scrapes a krb5-exporter next to a harness KDC, with a
// webhook receiver in the test. Client errors (wrong passwords, unknown
// principals, SPAKE group fallbacks by MIT kinit) make tickets
// (KDCWrongPasswordsRising) and no page; stopping the realm's only KDC
// makes exactly one page, KDCRealmUnavailable, routed to the realm's
// pager, while Alertmanager holds KDCDown suppressed; starting it again
// sends the page's resolved notification and no other page.
func TestAlertmanagerEndToEnd(t *testing.T) {
	promBin, amBin := needAlertmanager(t)
	t.Parallel()
	e := newE2E(t, 3*time.Minute)
	ctx, tmp := e.ctx, e.tmp
	begin := time.Now()
	r := realmtest.Realm(t, realm.Options{Users: 3, Services: 1, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})

	am, hook, amLog := startAlertmanager(t, ctx, amBin, tmp, r.Realm)

	// The exporter, probing its KDC every second.
	x := e.exporter("modules:\n"+probeModule(r, "udp", 5*time.Second)+fmt.Sprintf(`probes:
  - {name: kdc, address: "%s", module: udp, interval: 1s}
logs:
  - path: %s
    type: kdc
    start_at: beginning
    probe_principals: [%s]
`, r.KDCAddr, r.KDCLog, r.ProbePrincipal),
		"--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf,
		"--no-collector.replication")

	// Prometheus, the realm as a target label, every for: but the burn
	// rates' cut to 3s.
	copies := ruleCopies(t, filepath.Join(tmp, "rules"), func(r rule) string {
		if r.For == "" || strings.HasPrefix(r.Alert, "KDCErrorBudgetBurn") {
			return ""
		}
		return "3s"
	})
	prom, _ := startPrometheus(t, ctx, promBin, tmp, copies, scrapeConfig(am, r.Realm, x))
	waitQuery(t, ctx, prom, `krb5_probe_success{exchange="as"} == 1`)
	t.Logf("KDC, exporter, Prometheus and Alertmanager ready after %.1fs", time.Since(begin).Seconds())
	if n := len(shortenedFor(t, copies)); n < 10 {
		t.Fatalf("only %d alerts have a shortened for:", n)
	}

	// Client errors: wrong passwords (user 1 only: a later login of the
	// same client would count them recovered), unknown principals, and
	// logins that fall back from a SPAKE group the KDC lacks.
	conf := string(testutil.MustRead(t, r.Krb5Conf))
	p256 := filepath.Join(tmp, "p256.conf")
	writeFile(t, p256, strings.Replace(conf, "spake_preauth_groups = edwards25519", "spake_preauth_groups = P-256", 1))
	kinit := func(cc, krb5conf, stdin string, args ...string) error {
		cmd := exec.CommandContext(ctx, "kinit", args...)
		cmd.Env = append(append(os.Environ(), r.Env()...), "KRB5CCNAME=FILE:"+filepath.Join(tmp, cc))
		if krb5conf != "" {
			cmd.Env = append(cmd.Env, "KRB5_CONFIG="+krb5conf)
		}
		cmd.Stdin = strings.NewReader(stdin)
		return cmd.Run()
	}
	// 40 wrong passwords (0.13/s over 5 minutes: KDCWrongPasswordsRising
	// fires above 0.1/s), 12 unknown principals, 8 fallbacks; 4 clients
	// at once.
	var burst sync.WaitGroup
	for c := range 4 {
		burst.Add(1)
		go func() {
			defer burst.Done()
			cc := fmt.Sprint("cc", c)
			for i := range 10 {
				if kinit(cc, "", "not-the-password\n", r.User(1)) == nil {
					t.Error("kinit with a wrong password succeeded")
				}
				if i%10 < 3 && kinit(cc, "", "x\n", fmt.Sprintf("nobody-%d-%d@%s", c, i, r.Realm)) == nil {
					t.Error("kinit of an unknown principal succeeded")
				}
				if i%10 < 2 {
					if err := kinit(cc, p256, "", "-k", "-t", r.UserKeytab, r.User(2+c%2)); err != nil {
						t.Errorf("kinit falling back from P-256: %v", err)
					}
				}
			}
		}()
	}
	burst.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("client errors sent after %.1fs", time.Since(begin).Seconds())
	// The burst is a ticket, not a page.
	waitNotification(t, ctx, hook, "tickets", "KDCWrongPasswordsRising", "firing")
	if pages := hook.sent("pager"); len(pages) != 0 {
		t.Fatalf("client errors paged: %v", pages)
	}
	t.Logf("client errors: tickets %v", hook.sent("tickets"))

	// The realm's only KDC stops: one page.
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	waitNotification(t, ctx, hook, "pager", "KDCRealmUnavailable", "firing")
	t.Logf("paged %.1fs after the KDC stopped", time.Since(stopped).Seconds())
	// KDCDown fires too: a page for it could only come at its group's
	// first flush, amCriticalGroupWait after it reached Alertmanager.
	// Alertmanager notifies a group's flush before the next flush of that
	// group: once its second flush is logged, any page of the first has
	// reached the webhook.
	waitAMAlert(t, ctx, am, "KDCDown")
	waitFlushes(t, ctx, amLog, "KDCDown", 2)
	t.Logf("KDCDown's group flushed twice %.1fs after the KDC stopped", time.Since(stopped).Seconds())
	pages := hook.sent("pager")
	if len(pages) != 1 || len(pages[0].Alerts) != 1 || pages[0].Receiver != "pager-example-com" ||
		pages[0].Alerts[0].Labels["alertname"] != "KDCRealmUnavailable" || pages[0].Alerts[0].Labels["realm"] != r.Realm {
		t.Fatalf("pages after the KDC stopped: %v, want one for KDCRealmUnavailable of %s to pager-example-com", pages, r.Realm)
	}
	if state := waitAMAlert(t, ctx, am, "KDCDown"); state != "suppressed" {
		t.Errorf("KDCDown %s in Alertmanager, want suppressed (inhibited by KDCRealmUnavailable)", state)
	}

	// Started again: the page resolves, nothing else pages.
	if err := r.StartKDC(ctx); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	waitNotification(t, ctx, hook, "pager", "KDCRealmUnavailable", "resolved")
	t.Logf("resolved %.1fs after the KDC started", time.Since(started).Seconds())
	for _, n := range hook.sent("pager") {
		for _, a := range n.Alerts {
			if a.Labels["alertname"] != "KDCRealmUnavailable" {
				t.Errorf("paged for %s: %v", a.Labels["alertname"], n)
			}
		}
	}
	t.Logf("pages: %v", hook.sent("pager"))
}

// startAlertmanager runs the example alertmanager.yml in Alertmanager for
// the rest of the test, at debug level (waitFlushes): the receivers' URLs
// are the returned webhook's, the example's realm realmName, the waits
// the test's (amGroupWait, ...). It returns Alertmanager's URL once ready.
func startAlertmanager(t *testing.T, ctx context.Context, amBin, tmp, realmName string) (string, *webhook, *testutil.LockedBuffer) {
	t.Helper()
	hook := &webhook{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	b, err := os.ReadFile("alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	amText := strings.NewReplacer("http://127.0.0.1:9095", srv.URL, "EXAMPLE.COM", realmName).Replace(string(b))
	for re, v := range map[string]time.Duration{
		`(?m)^(  group_wait: )\S+`:       amGroupWait,
		`(?m)^(      group_wait: )\S+`:   amCriticalGroupWait,
		`(?m)^(  group_interval: )\S+`:   amGroupInterval,
		`(?m)^(\s+repeat_interval: )\S+`: time.Hour,
	} {
		re := regexp.MustCompile(re)
		if !re.MatchString(amText) {
			t.Fatalf("alertmanager.yml: %s not found", re)
		}
		amText = re.ReplaceAllString(amText, "${1}"+v.String())
	}
	amCfg := filepath.Join(tmp, "alertmanager.yml")
	writeFile(t, amCfg, amText)
	amAddr := freeAddr(t)
	amLog := &testutil.LockedBuffer{}
	start(t, amLog, amBin, "--config.file", amCfg, "--storage.path", filepath.Join(tmp, "am"),
		"--web.listen-address", amAddr, "--cluster.listen-address=", "--log.level=debug")
	am := "http://" + amAddr
	waitHTTP(t, ctx, am+"/-/ready", amLog)
	return am, hook, amLog
}

// shortenedFor returns the alerts whose for: is 3s in the rule files.
func shortenedFor(t *testing.T, files []string) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		var rf ruleFile
		readYAML(t, f, &rf)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.For == "3s" {
					out = append(out, r.Alert)
				}
			}
		}
	}
	return out
}

// waitNotification waits up to 60 s for a notification to a receiver
// matching receiver that holds alert with status.
func waitNotification(t *testing.T, ctx context.Context, hook *webhook, receiver, alert, status string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, n := range hook.sent(receiver) {
			for _, a := range n.Alerts {
				if a.Labels["alertname"] == alert && a.Status == status {
					return
				}
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("no %s notification of %s to %s within 60s; sent: %v", status, alert, receiver, hook.sent(""))
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// waitFlushes waits up to 60 s for Alertmanager (at debug level) to log n
// flushes of groups holding alert.
func waitFlushes(t *testing.T, ctx context.Context, amLog *testutil.LockedBuffer, alert string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		flushes := 0
		for _, l := range strings.Split(amLog.String(), "\n") {
			if strings.Contains(l, "msg=flushing") && strings.Contains(l, alert+"[") {
				flushes++
			}
		}
		if flushes >= n {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%d flushes of %s in Alertmanager's log within 60s, want %d:\n%s", flushes, alert, n, amLog.String())
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// waitAMAlert waits up to 60 s for Alertmanager to hold alert and
// returns its state: active, or suppressed (inhibited or silenced).
func waitAMAlert(t *testing.T, ctx context.Context, am, alert string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var alerts []struct {
			Labels map[string]string `json:"labels"`
			Status struct {
				State       string   `json:"state"`
				InhibitedBy []string `json:"inhibitedBy"`
			} `json:"status"`
		}
		if err := getJSON(ctx, am+"/api/v2/alerts", &alerts); err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == alert {
				return a.Status.State
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s not in Alertmanager within 60s: %+v", alert, alerts)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}
