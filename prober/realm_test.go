package prober

import (
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// upRealm starts a small private MIT realm without kadmind for one test.
func upRealm(t testing.TB, opts realm.Options) *realm.Realm {
	t.Helper()
	opts.NoKadmind = true
	return realmtest.Realm(t, opts)
}
