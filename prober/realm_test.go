package prober

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// upRealm starts a small private MIT realm for one test (a few hundred
// milliseconds) and tears it down when the test ends. Tests skip only when
// the MIT binaries are missing.
func upRealm(t testing.TB, opts realm.Options) *realm.Realm {
	t.Helper()
	if err := realm.Available(); err != nil {
		t.Skipf("MIT krb5 binaries not installed: %v", err)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Users == 0 {
		opts.Users = 4
	}
	if opts.Services == 0 {
		opts.Services = 2
	}
	if opts.Fillers == 0 {
		opts.Fillers = -1
	}
	opts.NoKadmind = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := realm.Up(ctx, opts)
	if err != nil {
		t.Fatalf("realm: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Down(); err != nil {
			t.Errorf("realm down: %v", err)
		}
	})
	return r
}

// kadmin runs kadmin.local commands against the realm and fails the test
// when one reports an error.
func kadmin(t testing.TB, r *realm.Realm, cmds ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := r.KadminLocal(ctx, cmds...) // anything on stderr is an error
	if err != nil {
		t.Fatalf("kadmin.local %q: %v\n%s", cmds, err, out)
	}
	return out
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

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestMain(m *testing.M) {
	if os.Getenv(echoServerEnv) != "" {
		runEchoServer() // BenchmarkUDPRoundTrip's peer, in its own process
		return
	}
	os.Exit(m.Run())
}
