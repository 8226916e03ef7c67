package krb5

import (
	"net"
	"strconv"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// changepwClient is a Client of the realm's probe principal that logs in
// for kadmin/changepw, as kpasswd does.
func changepwClient(t testing.TB, r *realm.Realm) *Client {
	t.Helper()
	p := mustPrincipal(t, r.ProbePrincipal)
	creds, err := NewKeytabCredentials(r.ProbeKeytab, p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Options{KDC: r.KDCAddr, Client: p, Credentials: creds,
		ASService: Principal{Components: []string{"kadmin", "changepw"}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKpasswdProbeChangesNothing: over both transports, kadmind verifies
// the AP-REQ (its AP-REP decrypts with our session key) and refuses the
// empty KRB-PRIV with HARDERROR; 1,000 probes leave the probe principal's
// kvno, last modification and last password change as kadmin.local read
// them before.
func TestKpasswdProbeChangesNothing(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{})
	before := realmtest.KeyState(t, r, r.ProbePrincipal)
	// The oracle runs however the probes went.
	defer func() {
		if after := realmtest.KeyState(t, r, r.ProbePrincipal); after != before {
			t.Errorf("the probe principal changed:\nbefore\n%safter\n%s", before, after)
		}
	}()
	kp := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KpasswdPort))
	c := changepwClient(t, r)
	ctx := testCtx(t, 60e9)
	if _, err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		tr := UDP
		if i%2 == 1 {
			tr = TCP
		}
		if i%100 == 0 {
			// A fresh ticket now and then, as each probe logs in.
			if _, err := c.Login(ctx); err != nil {
				t.Fatal(err)
			}
		}
		res, err := c.Kpasswd(ctx, kp, tr)
		if err != nil {
			t.Fatalf("probe %d over %s: %v", i, tr, err)
		}
		if res.Code != KpasswdHardError || res.Text != "Failed decrypting request" {
			t.Fatalf("probe %d: result %d %q", i, res.Code, res.Text)
		}
	}
}
