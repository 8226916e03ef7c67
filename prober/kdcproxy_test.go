package prober

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if got := o.ASTransport(krb5.HTTPS); got != "https" {
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
	if out, err := realmtest.KinitVia(t, r, p.URL, otherCA, ""); err == nil {
		t.Errorf("oracle kinit trusting another CA succeeded: %s", out)
	}

	named := mod
	named.ProxyServerName = "other.example.com"
	expect(t, "name mismatch", probeVia(t, p.URL, named), krb5.ClassTLSNameMismatch)
	// kinit checks the URL's host: localhost is not in the certificate.
	localhost := strings.Replace(p.URL, "127.0.0.1", "localhost", 1)
	if out, err := realmtest.KinitVia(t, r, localhost, p.CA, ""); err == nil {
		t.Errorf("oracle kinit to a name the certificate lacks succeeded: %s", out)
	}

	stranger := mod
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stranger.Client, stranger.Keytab, stranger.PasswordFile = "nobody", "", pw
	expect(t, "unknown client", probeVia(t, p.URL, stranger), "KDC_ERR_C_PRINCIPAL_UNKNOWN")
	if kdcLines(t, r, "AS_REQ", "nobody@"+r.Realm, "CLIENT_NOT_FOUND") == 0 {
		t.Error("the KDC did not log the unknown client's AS_REQ")
	}

	// The KDC stopped behind the live proxy: kdcproxy answers 503 only
	// after its own 17 s, so kinit runs meanwhile and the 2 s probe
	// sees the proxy take the request and not answer.
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	kinitDone := make(chan error, 1)
	go func() {
		_, err := realmtest.KinitVia(t, r, p.URL, p.CA, "")
		kinitDone <- err
	}()
	expect(t, "KDC stopped", probeVia(t, p.URL, mod), krb5.ClassProxyTimeout)
	if err := <-kinitDone; err == nil {
		t.Error("oracle kinit through the proxy to a stopped KDC succeeded")
	}
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
	if out, err := realmtest.KinitVia(t, r, p.URL, p.CA, ""); err == nil {
		t.Errorf("oracle kinit through a stopped proxy succeeded: %s", out)
	}
}

func expect(t *testing.T, what string, o Outcome, class string) {
	t.Helper()
	if got := krb5.Classify(o.ASErr); got != class {
		t.Errorf("%s: login result %q (%v), want %q", what, got, o.ASErr, class)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
