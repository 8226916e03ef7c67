package krb5

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/spake"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// SPAKE logins against MIT's KDC, checked by what the KDC itself logs and by
// the ticket working: a TGT whose AS-REP decrypted only with K'[0].

// TestSPAKELogin logs in with SPAKE for each AES enctype and uses the TGT.
func TestSPAKELogin(t *testing.T) {
	r := upRealm(t, realm.Options{})
	for _, et := range DefaultEtypes {
		for _, tr := range []Transport{UDP, TCP} {
			t.Run(fmt.Sprintf("%s/%s", EtypeName(et), tr), func(t *testing.T) {
				c := userClient(t, r, 1, Options{Etypes: []int32{et}, Transport: tr})
				defer c.Close()
				ctx := testCtx(t, 10*time.Second)
				for i := 0; i < 2; i++ { // the second login reuses the prepared key
					as, err := c.Login(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if as.Method != MethodSPAKE || as.RoundTrips != 3 || as.SPAKEChallenge <= 0 || as.Etypes.Reply != et {
						t.Fatalf("login %d: %+v", i, as)
					}
					if _, err := c.ServiceTicket(ctx, c.PrepareService(mustPrincipal(t, r.Service(1)))); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// kdcSteps returns what the KDC logged after offset for logins of user:
// the status of each AS_REQ line and each "preauth (...)" line, in order,
// once the login's last line (ISSUE or an error for user) is there.
func kdcSteps(t *testing.T, r *realm.Realm, offset int64, user string, lines int) []string {
	t.Helper()
	var steps []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		data, err := os.ReadFile(r.KDCLog)
		if err != nil {
			t.Fatal(err)
		}
		steps = steps[:0]
		for _, l := range strings.Split(string(data[offset:]), "\n") {
			switch {
			case strings.Contains(l, "AS_REQ") && strings.Contains(l, " "+user+" "):
				// "... 127.0.0.1: STATUS: user@REALM for krbtgt/..., text"
				rest := l[strings.Index(l, "127.0.0.1: ")+len("127.0.0.1: "):]
				status := rest[:strings.Index(rest, ":")]
				if i := strings.LastIndex(rest, ", "); i > 0 && status != "ISSUE" {
					status += " (" + rest[i+2:] + ")"
				}
				steps = append(steps, "AS_REQ "+status)
			case strings.Contains(l, "preauth ("):
				steps = append(steps, l[strings.Index(l, "preauth ("):])
			}
		}
		if len(steps) >= lines {
			return steps
		}
	}
	t.Fatalf("KDC log after offset %d: %q, want %d lines", offset, steps, lines)
	return nil
}

func logSize(t *testing.T, r *realm.Realm) int64 {
	fi, err := os.Stat(r.KDCLog)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// kinit logs user in with `kinit -k` and the realm's user keytab.
func kinit(t *testing.T, r *realm.Realm, user string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kinit", "-k", "-t", r.UserKeytab, user)
	cmd.Env = append(append(os.Environ(), r.Env()...), "KRB5CCNAME=FILE:"+t.TempDir()+"/cc")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kinit: %v\n%s", err, out)
	}
}

// TestSPAKEKDCLogMatchesKinit compares the KDC's log of our login with its
// log of `kinit -k` for the same principal and keytab, with and without the
// KDC's optimistic challenge.
func TestSPAKEKDCLogMatchesKinit(t *testing.T) {
	r := upRealm(t, realm.Options{})
	user := r.User(2)
	compare := func(t *testing.T, wantSteps []string, roundTrips int) {
		off := logSize(t, r)
		kinit(t, r, user)
		ref := kdcSteps(t, r, off, user, len(wantSteps))
		if !slices.Equal(ref, wantSteps) {
			t.Fatalf("kinit -k: KDC logged %q, want %q", ref, wantSteps)
		}
		c := userClient(t, r, 2, Options{})
		defer c.Close()
		off = logSize(t, r)
		as, err := c.Login(testCtx(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if as.Method != MethodSPAKE || as.RoundTrips != roundTrips {
			t.Errorf("login %+v, want SPAKE in %d round trips", as, roundTrips)
		}
		if got := kdcSteps(t, r, off, user, len(ref)); !slices.Equal(got, ref) {
			t.Errorf("our login: KDC logged\n%q\nkinit -k:\n%q", got, ref)
		}
	}
	t.Run("support round trip", func(t *testing.T) {
		compare(t, []string{
			"AS_REQ NEEDED_PREAUTH (Additional pre-authentication required)",
			"preauth (spake) verify failure: More preauthentication data is required",
			"AS_REQ PREAUTH_FAILED (More preauthentication data is required)",
			"AS_REQ ISSUE",
		}, 3)
	})
	t.Run("optimistic challenge", func(t *testing.T) {
		optimisticChallenge(t, r, "edwards25519")
		compare(t, []string{
			"AS_REQ NEEDED_PREAUTH (Additional pre-authentication required)",
			"AS_REQ ISSUE",
		}, 2)
	})
}

// optimisticChallenge restarts the realm's KDC with
// spake_preauth_kdc_challenge = group.
func optimisticChallenge(t *testing.T, r *realm.Realm, group string) {
	t.Helper()
	restartKDC(t, r, func(conf string) string {
		return strings.Replace(conf, "[kdcdefaults]\n", "[kdcdefaults]\n\tspake_preauth_kdc_challenge = "+group+"\n", 1)
	})
}

// kdcGroups restarts the realm's KDC with its own spake_preauth_groups in
// kdc.conf (which the KDC reads before krb5.conf; kinit reads krb5.conf
// only and keeps offering edwards25519).
func kdcGroups(t *testing.T, r *realm.Realm, groups string) {
	t.Helper()
	restartKDC(t, r, func(conf string) string {
		return conf + "\n[libdefaults]\n\tspake_preauth_groups = " + groups + "\n"
	})
}

// restartKDC rewrites the realm's kdc.conf with edit and restarts the KDC.
func restartKDC(t *testing.T, r *realm.Realm, edit func(string) string) {
	t.Helper()
	conf, err := os.ReadFile(r.KDCConf)
	if err != nil {
		t.Fatal(err)
	}
	s := edit(string(conf))
	if s == string(conf) {
		t.Fatal("kdc.conf unchanged")
	}
	if err := os.WriteFile(r.KDCConf, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.StartKDC(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSPAKEModes: encrypted timestamp on request against a SPAKE KDC, SPAKE
// up front, and a KDC without SPAKE, where auto falls back and spake fails.
func TestSPAKEModes(t *testing.T) {
	r := upRealm(t, realm.Options{})
	ctx := testCtx(t, 20*time.Second)
	c := userClient(t, r, 1, Options{Preauth: PreauthEncTimestamp})
	as, err := c.Login(ctx)
	if err != nil || as.Method != MethodEncTimestamp || as.RoundTrips != 2 {
		t.Errorf("encrypted_timestamp against a SPAKE KDC: %+v %v", as, err)
	}
	c = userClient(t, r, 1, Options{Preauth: PreauthSPAKE, PreauthUpfront: true})
	as, err = c.Login(ctx)
	if err != nil || as.Method != MethodSPAKE || as.RoundTrips != 2 || as.PreauthRequired != 0 || as.SPAKEChallenge <= 0 {
		t.Errorf("SPAKE up front: %+v %v", as, err)
	}
	if _, err := c.ServiceTicket(ctx, c.PrepareService(mustPrincipal(t, r.Service(1)))); err != nil {
		t.Fatal(err)
	}

	plain := upRealm(t, realm.Options{NoSPAKE: true})
	c = userClient(t, plain, 1, Options{})
	as, err = c.Login(ctx)
	if err != nil || as.Method != MethodEncTimestamp || as.RoundTrips != 2 {
		t.Errorf("auto against a KDC without SPAKE: %+v %v", as, err)
	}
	off := logSize(t, plain)
	c = userClient(t, plain, 1, Options{Preauth: PreauthSPAKE})
	as, err = c.Login(ctx)
	if pe := wantClass(t, err, ClassPreauthUnsupported); pe.Phase != PhasePreauthRequired || as.RoundTrips != 1 {
		t.Errorf("spake against a KDC without SPAKE: %+v %v", as, err)
	}
	// The client stopped after PREAUTH_REQUIRED: no failed attempt logged.
	if got := kdcSteps(t, plain, off, plain.User(1), 1); !slices.Equal(got, []string{"AS_REQ NEEDED_PREAUTH (Additional pre-authentication required)"}) {
		t.Errorf("KDC logged %q", got)
	}
}

// TestSPAKEWrongKey: a stale keytab fails the SPAKE response at the KDC,
// which logs the verify failure, as for kinit.
func TestSPAKEWrongKey(t *testing.T) {
	r := upRealm(t, realm.Options{})
	kadmin(t, r, "cpw -randkey "+r.User(3))
	off := logSize(t, r)
	c := userClient(t, r, 3, Options{})
	_, err := c.Login(testCtx(t, 10*time.Second))
	if pe := wantClass(t, err, "KDC_ERR_PREAUTH_FAILED"); pe.Phase != PhaseASRep {
		t.Errorf("phase %q", pe.Phase)
	}
	want := []string{
		"AS_REQ NEEDED_PREAUTH (Additional pre-authentication required)",
		"preauth (spake) verify failure: More preauthentication data is required",
		"AS_REQ PREAUTH_FAILED (More preauthentication data is required)",
		"preauth (spake) verify failure: Preauthentication failed",
		"AS_REQ PREAUTH_FAILED (Preauthentication failed)",
	}
	if got := kdcSteps(t, r, off, r.User(3), len(want)); !slices.Equal(got, want) {
		t.Errorf("KDC logged %q, want %q", got, want)
	}
}

// TestSPAKEIgnoresSkew: SPAKE carries no client timestamp, so a client
// clock ten minutes off still logs in (kinit too); the offset is measured.
func TestSPAKEIgnoresSkew(t *testing.T) {
	r := upRealm(t, realm.Options{})
	const shift = 10 * time.Minute
	c := userClient(t, r, 1, Options{Now: func() time.Time { return time.Now().Add(-shift) }})
	as, err := c.Login(testCtx(t, 10*time.Second))
	if err != nil || as.Method != MethodSPAKE {
		t.Fatalf("%+v %v", as, err)
	}
	if !as.HasClockOffset || (as.ClockOffset-shift).Abs() > 5*time.Second {
		t.Errorf("clock offset %v, want about +%v", as.ClockOffset, shift)
	}
}

// methodDataSeed encodes METHOD-DATA holding PA-SPAKE (value spakeVal) and
// PA-FX-COOKIE, as MIT's KDC sends them.
func methodDataSeed(spakeVal []byte, cookie string) []byte {
	w := derWriter{der.NewWriter(512)}
	w.Reset()
	w.paData(paFXCookie, []byte(cookie))
	w.paData(paSPAKE, spakeVal)
	w.Close(der.TagSequence, 0)
	return bytes.Clone(w.Bytes())
}

// FuzzSPAKEMethodData feeds the KDC-controlled METHOD-DATA of a
// PREAUTH_REQUIRED or MORE_PREAUTH_DATA_REQUIRED error through the SPAKE
// client, up to encoding the next request: every failure is classified.
func FuzzSPAKEMethodData(f *testing.F) {
	c := fuzzClient(f)
	c.preauth = PreauthAuto
	base, _ := hex.DecodeString("5866666666666666666666666666666666666666666666666666666666666666") // the base point
	f.Add(methodDataSeed(nil, "MIT"))
	f.Add(methodDataSeed(spake.AppendChallenge(nil, spake.GroupEdwards25519, base, spake.FactorNone), "MIT1cookie"))
	f.Add(methodDataSeed(spake.AppendChallenge(nil, spake.GroupP256, append(base, 0), spake.FactorNone), ""))
	f.Fuzz(func(t *testing.T, edata []byte) {
		for _, after := range []bool{false, true} {
			c.kerr = krbError{edata: edata}
			choice := preauthChoice{etype: 20}
			var err error
			if after {
				choice.spake = spakeSupport
				err = c.takeMoreData(&choice, PhaseSPAKEChallenge)
			} else {
				err = c.pickMethod(&choice, PhasePreauthRequired)
			}
			var pe *Error
			if err != nil {
				if !errors.As(err, &pe) {
					t.Fatalf("error %T %v is not classified", err, err)
				}
				continue
			}
			if err := c.buildASReq(&choice, time.Now()); err != nil {
				t.Fatalf("request after accepted METHOD-DATA: %v", err)
			}
		}
	})
}

// A warm SPAKE login allocates nothing, for every enctype: K'[0], K'[1],
// their Ke and Ki and (aes-sha1) the PRF re-key AES and HMAC in place.
// Encrypted timestamp is at zero too (TestExchangesDoNotAllocate).
func TestSPAKELoginAllocations(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector changes allocation counts")
	}
	r := upRealm(t, realm.Options{DisableLastSuccess: true})
	ctx := testCtx(t, time.Minute)
	for _, c := range []struct {
		et   int32
		want float64
	}{{20, 0}, {19, 0}, {18, 0}, {17, 0}} {
		cl := userClient(t, r, 1, Options{Etypes: []int32{c.et}, Preauth: PreauthSPAKE})
		if _, err := cl.Login(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		n := testing.AllocsPerRun(50, func() {
			if as, e := cl.Login(ctx); e != nil || as.Method != MethodSPAKE {
				err = fmt.Errorf("%+v %v", as, e)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v allocations per SPAKE login", EtypeName(c.et), n)
		if n > c.want {
			t.Errorf("%s: %v allocations per SPAKE login, want at most %v", EtypeName(c.et), n, c.want)
		}
		cl.Close()
	}
}

// TestSPAKENoCommonGroup: a KDC offering SPAKE only in P-384 rejects our
// support message; auto falls back to encrypted timestamp as kinit does
// (the KDC logs the same steps), spake fails as preauth_unsupported.
func TestSPAKENoCommonGroup(t *testing.T) {
	r := upRealm(t, realm.Options{})
	kdcGroups(t, r, "P-384")
	user := r.User(2)
	off := logSize(t, r)
	kinit(t, r, user)
	want := []string{
		"AS_REQ NEEDED_PREAUTH (Additional pre-authentication required)",
		"preauth (spake) verify failure: Preauthentication failed",
		"AS_REQ PREAUTH_FAILED (Preauthentication failed)",
		"AS_REQ ISSUE",
	}
	ref := kdcSteps(t, r, off, user, len(want))
	if !slices.Equal(ref, want) {
		t.Fatalf("kinit -k: KDC logged %q, want %q", ref, want)
	}

	off = logSize(t, r)
	c := userClient(t, r, 2, Options{})
	as, err := c.Login(testCtx(t, 10*time.Second))
	if err != nil || as.Method != MethodEncTimestamp || as.RoundTrips != 3 {
		t.Fatalf("auto: %+v %v, want encrypted timestamp after the rejected support message", as, err)
	}
	if got := kdcSteps(t, r, off, user, len(ref)); !slices.Equal(got, ref) {
		t.Errorf("our login: KDC logged\n%q\nkinit -k:\n%q", got, ref)
	}

	c = userClient(t, r, 2, Options{Preauth: PreauthSPAKE})
	_, err = c.Login(testCtx(t, 10*time.Second))
	if pe := wantClass(t, err, ClassPreauthUnsupported); pe.Phase != PhaseSPAKEChallenge {
		t.Errorf("spake: %v", err)
	}
}

// TestSPAKEP256: a KDC configured for P-256 only (MIT's OpenSSL group)
// gets SPAKE in P-256, after the support message and as its optimistic
// challenge; the TGT works.
func TestSPAKEP256(t *testing.T) {
	r := upRealm(t, realm.Options{})
	kdcGroups(t, r, "P-256")
	ctx := testCtx(t, 20*time.Second)
	login := func(roundTrips int) {
		t.Helper()
		for _, et := range []int32{20, 18} {
			c := userClient(t, r, 1, Options{Etypes: []int32{et}, Preauth: PreauthSPAKE})
			as, err := c.Login(ctx)
			if err != nil || as.Method != MethodSPAKE || as.RoundTrips != roundTrips {
				t.Fatalf("%s: %+v %v, want SPAKE in %d round trips", EtypeName(et), as, err, roundTrips)
			}
			if _, err := c.ServiceTicket(ctx, c.PrepareService(mustPrincipal(t, r.Service(1)))); err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
	}
	login(3)
	optimisticChallenge(t, r, "P-256")
	login(2)
}

// TestSPAKEPrincipalWithoutPreauth: a principal that needs no
// pre-authentication gets its AS-REP at once (method none); SPAKE sent up
// front is still carried through by MIT's KDC (challenge, then AS-REP).
func TestSPAKEPrincipalWithoutPreauth(t *testing.T) {
	r := upRealm(t, realm.Options{})
	kadmin(t, r, "modprinc -requires_preauth "+r.User(3))
	ctx := testCtx(t, 10*time.Second)
	for _, tc := range []struct {
		o          Options
		method     string
		roundTrips int
	}{
		{Options{}, MethodNone, 1},
		{Options{Preauth: PreauthSPAKE, PreauthUpfront: true}, MethodSPAKE, 2},
	} {
		c := userClient(t, r, 3, tc.o)
		as, err := c.Login(ctx)
		if err != nil || as.Method != tc.method || as.RoundTrips != tc.roundTrips {
			t.Errorf("preauth %q upfront %v: %+v %v, want %s in %d round trips", tc.o.Preauth, tc.o.PreauthUpfront, as, err, tc.method, tc.roundTrips)
		}
		c.Close()
	}
}
