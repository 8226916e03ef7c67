// Package krb5test holds the test helpers that give the Kerberos engine
// (internal/krb5) what a harness realm has: its users with their keys,
// and its services, as a load's configuration takes them. It is apart
// from internal/realmtest because internal/krb5's own tests import
// realmtest. Test code only.
package krb5test

import (
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// UserCredentials returns r's users and their keys, read from r's user
// keytab in one read: user i (1-based) is ps[i-1] with creds[i-1].
func UserCredentials(t testing.TB, r *realm.Realm) (ps []krb5.Principal, creds []*krb5.Credentials) {
	t.Helper()
	ps = make([]krb5.Principal, r.Opts.Users)
	for i := range ps {
		p, err := krb5.ParsePrincipal(r.User(i+1), r.Realm)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	creds, err := krb5.NewKeytabCredentialsFor(r.UserKeytab, ps)
	if err != nil {
		t.Fatal(err)
	}
	return ps, creds
}

// Services returns a load's Service function for r: the i-th service
// asked for (1-based) is r's service i, wrapping around r's services.
func Services(t testing.TB, r *realm.Realm) func(c *krb5.Client, i int) *krb5.Service {
	return func(c *krb5.Client, i int) *krb5.Service {
		p, err := krb5.ParsePrincipal(r.Service((i-1)%r.Opts.Services+1), r.Realm)
		if err != nil {
			t.Fatal(err)
		}
		return c.PrepareService(p)
	}
}
