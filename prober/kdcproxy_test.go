package prober

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// proxyModule is a transport https module for the realm's proxy.
func proxyModule(r *realm.Realm) config.ProbeModule {
	return config.ProbeModule{
		Realm: r.Realm, Client: r.ProbePrincipal, Keytab: r.ProbeKeytab, Service: r.Service(1),
		Transport: "https", Timeout: 2 * time.Second, ProxyCAFile: r.KDCProxy.CA,
		AllowedProxyURLs: []string{r.KDCProxy.URL},
	}
}

// probeVia runs one probe of mod against url.
func probeVia(t *testing.T, url string, mod config.ProbeModule) Outcome {
	t.Helper()
	creds, err := ModuleCredentials(&mod)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTarget(url, &mod, creds, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	return tg.Run(context.Background())
}

// kdcLines counts the KDC log's lines that hold every one of words.
func kdcLines(t *testing.T, r *realm.Realm, words ...string) int {
	t.Helper()
	b, err := os.ReadFile(r.KDCLog)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			n++
		}
	}
	return n
}

// TestKDCProxyProbeAgreesWithKinit: the probe through python3-kdcproxy
// succeeds and fails as MIT kinit (and kvno) through the same proxy do,
// and says why: the KDC's log shows each successful login and service
// ticket arriving; a CA that did not sign the proxy's certificate, a name
// the certificate lacks, a client the KDC does not know (its error comes
// back through the proxy), the KDC stopped behind the live proxy, and
// the proxy stopped.
func TestKDCProxyProbeAgreesWithKinit(t *testing.T) {
	t.Parallel()
	realmtest.RequireKDCProxy(t)
	r := upRealm(t, realm.Options{KDCProxy: true})
	p := r.KDCProxy
	mod := proxyModule(r)

	asBefore := kdcLines(t, r, "AS_REQ", r.ProbePrincipal, "ISSUE")
	tgsBefore := kdcLines(t, r, "TGS_REQ", r.ProbePrincipal, r.Service(1), "ISSUE")
	o := probeVia(t, p.URL, mod)
	if o.ASErr != nil || o.TGSErr != nil {
		t.Fatalf("probe through the proxy: AS %v, TGS %v; proxy log: %s", o.ASErr, o.TGSErr, tail(p.Log))
	}
	if got := o.Exchanges(krb5.HTTPS)[0].Transport; got != "https" {
		t.Errorf("AS transport %q", got)
	}
	if out, err := realmtest.KinitVia(t, r, p.URL, p.CA, r.Service(1)); err != nil {
		t.Fatalf("oracle kinit/kvno through the proxy: %v: %s", err, out)
	}
	testutil.Eventually(t, 10*time.Second, "the KDC logs two logins and two service tickets (probe and kinit)", func() bool {
		return kdcLines(t, r, "AS_REQ", r.ProbePrincipal, "ISSUE") == asBefore+2 &&
			kdcLines(t, r, "TGS_REQ", r.ProbePrincipal, r.Service(1), "ISSUE") == tgsBefore+2
	})

	// A CA of its own that signed nothing the proxy has.
	dir := t.TempDir()
	otherCA := filepath.Join(dir, "other-ca.pem")
	if err := realm.WriteCA(otherCA, filepath.Join(dir, "other-ca.key"), "another CA"); err != nil {
		t.Fatal(err)
	}
	wrong := mod
	wrong.ProxyCAFile = otherCA
	expect(t, "wrong CA", probeVia(t, p.URL, wrong), krb5.ClassTLSUnknownAuthority)
	oracleFails(t, "trusting another CA", "certificate verify failed")(realmtest.KinitVia(t, r, p.URL, otherCA, ""))

	// One target whose proxy_ca_file is missing, then another CA, then
	// the right one: each probe reads the file when it changed, and a
	// file that does not load fails the probe before anything is sent.
	caPath := filepath.Join(dir, "ca.pem")
	changing := mod
	changing.ProxyCAFile = caPath
	creds, err := ModuleCredentials(&changing)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTarget(p.URL, &changing, creds, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	seen := kdcLines(t, r, "AS_REQ")
	o = tg.Run(context.Background())
	expect(t, "missing CA file", o, krb5.ClassTLS)
	if e, ok := o.ASErr.(*krb5.Error); !ok || e.Phase != PhaseProxyCA {
		t.Errorf("missing CA file: %v, want phase %s", o.ASErr, PhaseProxyCA)
	}
	copyFile(t, otherCA, caPath)
	expect(t, "CA file now another CA's", tg.Run(context.Background()), krb5.ClassTLSUnknownAuthority)
	if n := kdcLines(t, r, "AS_REQ"); n != seen {
		t.Errorf("the KDC saw %d AS requests while the CA file was missing or wrong", n-seen)
	}
	copyFile(t, p.CA, caPath)
	if o := tg.Run(context.Background()); o.ASErr != nil || o.TGSErr != nil {
		t.Errorf("CA file now the proxy's: %v %v", o.ASErr, o.TGSErr)
	}

	named := mod
	named.ProxyServerName = "other.example.com"
	expect(t, "name mismatch", probeVia(t, p.URL, named), krb5.ClassTLSNameMismatch)
	// kinit checks the URL's host: localhost is not in the certificate.
	localhost := strings.Replace(p.URL, "127.0.0.1", "localhost", 1)
	oracleFails(t, "to a name the certificate lacks", `TLS certificate name mismatch: server certificate is not for "localhost"`)(realmtest.KinitVia(t, r, localhost, p.CA, ""))

	stranger := mod
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stranger.Client, stranger.Keytab, stranger.PasswordFile = "nobody", "", pw
	expect(t, "unknown client", probeVia(t, p.URL, stranger), "KDC_ERR_C_PRINCIPAL_UNKNOWN")
	oracleFails(t, "as an unknown client", "Client 'nobody@"+r.Realm+"' not found in Kerberos database")(realmtest.KinitArgsVia(t, r, p.URL, p.CA, "nobody@"+r.Realm))
	if n := kdcLines(t, r, "AS_REQ", "nobody@"+r.Realm, "CLIENT_NOT_FOUND"); n != 2 {
		t.Errorf("the KDC logged %d AS_REQs of the unknown client, want 2 (probe and kinit)", n)
	}

	// The KDC stopped behind the live proxy: kdcproxy answers 503 only
	// after its own 17 s, so kinit runs meanwhile and the 2 s probe
	// sees the proxy take the request and not answer.
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out string
		err error
	}
	kinitDone := make(chan result, 1)
	go func() {
		out, err := realmtest.KinitVia(t, r, p.URL, p.CA, "")
		kinitDone <- result{out, err}
	}()
	expect(t, "KDC stopped", probeVia(t, p.URL, mod), krb5.ClassProxyTimeout)
	k := <-kinitDone
	oracleFails(t, "to a stopped KDC behind the proxy", "503 Service Unavailable")(k.out, k.err)
	if err := r.StartKDC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := probeVia(t, p.URL, mod); o.ASErr != nil {
		t.Fatalf("after the KDC restarted: %v", o.ASErr)
	}

	if err := r.StopKDCProxy(); err != nil {
		t.Fatal(err)
	}
	expect(t, "proxy stopped", probeVia(t, p.URL, mod), krb5.ClassConnectionRefused)
	oracleFails(t, "through a stopped proxy", "Cannot contact any KDC")(realmtest.KinitVia(t, r, p.URL, p.CA, ""))
}

