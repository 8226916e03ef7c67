package krb5

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// upRealm starts a small private MIT realm without kadmind for one test.
func upRealm(t testing.TB, opts realm.Options) *realm.Realm {
	t.Helper()
	opts.NoKadmind = true
	return realmtest.Realm(t, opts)
}

// kadmin runs kadmin.local commands against the realm.
func kadmin(t testing.TB, r *realm.Realm, cmds ...string) string {
	t.Helper()
	return realmtest.Kadmin(t, r, cmds...)
}

// userClient returns a Client for user i of the realm with the realm's user
// keytab, talking to the realm's KDC unless o.KDC says otherwise.
func userClient(t testing.TB, r *realm.Realm, i int, o Options) *Client {
	t.Helper()
	p := mustPrincipal(t, r.User(i))
	if o.Credentials == nil {
		creds, err := NewKeytabCredentials(r.UserKeytab, p)
		if err != nil {
			t.Fatal(err)
		}
		o.Credentials = creds
	}
	if o.KDC == "" {
		o.KDC = r.KDCAddr
	}
	o.Client = p
	c, err := NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testCtx(t testing.TB, d time.Duration) context.Context { return testutil.Context(t, d) }

func TestMain(m *testing.M) {
	if os.Getenv(echoServerEnv) != "" {
		runEchoServer() // BenchmarkUDPRoundTrip's peer, in its own process
		return
	}
	os.Exit(m.Run())
}
