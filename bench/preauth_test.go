package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// spakeSupportAnswer is how MIT's KDC (1.20) logs its answer to a SPAKE
// support message (MORE_PREAUTH_DATA_REQUIRED with the challenge): only
// SPAKE logins get one.
const spakeSupportAnswer = `AS_REQ .* 127\.0\.0\.1: PREAUTH_FAILED: user\d+@PERF\.TEST for krbtgt/\S+, More preauthentication data is required`

// The batched as load logs in as kinit does: with SPAKE when the KDC
// offers it (auto), with encrypted timestamp when told, and the report
// says which. The KDC's log is the independent witness: every SPAKE
// login has its support round trip logged, an encrypted-timestamp login
// none.
func TestBatchedLoginPreauth(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true})
	sys := RealmSystem(r)
	for _, tc := range []struct {
		preauth krb5.PreauthMode
		method  string
	}{
		{krb5.PreauthAuto, krb5.MethodSPAKE},
		{krb5.PreauthEncTimestamp, krb5.MethodEncTimestamp},
		{krb5.PreauthSPAKE, krb5.MethodSPAKE},
	} {
		from := testutil.LogSize(t, r.KDCLog)
		s := small("as")
		s.Preauth = string(tc.preauth)
		s.BatchInflight = 8
		rep := runSuite(t, sys, s)
		if st := test(rep, "as"); st.Status == "error" {
			t.Fatalf("%s: %+v", tc.preauth, st)
		}
		l := rep.AS
		ok := l.Requests - l.Errors
		if ok == 0 || l.Errors > 0 {
			t.Fatalf("%s: %d logins, %d errors: %v", tc.preauth, l.Requests, l.Errors, l.ErrorTexts)
		}
		issued := testutil.LogCount(t, r.KDCLog, from, realmtest.ASIssue)
		support := testutil.LogCount(t, r.KDCLog, from, spakeSupportAnswer)
		if issued < ok || issued > ok+s.BatchInflight {
			t.Errorf("%s: %d logins counted, the KDC issued %d", tc.preauth, ok, issued)
		}
		if tc.method == krb5.MethodSPAKE && support < ok {
			t.Errorf("%s: %d logins counted, the KDC answered only %d SPAKE support messages", tc.preauth, ok, support)
		}
		if tc.method == krb5.MethodEncTimestamp && support != 0 {
			t.Errorf("%s: the KDC answered %d SPAKE support messages", tc.preauth, support)
		}
		if want := tc.method + " (preauth " + string(tc.preauth) + ")"; rep.System.Preauth != want {
			t.Errorf("%s: report says the generator used %q, want %q", tc.preauth, rep.System.Preauth, want)
		}
	}

	// A KDC without SPAKE: auto falls back to encrypted timestamp, spake
	// fails every login with a clear class.
	r2 := upRealm(t, realm.Options{NoKadmind: true, NoSPAKE: true})
	sys2 := RealmSystem(r2)
	s := small("as")
	s.Preauth = string(krb5.PreauthSPAKE)
	rep := runSuite(t, sys2, s)
	if l := rep.AS; l == nil || l.Errors == 0 || l.Errors != l.Requests || l.ErrorClasses[krb5.ClassPreauthUnsupported] != l.Errors {
		t.Errorf("spake against a KDC without it: %+v", summary(l))
	}
	s.Preauth = string(krb5.PreauthAuto)
	rep = runSuite(t, sys2, s)
	if l := rep.AS; l == nil || l.Errors > 0 || l.Requests == 0 || !strings.HasPrefix(rep.System.Preauth, krb5.MethodEncTimestamp) {
		t.Errorf("auto against a KDC without SPAKE: %q %+v", rep.System.Preauth, summary(l))
	}
}

// summary is what a failure message shows of a load.
func summary(l *Load) string {
	if l == nil {
		return "no load"
	}
	return fmt.Sprintf("%d requests, %d errors %v %v", l.Requests, l.Errors, l.ErrorClasses, l.ErrorTexts)
}

// spakeRefused is MIT's answer to a SPAKE support message offering no
// group the KDC allows.
const spakeRefused = `AS_REQ .* 127\.0\.0\.1: PREAUTH_FAILED: user\d+@PERF\.TEST for krbtgt/\S+, `

// A KDC that offers SPAKE but only with a group the engine lacks (P-384)
// answers the support message with PREAUTH_FAILED: under auto the
// raw-socket generators go on with encrypted timestamp, as kinit does
// (every login then shows the refusal in the KDC's log, and is issued);
// under spake every login fails as unsupported.
func TestBatchedSPAKERefusedFallsBack(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true})
	conf, err := os.ReadFile(r.Krb5Conf)
	if err != nil {
		t.Fatal(err)
	}
	refusing := strings.Replace(string(conf), "spake_preauth_groups = edwards25519", "spake_preauth_groups = P-384", 1)
	if refusing == string(conf) {
		t.Fatal("no spake_preauth_groups in the realm's krb5.conf")
	}
	if err := os.WriteFile(r.Krb5Conf, []byte(refusing), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	if err := r.StartKDC(context.Background()); err != nil {
		t.Fatal(err)
	}
	sys := RealmSystem(r)
	for _, tc := range []struct {
		test string
		load func(*Report) *Load
	}{
		{"as", func(rep *Report) *Load { return rep.AS }},
		{"latency", func(rep *Report) *Load { return rep.Latency.Logins }},
	} {
		from := testutil.LogSize(t, r.KDCLog)
		s := small(tc.test)
		s.BatchInflight = 8
		rep := runSuite(t, sys, s)
		l := tc.load(rep)
		ok := l.Requests - l.Errors
		if l.Requests == 0 || l.Errors > 0 || !strings.HasPrefix(rep.System.Preauth, krb5.MethodEncTimestamp) {
			t.Fatalf("%s, auto against a KDC refusing our SPAKE groups: %q %s", tc.test, rep.System.Preauth, summary(l))
		}
		if refused, issued := testutil.LogCount(t, r.KDCLog, from, spakeRefused), testutil.LogCount(t, r.KDCLog, from, realmtest.ASIssue); refused < ok || issued < ok {
			t.Errorf("%s: %d logins counted; the KDC refused %d SPAKE support messages and issued %d", tc.test, ok, refused, issued)
		}

		s.Preauth = string(krb5.PreauthSPAKE)
		rep = runSuite(t, sys, s)
		if l := tc.load(rep); l == nil || l.Errors == 0 || l.Errors != l.Requests || l.ErrorClasses[krb5.ClassPreauthUnsupported] != l.Errors {
			t.Errorf("%s, spake against a KDC refusing our groups: %s", tc.test, summary(l))
		}
	}
}
