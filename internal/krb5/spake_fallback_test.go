package krb5

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/spake"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/spake/spaketest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// A KDC's SPAKE challenge that the client cannot use: kinit's SPAKE module
// fails on it (MIT spake_client.c: a PA-SPAKE that does not decode, a
// public key off the curve, no SF-NONE factor), and libkrb5 then tries the
// next real pre-authentication type of the METHOD-DATA (preauth2.c
// process_pa_data), encrypted timestamp. The challenge is corrupted by a
// UDP proxy between the client and a real KDC.

// Corruptions of the challenge in a KDC reply.
const (
	corruptDER    = "der"    // the public key's OCTET STRING tag: the PA-SPAKE no longer decodes
	corruptPoint  = "point"  // the public key replaced by 32 bytes that are no curve point
	corruptFactor = "factor" // the SF-NONE factor offered renumbered 2, a factor keytab logins cannot answer
)

// corruptChallenge returns reply with its PA-SPAKE challenge corrupted as
// mode says (noPoint: 32 bytes that are no curve point), or reply itself
// when it carries no challenge. It runs in the proxy's goroutine, which may
// outlive a test, so it does not report: a reply passed on intact shows as
// a SPAKE login in the KDC's log, which the tests reject.
func corruptChallenge(reply []byte, mode string, noPoint []byte) []byte {
	if len(reply) == 0 || reply[0] != der.App(appKRBError) {
		return reply
	}
	var kerr krbError
	if err := parseKRBError(reply, &kerr); err != nil || len(kerr.edata) == 0 {
		return reply
	}
	val, ok, _, _, err := methodData(kerr.edata)
	if err != nil || !ok || len(val) == 0 {
		return reply
	}
	var ch spake.Challenge
	if err := spake.ParseChallenge(val, &ch); err != nil {
		return reply
	}
	out := bytes.Clone(reply)
	off := bytes.Index(reply, ch.PubKey)
	if off < 2 || len(ch.PubKey) != 32 || reply[off-2] != der.TagOctetString {
		return reply
	}
	switch mode {
	case corruptDER:
		out[off-2] = 0x05 // NULL where the OCTET STRING was
	case corruptPoint:
		copy(out[off:], noPoint)
	case corruptFactor:
		// After the key: factors [2] SEQUENCE OF SEQUENCE { type [0] INTEGER 1 }.
		sf := []byte{0xa0, 0x03, 0x02, 0x01, byte(spake.FactorNone)}
		i := bytes.Index(out[off+32:], sf)
		if i < 0 {
			return reply
		}
		out[off+32+i+len(sf)-1] = 2
	}
	return out
}