// oracleFails checks that kinit failed, for the reason its trace or
// message names.
func oracleFails(t *testing.T, what, reason string) func(string, error) {
	t.Helper()
	return func(out string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(out, reason) {
			t.Errorf("oracle kinit %s: %v, want a failure with %q:\n%s", what, err, reason, out)
		}
	}
}

func expect(t *testing.T, what string, o Outcome, class string) {
	t.Helper()
	if got := krb5.Classify(o.ASErr); got != class {
		t.Errorf("%s: login result %q (%v), want %q", what, got, o.ASErr, class)
	}
}

// copyFile replaces dst by src's content (a new inode, as a package
// upgrade or cert renewal writes it).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// TestKDCProxyContinuousAndProbeHandler: a continuous probe through the
// proxy beside a direct one records transport="https" durations and its
// target_info, each login seen in the KDC's log; when the proxy stops,
// its target fails as connection_refused while the direct one goes on
// (what KerberosKDCProxyFailing alerts on). /probe takes the proxy's URL
// as target, only as listed in allowed_proxy_urls.
func TestKDCProxyContinuousAndProbeHandler(t *testing.T) {
	t.Parallel()
	realmtest.RequireKDCProxy(t)
	r := upRealm(t, realm.Options{KDCProxy: true})
	p := r.KDCProxy
	cfg := probeConfig(r)
	cfg.Modules["https"] = proxyModule(r)
	cfg.Probes = append(cfg.Probes[:1], config.ProbeTarget{Name: "kdc-https", Address: p.URL, Module: "https", Interval: time.Second})
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testutil.Logger(t), reg)
	t.Cleanup(m.Stop)
	before := kdcLines(t, r, "AS_REQ", r.ProbePrincipal, "ISSUE")
	if err := m.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	pm := m.metrics
	testutil.Eventually(t, 20*time.Second, "both targets' first probes to succeed", func() bool {
		return gauge(pm.success, "kdc-https", ExchangeTGS) == 1 && gauge(pm.success, "kdc-udp", ExchangeTGS) == 1
	})
	if histogramCount(t, pm.duration, "kdc-https", ExchangeAS, "https") == 0 || histogramCount(t, pm.duration, "kdc-https", ExchangeTGS, "https") == 0 {
		t.Error("no transport=\"https\" durations for the proxy's target")
	}
	if gauge(pm.info, "kdc-https", r.Realm, "https", r.Realm) != 1 || gauge(pm.info, "kdc-udp", r.Realm, "udp", r.Realm) != 1 {
		t.Error("krb5_probe_target_info missing")
	}
	for _, c := range []string{krb5.ClassTLSUnknownAuthority, krb5.ClassProxyTimeout, krb5.ClassHTTPStatus} {
		if n := testutil.Gather(t, reg).Count("krb5_probe_total", "target", "kdc-https", "exchange", ExchangeAS, "result", c); n != 1 {
			t.Errorf("result %q of the proxy's target not pre-created (%d series)", c, n)
		}
	}
	logins := counter(pm.total, "kdc-https", ExchangeAS, krb5.ClassSuccess) + counter(pm.total, "kdc-udp", ExchangeAS, krb5.ClassSuccess)
	if got := kdcLines(t, r, "AS_REQ", r.ProbePrincipal, "ISSUE") - before; float64(got) < logins {
		t.Errorf("the KDC logged %d logins, the probes counted %v", got, logins)
	}

	srv := probeServer(t, cfg)
	code, body := get(t, probeURL(srv, "module", "https", "target", p.URL), nil)
	if code != 200 || !strings.Contains(body, "probe_success 1") {
		t.Errorf("/probe through the proxy: %d %s", code, body)
	}
	other := strings.Replace(p.URL, "/KdcProxy", "/other", 1)
	if code, body := get(t, probeURL(srv, "module", "https", "target", other), nil); code != 403 || !strings.Contains(body, "allowed_proxy_urls") {
		t.Errorf("/probe to a URL not allowed: %d %s", code, body)
	}
	if code, _ := get(t, probeURL(srv, "module", "https", "target", r.KDCAddr), nil); code != 400 {
		t.Errorf("/probe of an https module against a KDC address: %d, want 400", code)
	}

	if err := r.StopKDCProxy(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the proxy's target to fail as connection_refused", func() bool {
		return gauge(pm.success, "kdc-https", ExchangeAS) == 0 && counter(pm.total, "kdc-https", ExchangeAS, krb5.ClassConnectionRefused) > 0
	})
	if gauge(pm.success, "kdc-udp", ExchangeAS) != 1 {
		t.Error("the direct target failed too")
	}
}
