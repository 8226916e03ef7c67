package loadgen

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/krb5test"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The realm tests share one realm (8 users, 4 services, no kadmind, the
// KDC CPU-bound: no last-success writes), started by the first that needs
// it and removed after the last: one start instead of one per test.
var shared struct {
	once sync.Once
	dir  string
	r    *realm.Realm
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.r != nil {
		shared.r.Down()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// upRealm returns the shared realm, with every request sent to its KDC
// so far logged (an earlier test's load cut off at its end leaves some).
func upRealm(t testing.TB) *realm.Realm {
	t.Helper()
	realmtest.RequireMIT(t)
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "loadgen-realm"); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.r, shared.err = realm.Up(ctx, realm.Options{Dir: shared.dir, Users: 8, Services: 4, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	})
	if shared.err != nil {
		t.Fatalf("realm: %v", shared.err)
	}
	realmtest.DrainKDC(t, shared.r)
	return shared.r
}

// realmConfig is a load's configuration against r: its users from their
// keytab, its services, the bench's default 5 s timeout.
func realmConfig(t testing.TB, r *realm.Realm, preauth krb5.PreauthMode) Config {
	t.Helper()
	return realmConfigVia(t, r, preauth, r.KDCAddr)
}

// realmConfigVia is realmConfig with every client, of both generators,
// sending to kdc (a relay in front of r's KDC).
func realmConfigVia(t testing.TB, r *realm.Realm, preauth krb5.PreauthMode, kdc string) Config {
	t.Helper()
	ps, creds := krb5test.UserCredentials(t, r)
	return Config{
		KDC:   kdc,
		Users: len(ps),
		Client: func(i int, tr krb5.Transport) (*krb5.Client, error) {
			u := (i - 1) % len(ps)
			return krb5.NewClient(krb5.Options{KDC: kdc, Transport: tr, Client: ps[u], Credentials: creds[u], UDPRetransmit: time.Second, Preauth: preauth})
		},
		Services: r.Opts.Services,
		Service:  krb5test.Services(t, r),
		Timeout:  5 * time.Second,
	}
}

// count is the records of kind and of them the failed.
func count(recs []Record, kind string) (n, failed int) {
	for _, rc := range recs {
		if rc.Kind == kind {
			n++
			if rc.Class != krb5.ClassSuccess {
				failed++
			}
		}
	}
	return n, failed
}