// challengeProxy forwards UDP requests to the realm's KDC and its replies,
// challenges corrupted, back; it returns the proxy's address.
func challengeProxy(t *testing.T, r *realm.Realm, mode string) string {
	noPoint := spaketest.OffCurve(t)
	return testutil.UDPServer(t, func(req []byte) []byte {
		conn, err := net.Dial("udp", r.KDCAddr)
		if err != nil {
			return nil
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(req); err != nil {
			return nil
		}
		buf := make([]byte, 65536)
		n, err := conn.Read(buf)
		if err != nil {
			return nil
		}
		return corruptChallenge(buf[:n], mode, noPoint)
	})
}

// kinitVia runs `kinit -k` for user with the realm's KDC replaced by addr
// (UDP only) and returns its output, libkrb5's trace included, and error.
func kinitVia(t *testing.T, r *realm.Realm, addr, user string) (string, error) {
	t.Helper()
	conf, err := os.ReadFile(r.Krb5Conf)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(conf), "kdc = "+r.KDCAddr, "kdc = "+addr, 1)
	if s == string(conf) {
		t.Fatal("krb5.conf: KDC line not found")
	}
	s = strings.Replace(s, "[libdefaults]\n", "[libdefaults]\n\tudp_preference_limit = 65535\n", 1)
	path := t.TempDir() + "/krb5.conf"
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kinit", "-k", "-t", r.UserKeytab, user)
	cmd.Env = append(append(os.Environ(), r.Env()...), "KRB5_CONFIG="+path, "KRB5CCNAME=FILE:"+t.TempDir()+"/cc", "KRB5_TRACE=/dev/stderr")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSPAKEUnusableChallenge: for a challenge that does not decode, one
// whose public key is no curve point and one without SF-NONE, in the KDC's optimistic
// PREAUTH_REQUIRED and in MORE_PREAUTH_DATA_REQUIRED after the support
// message, kinit 1.20 logs in with encrypted timestamp (checked here, by the
// KDC's log), auto does the same in the same round trips with the same KDC
// log, and spake fails as malformed_reply (preauth_unsupported without
// SF-NONE).
func TestSPAKEUnusableChallenge(t *testing.T) {
	r := upRealm(t, realm.Options{})
	user := r.User(2)
	for _, optimistic := range []bool{false, true} { // the optimistic challenge is configured once, for the second half
		want := []string{
			"AS_REQ NEEDED_PREAUTH (Additional pre-authentication required)",
			"preauth (spake) verify failure: More preauthentication data is required",
			"AS_REQ PREAUTH_FAILED (More preauthentication data is required)",
			"AS_REQ ISSUE",
		}
		roundTrips, phase := 3, PhaseSPAKEChallenge
		if optimistic {
			optimisticChallenge(t, r, "edwards25519")
			want = []string{want[0], want[3]}
			roundTrips, phase = 2, PhasePreauthRequired
		}
		for _, mode := range []string{corruptDER, corruptPoint, corruptFactor} {
			t.Run(fmt.Sprintf("optimistic=%v/%s", optimistic, mode), func(t *testing.T) {
				addr := challengeProxy(t, r, mode)
				off := logSize(t, r)
				out, err := kinitVia(t, r, addr, user)
				if err != nil {
					t.Fatalf("kinit -k through the proxy: %v\n%s", err, out)
				}
				// The optimistic case logs the same KDC lines for SPAKE:
				// libkrb5's trace says which method made the request.
				if !strings.Contains(out, "Preauth module spake (151) (real) returned: ") ||
					!strings.Contains(out, "Preauth module encrypted_timestamp (2) (real) returned: 0/Success") {
					t.Fatalf("kinit -k did not fall back from SPAKE to encrypted timestamp:\n%s", out)
				}
				if ref := kdcSteps(t, r, off, user, len(want)); !slices.Equal(ref, want) {
					t.Fatalf("kinit -k: KDC logged %q, want %q", ref, want)
				}

				off = logSize(t, r)
				c := userClient(t, r, 2, Options{KDC: addr})
				defer c.Close()
				ctx := testCtx(t, 10*time.Second)
				as, err := c.Login(ctx)
				if err != nil || as.Method != MethodEncTimestamp || as.RoundTrips != roundTrips {
					t.Fatalf("auto: %+v %v, want encrypted timestamp in %d round trips", as, err, roundTrips)
				}
				if got := kdcSteps(t, r, off, user, len(want)); !slices.Equal(got, want) {
					t.Errorf("auto: KDC logged %q, kinit -k %q", got, want)
				}
				if _, err := c.ServiceTicket(ctx, c.PrepareService(mustPrincipal(t, r.Service(1)))); err != nil {
					t.Fatal(err)
				}

				c = userClient(t, r, 2, Options{KDC: addr, Preauth: PreauthSPAKE})
				defer c.Close()
				as, err = c.Login(ctx)
				class := ClassMalformedReply
				if mode == corruptFactor {
					class = ClassPreauthUnsupported
				}
				if pe := wantClass(t, err, class); pe.Phase != phase || as.Method != MethodSPAKE {
					t.Errorf("spake: %+v %v, want %s in phase %s", as, err, class, phase)
				}
			})
		}
	}
}
