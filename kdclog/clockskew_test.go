package kdclog

import (
	"os"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestClockSkew logs in to a real KDC with MIT kinit on a clock 10 minutes
// behind, then on time, then 10 minutes ahead (libfaketime's faketime), and
// checks the counters against what kinit itself reported: two logins
// refused with "Clock skew too great" (reason clock_skew of the
// encrypted_timestamp method), the one between recovered from the first
// failure. With -capture it writes testdata/mit-1.20-clockskew-kdc.log,
// which TestFixtures then counts where MIT is not installed.
//
// The realm offers no SPAKE (SPAKE carries no client timestamp), and the
// client's kdc_timesync is 0: by default libkrb5 takes the KDC's time from
// the NEEDED_PREAUTH error and corrects the timestamp, and the KDC never
// sees the skew.
func TestClockSkew(t *testing.T) {
	needMIT(t)
	faketime := testutil.RequireProgram(t, "faketime")
	r, tm := followedRealm(t, realm.Options{Users: 2, Services: -1, Fillers: -1, NoKadmind: true, NoSPAKE: true, DisableLastSuccess: true})
	c := clients{t: t, r: r}
	nosync := c.conf("krb5-nosync.conf", func(s string) string {
		return strings.Replace(s, "[libdefaults]", "[libdefaults]\n\tkdc_timesync = 0", 1)
	})
	skewed := func(offset string) {
		t.Helper()
		out, err := c.run(nosync, "", faketime, "-f", offset, "kinit", "-k", "-t", r.UserKeytab, r.User(1))
		if err == nil || !strings.Contains(out, "Clock skew too great") {
			t.Fatalf("kinit at %s: %v, want the KDC's clock skew error: %s", offset, err, out)
		}
	}
	skewed("-10m")
	c.ok(nosync, "kinit", "-k", "-t", r.UserKeytab, r.User(1))
	skewed("+10m")
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
	got := gather(t, tm.reg)
	for k, v := range map[string]float64{
		key("krb5_kdc_preauth_verify_failures_total", "method", "encrypted_timestamp", "reason", "clock_skew"): 2,
		key("krb5_kdc_requests_total", "request", "as", "status", "PREAUTH_FAILED"):                            2,
		key("krb5_kdc_requests_total", "request", "as", "status", "ISSUE"):                                     1,
		key("krb5_kdc_preauth_failures_recovered_total", "method", "encrypted_timestamp"):                      1,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	compareSeries(t, got, oracle(t, []string{realm.ReadyPrincipal}, r.KDCLog))
	if t.Failed() {
		kdc, _ := os.ReadFile(r.KDCLog)
		t.Logf("KDC log:\n%s", kdc)
	}
	if *capture {
		saveFixture(t, r.KDCLog, "mit-1.20-clockskew-kdc.log")
	}
}
