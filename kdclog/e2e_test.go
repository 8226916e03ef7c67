package kdclog

import (
	"bytes"
	"context"
	"flag"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

var capture = flag.Bool("capture", false, "copy the harness realm's logs to testdata/ (see testdata/README.md)")

func needMIT(t *testing.T) {
	t.Helper()
	realmtest.RequireMIT(t)
}

// clients runs the MIT client programs against a harness realm.
type clients struct {
	t *testing.T
	r *realm.Realm
}

// run runs a client with the realm's environment; krb5conf replaces the
// realm's client profile when not empty.
func (c clients) run(krb5conf, stdin, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.r.Env()...)
	if krb5conf != "" {
		cmd.Env = append(cmd.Env, "KRB5_CONFIG="+krb5conf)
	}
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c clients) ok(krb5conf, name string, args ...string) {
	c.t.Helper()
	if out, err := c.run(krb5conf, "", name, args...); err != nil {
		c.t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

func (c clients) fails(krb5conf, stdin, name string, args ...string) {
	c.t.Helper()
	if out, err := c.run(krb5conf, stdin, name, args...); err == nil {
		c.t.Fatalf("%s %v succeeded, want a failure: %s", name, args, out)
	}
}

// conf writes a variant of the realm's client profile.
func (c clients) conf(name string, edit func(string) string) string {
	c.t.Helper()
	data, err := os.ReadFile(c.r.Krb5Conf)
	if err != nil {
		c.t.Fatal(err)
	}
	p := filepath.Join(c.r.Dir, name)
	if err := os.WriteFile(p, []byte(edit(string(data))), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c clients) kadminLocal(cmds ...string) {
	c.t.Helper()
	if out, err := c.r.KadminLocal(context.Background(), cmds...); err != nil {
		c.t.Fatalf("kadmin.local %v: %v: %s", cmds, err, out)
	}
}

// sendTwice sends one AS-REQ datagram twice: the KDC answers the second
// from its lookaside cache and logs a DISPATCH retransmit line.
func sendTwice(t *testing.T, r *realm.Realm, client string) {
	t.Helper()
	pkt, err := realm.ASRequest(r.Realm, client)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", r.KDCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 4096)
	for range 2 {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(pkt); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
}

// completeLines counts the newline-terminated lines of path.
func completeLines(t *testing.T, path string) float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return float64(bytes.Count(data, []byte{'\n'}))
}

// TestEndToEnd drives real AS and TGS traffic with known outcomes through
// a harness KDC and kadmind, follows their logs with a Manager, scrapes
// /metrics, and compares every counter with the truth twice: with what
// the clients did, and with an independent reading of the log (the
// oracle).
func TestEndToEnd(t *testing.T) {
	needMIT(t)
	r, err := realm.Up(context.Background(), realm.Options{
		Dir: filepath.Join(t.TempDir(), "realm"), Users: 10, Services: 5, Fillers: -1, DisableLastSuccess: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Down()
	kdcSrc := config.LogSource{Path: r.KDCLog, Type: "kdc", StartAt: "beginning", PollInterval: 20 * time.Millisecond,
		ProbePrincipals: []string{r.ProbePrincipal, realm.ReadyPrincipal}}
	kadmSrc := config.LogSource{Path: r.KadmindLog, Type: "kadmind", StartAt: "beginning", PollInterval: 20 * time.Millisecond}
	tm := startManager(t, filepath.Join(t.TempDir(), "positions.json"), kdcSrc, kadmSrc)

	c := clients{t: t, r: r}
	svc := func(i int) string { return r.Service(i) }
	const logins = 6
	for i := 1; i <= logins; i++ {
		c.ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(i))
	}
	// Seven service tickets; --no-store makes each one a request.
	c.ok("", "kvno", "--no-store", svc(1), svc(2), svc(3), svc(4), svc(5), svc(1), svc(2))
	c.fails("", "", "kvno", "--no-store", "HTTP/nosuch."+r.Domain+"@"+r.Realm)
	c.fails("", "wrong password\n", "kinit", r.User(2))
	c.fails("", "x\n", "kinit", "nosuchuser@"+r.Realm)
	c.kadminLocal("modprinc -allow_tix "+r.User(3), `modprinc -expire "2001-01-01 00:00:00 UTC" `+r.User(4))
	c.fails("", "", "kinit", "-k", "-t", r.UserKeytab, r.User(3))
	c.fails("", "", "kinit", "-k", "-t", r.UserKeytab, r.User(4))
	// Account lockout by policy: two wrong passwords, then locked.
	c.kadminLocal("addpol -maxfailure 2 -failurecountinterval 0 -lockoutduration 1h lockout", "modprinc -policy lockout "+r.User(10))
	c.fails("", "wrong\n", "kinit", r.User(10))
	c.fails("", "wrong\n", "kinit", r.User(10))
	c.fails("", "", "kinit", "-k", "-t", r.UserKeytab, r.User(10))
	// A client offering RC4 only; the KDC has no RC4 keys.
	rc4 := c.conf("krb5-rc4.conf", func(s string) string {
		s = regexp.MustCompile(`(?m)^(\s*(default_tkt_enctypes|default_tgs_enctypes|permitted_enctypes) =).*$`).ReplaceAllString(s, "$1 arcfour-hmac")
		return strings.Replace(s, "[libdefaults]", "[libdefaults]\n\tallow_weak_crypto = true", 1)
	})
	c.fails(rc4, "", "kinit", "-k", "-t", r.UserKeytab, r.User(5))
	// Logins over TCP.
	tcp := c.conf("krb5-tcp.conf", func(s string) string {
		return strings.Replace(s, "[libdefaults]", "[libdefaults]\n\tudp_preference_limit = 1", 1)
	})
	c.ok(tcp, "kinit", "-k", "-t", r.UserKeytab, r.User(7))
	c.ok(tcp, "kinit", "-k", "-t", r.UserKeytab, r.User(8))
	// The exporter's probe principal: counted apart.
	c.ok("", "kinit", "-k", "-t", r.ProbeKeytab, r.ProbePrincipal)
	c.ok("", "kvno", "--no-store", svc(1))
	// S4U2Self: a service asks for a ticket to itself on behalf of a user.
	c.ok("", "kinit", "-k", "-t", r.ServiceKeytab, svc(1))
	c.ok("", "kvno", "--no-store", "-U", strings.TrimSuffix(r.User(1), "@"+r.Realm), svc(1))
	sendTwice(t, r, "e2e-duplicate")
	// kadmind: the admin, then a user without rights.
	admin := []string{"-k", "-t", r.AdminKeytab, "-p", r.AdminPrincipal, "-q"}
	c.ok("", "kadmin", append(admin, "addprinc -randkey e2enew")...)
	c.ok("", "kadmin", append(admin, "addprinc -randkey e2enew")...) // exits 0 on failure
	c.ok("", "kadmin", append(admin, "getprinc e2enosuch")...)
	c.ok("", "kadmin", append(admin, "delprinc -force e2enew")...)
	c.ok("", "kadmin", "-k", "-t", r.UserKeytab, "-p", r.User(9), "-q", "getprinc "+r.User(10))

	// kadmind writes "closing down fd N" after the client has gone: wait for
	// that line of the last session before counting the log's lines.
	testutil.Eventually(t, 15*time.Second, "kadmind to close the last session", func() bool {
		b, _ := os.ReadFile(r.KadmindLog)
		return bytes.LastIndex(b, []byte("Unauthorized request")) < bytes.LastIndex(b, []byte("closing down fd"))
	})
	kdcLines, kadmLines := completeLines(t, r.KDCLog), completeLines(t, r.KadmindLog)
	waitValue(t, tm.reg, kdcLines, "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
	waitValue(t, tm.reg, kadmLines, "krb5_kdc_log_lines_read_total", "path", r.KadmindLog)
	srv := httptest.NewServer(promhttp.HandlerFor(tm.reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	got := scrape(t, srv.URL+"/metrics")

	// What the clients did. A SPAKE login takes three AS requests (the
	// middle one is MORE_PREAUTH_DATA_REQUIRED), and so does the wrong
	// password before its PREAUTH_FAILED; each kadmin run logs in to
	// kadmin/admin once.
	const kadminRuns, userLogins = 5, logins + 2 + 1 // + TCP + the service's login
	truth := series{
		key("krb5_kdc_requests_total", "request", "as", "status", "ISSUE"):                                      userLogins + kadminRuns,
		key("krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE"):                                     7 + 1,
		key("krb5_kdc_requests_total", "request", "as", "status", "MORE_PREAUTH_DATA_REQUIRED"):                 userLogins + kadminRuns + 3, // + the wrong passwords
		key("krb5_kdc_requests_total", "request", "as", "status", "PREAUTH_FAILED"):                             3,
		key("krb5_kdc_requests_total", "request", "as", "status", "CLIENT_NOT_FOUND"):                           2,
		key("krb5_kdc_requests_total", "request", "as", "status", "CLIENT LOCKED OUT"):                          1, // allow_tix cleared
		key("krb5_kdc_requests_total", "request", "as", "status", "LOCKED_OUT"):                                 1, // lockout policy
		key("krb5_kdc_requests_total", "request", "as", "status", "CLIENT EXPIRED"):                             1,
		key("krb5_kdc_requests_total", "request", "as", "status", "BAD_ENCRYPTION_TYPE"):                        1,
		key("krb5_kdc_log_probe_requests_total", "request", "as", "status", "ISSUE"):                            1,
		key("krb5_kdc_log_probe_requests_total", "request", "tgs", "status", "ISSUE"):                           1,
		key("krb5_kdc_log_probe_requests_total", "request", "as", "status", "CLIENT_NOT_FOUND"):                 1, // the harness's readiness request
		key("krb5_kdc_weak_etype_requests_total", "kind", "only_weak", "request", "as"):                         1,
		key("krb5_kdc_preauth_verify_failures_total", "method", "spake", "reason", "preauth_failed"):            3,
		key("krb5_kdc_retransmits_total", "action", "resent"):                                                   1,
		key("krb5_kdc_s4u_requests_total", "kind", "protocol_transition"):                                       1,
		key("krb5_kadmind_requests_total", "operation", "kadm5_init", "result", "success"):                      kadminRuns,
		key("krb5_kadmind_requests_total", "operation", "kadm5_create_principal", "result", "success"):          1,
		key("krb5_kadmind_requests_total", "operation", "kadm5_create_principal", "result", "already_exists"):   1,
		key("krb5_kadmind_requests_total", "operation", "kadm5_get_principal", "result", "principal_not_found"): 1,
		key("krb5_kadmind_requests_total", "operation", "kadm5_delete_principal", "result", "success"):          1,
		key("krb5_kadmind_requests_total", "operation", "kadm5_get_principal", "result", "unauthorized"):        1,
		key("krb5_kdc_lifecycle_events_total", "event", "started"):                                              1,
	}
	for k, v := range truth {
		if got[k] != v {
			t.Errorf("%s = %v, the clients made %v", k, got[k], v)
		}
	}
	if n := got[key("krb5_kdc_requests_total", "request", "tgs", "status", "LOOKING_UP_SERVER")]; n < 1 {
		t.Errorf("unknown service not counted")
	}
	compareSeries(t, got, oracle(t, kdcSrc.ProbePrincipals, r.KDCLog, r.KadmindLog))
	for _, p := range []string{r.KDCLog, r.KadmindLog} {
		for _, reason := range []string{"no_header", "other_program", "unknown_message", "malformed", "too_long"} {
			if v := value(t, tm.reg, "krb5_kdc_log_lines_unparsed_total", "path", p, "reason", reason); v != 0 {
				t.Errorf("%s: %v lines not understood (%s)", p, v, reason)
			}
		}
	}
	if t.Failed() {
		kdc, _ := os.ReadFile(r.KDCLog)
		t.Logf("KDC log:\n%s", kdc)
	}
	if *capture {
		r.StopKadmind()
		r.StopKDC()
		saveFixture(t, r.KDCLog, "mit-1.20-kdc.log")
		saveFixture(t, r.KadmindLog, "mit-1.20-kadmind.log")
	}
}

// followedRealm starts a throwaway realm with opts (in the test's
// directory) and a manager following its KDC log file from the beginning.
func followedRealm(t *testing.T, opts realm.Options) (*realm.Realm, *testManager) {
	t.Helper()
	opts.Dir = filepath.Join(t.TempDir(), "realm")
	r, err := realm.Up(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	src := config.LogSource{Path: r.KDCLog, Type: "kdc", StartAt: "beginning", PollInterval: 20 * time.Millisecond,
		ProbePrincipals: []string{realm.ReadyPrincipal}}
	return r, startManager(t, "", src)
}

// TestEndToEndWorkers follows a KDC started with -w 2: the supervisor's
// and the workers' lines, each worker with its own pid.
func TestEndToEndWorkers(t *testing.T) {
	needMIT(t)
	r, tm := followedRealm(t, realm.Options{Users: 4, Services: 2, Fillers: -1, Workers: 2, NoKadmind: true, DisableLastSuccess: true})
	c := clients{t: t, r: r}
	for i := 1; i <= 4; i++ {
		c.ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(i))
		c.ok("", "kvno", "--no-store", r.Service(1), r.Service(2))
	}
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
	got := gather(t, tm.reg)
	for k, v := range map[string]float64{
		key("krb5_kdc_requests_total", "request", "as", "status", "ISSUE"):  4,
		key("krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE"): 8,
		key("krb5_kdc_lifecycle_events_total", "event", "workers_created"):  1,
		key("krb5_kdc_lifecycle_events_total", "event", "started"):          2, // one per worker
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	compareSeries(t, got, oracle(t, []string{realm.ReadyPrincipal}, r.KDCLog))
	if *capture {
		saveFixture(t, r.KDCLog, "mit-1.20-workers-kdc.log")
	}
}

// saveFixture copies a log into testdata with the host name replaced.
func saveFixture(t *testing.T, from, name string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		data = bytes.ReplaceAll(data, []byte(" "+host+" "), []byte(" kdc1 "))
	}
	if err := os.WriteFile(filepath.Join("testdata", name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote testdata/%s (%d bytes)", name, len(data))
}
