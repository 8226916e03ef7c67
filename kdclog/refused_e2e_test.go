package kdclog

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestEtypeRefusedClientsRealKDC refuses RC4-only logins on a harness KDC
// (its principals have no RC4 key, so it answers BAD_ENCRYPTION_TYPE):
// one client refused five times counts 1, then six more clients refused
// once each count 7, and AES logins in between count nothing. The truth
// is the clients the test ran, and the refusals the KDC logged.
func TestEtypeRefusedClientsRealKDC(t *testing.T) {
	needMIT(t)
	r, tm := followedRealm(t, realm.Options{Users: 8, Services: 1, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	c := clients{t: t, r: r}
	rc4 := c.conf("krb5-rc4.conf", func(s string) string {
		s = regexp.MustCompile(`(?m)^(\s*(default_tkt_enctypes|default_tgs_enctypes|permitted_enctypes) =).*$`).ReplaceAllString(s, "$1 arcfour-hmac")
		return strings.Replace(s, "[libdefaults]", "[libdefaults]\n\tallow_weak_crypto = true", 1)
	})
	// check waits for the whole log and compares the gauge with the
	// clients refused, and the refusals logged with those counted.
	check := func(step string, clients, refusals float64) {
		t.Helper()
		waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
		b, err := os.ReadFile(r.KDCLog)
		if err != nil {
			t.Fatal(err)
		}
		if n := float64(bytes.Count(b, []byte(": BAD_ENCRYPTION_TYPE: "))); n != refusals {
			t.Fatalf("%s: the KDC logged %v BAD_ENCRYPTION_TYPE, the clients made %v", step, n, refusals)
		}
		got := testutil.Gather(t, tm.reg)
		if v := got.Value("krb5_kdc_requests_total", "request", "as", "status", "BAD_ENCRYPTION_TYPE"); v != refusals {
			t.Errorf("%s: krb5_kdc_requests_total{status=BAD_ENCRYPTION_TYPE} %v, want %v", step, v, refusals)
		}
		if v := got.Value("krb5_kdc_etype_refused_clients"); v != clients {
			t.Errorf("%s: krb5_kdc_etype_refused_clients %v, want %v", step, v, clients)
		}
	}
	for range 5 {
		c.fails(rc4, "", "kinit", "-k", "-t", r.UserKeytab, r.User(1))
	}
	c.ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(8))
	check("one client refused 5 times", 1, 5)
	for i := 2; i <= 7; i++ {
		c.fails(rc4, "", "kinit", "-k", "-t", r.UserKeytab, r.User(i))
		c.ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(8))
	}
	check("six more clients", 7, 11)
}
