package collector

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5profile"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

const settingsKDCConf = `[kdcdefaults]
	kdc_ports = 750,88
	kdc_tcp_listen_backlog = 64

[realms]
	DB2.TEST = {
		database_name = /srv/db2/principal
		iprop_enable = true
		supported_enctypes = aes256-cts:normal rc4-hmac:normal des3-hmac-sha1:normal aes256-cts-hmac-sha1-96:special
	}
	LMDB.TEST = {
		database_module = lmdbmod
		kdc_listen = 127.0.0.1:1088, [::1]:1088
		kdc_tcp_listen = ""
	}
	LDAP.TEST = {
		database_module = ldapmod
		kdc_tcp_listen = 0.0.0.0
	}

[dbmodules]
	DB2.TEST = {
		db_library = db2
		disable_last_success = yes
	}
	lmdbmod = {
		db_library = klmdb
		database_name = /srv/lmdb/principal
		disable_lockout = on
	}
	ldapmod = {
		db_library = kldap
	}

[dbdefaults]
	disable_last_success = true
`

// mustProfile is the profile of one kdc.conf and the krb5.conf files
// after it.
func mustProfile(t *testing.T, paths ...string) *profile {
	t.Helper()
	p, err := krb5profile.Load(paths[:1], paths[1:], nil)
	if err != nil {
		t.Fatal(err)
	}
	return &profile{p}
}

func TestSettings(t *testing.T) {
	dir := t.TempDir()
	p := mustProfile(t, testutil.WriteFile(t, dir, "kdc.conf", settingsKDCConf),
		testutil.WriteFile(t, dir, "krb5.conf", "[libdefaults]\n\tdefault_realm = DB2.TEST\n\tspake_preauth_groups = edwards25519, P-256\n"))

	// -r arguments of the running KDC decide the realms.
	s, err := p.settings([]string{"DB2.TEST", "LMDB.TEST", "LDAP.TEST", "DB2.TEST"}, debianDatabase)
	if err != nil {
		t.Fatal(err)
	}
	if s.tcpListenBacklog != 64 {
		t.Errorf("backlog = %d", s.tcpListenBacklog)
	}
	if !reflect.DeepEqual(s.spakeGroups, []string{"edwards25519", "P-256"}) {
		t.Errorf("spake groups = %q", s.spakeGroups)
	}
	want := []realmSettings{
		{name: "DB2.TEST", dbLibrary: "db2", dbFile: "/srv/db2/principal", disableLastSuccess: true,
			enctypes:    []string{"aes256-cts-hmac-sha1-96", "arcfour-hmac", "des3-cbc-sha1"},
			ipropEnable: true, ipropLog: "/srv/db2/principal.ulog"},
		// The update log's default ignores [dbmodules] database_name, as MIT does.
		{name: "LMDB.TEST", dbLibrary: "klmdb", dbFile: "/srv/lmdb/principal.mdb", disableLockout: true,
			enctypes: []string{"aes256-cts-hmac-sha1-96", "aes128-cts-hmac-sha1-96"}, ipropLog: debianDatabase + ".ulog"},
		// [dbdefaults] applies to LDAP only.
		{name: "LDAP.TEST", dbLibrary: "kldap", disableLastSuccess: true,
			enctypes: []string{"aes256-cts-hmac-sha1-96", "aes128-cts-hmac-sha1-96"}, ipropLog: debianDatabase + ".ulog"},
	}
	if !reflect.DeepEqual(s.realms, want) {
		t.Errorf("realms:\n got %+v\nwant %+v", s.realms, want)
	}
	wantUDP := []listenAddr{{"", 750}, {"", 88}, {"127.0.0.1", 1088}, {"::1", 1088}}
	if !reflect.DeepEqual(s.udpListen, wantUDP) {
		t.Errorf("udp listen = %+v, want %+v", s.udpListen, wantUDP)
	}
	wantTCP := []listenAddr{{"", 88}, {"0.0.0.0", 88}} // LMDB.TEST: TCP disabled
	if !reflect.DeepEqual(s.tcpListen, wantTCP) {
		t.Errorf("tcp listen = %+v, want %+v", s.tcpListen, wantTCP)
	}

	// Without -r: default_realm, as krb5kdc would serve.
	s, err = p.settings(nil, debianDatabase)
	if err != nil || len(s.realms) != 1 || s.realms[0].name != "DB2.TEST" {
		t.Errorf("without -r: %+v, %v", s, err)
	}
	// Without default_realm either: every realm of kdc.conf.
	p2 := mustProfile(t, filepath.Join(dir, "kdc.conf"))
	s, err = p2.settings(nil, rhelDatabase)
	if err != nil || len(s.realms) != 3 {
		t.Fatalf("kdc.conf realms: %+v, %v", s, err)
	}
	if s.spakeGroups != nil {
		t.Errorf("spake groups without krb5.conf = %q", s.spakeGroups)
	}
	// A realm without any kdc.conf entry gets the compiled-in defaults.
	s, _ = p2.settings([]string{"NEW.TEST"}, rhelDatabase)
	if r := s.realms[0]; r.dbLibrary != "db2" || r.dbFile != rhelDatabase || r.disableLastSuccess {
		t.Errorf("defaults: %+v", r)
	}
}

func TestSettingsInvalid(t *testing.T) {
	for name, text := range map[string]string{
		"bad boolean": "[dbmodules]\n\tX.TEST = {\n\t\tdisable_last_success = maybe\n\t}\n",
		"bad backlog": "[kdcdefaults]\n\tkdc_tcp_listen_backlog = many\n",
		"bad port":    "[realms]\n\tX.TEST = {\n\t\tkdc_listen = 127.0.0.1:99999\n\t}\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := mustProfile(t, testutil.WriteFile(t, t.TempDir(), "kdc.conf", text))
			if _, err := p.settings([]string{"X.TEST"}, debianDatabase); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestEnctypeWeakness(t *testing.T) {
	for name, want := range map[string]string{
		"aes256-sha2": "false", "AES128-CTS": "false", "camellia256-cts": "false",
		"rc4-hmac": "true", "arcfour-hmac-exp": "true", "des3-cbc-sha1-kd": "true", "des-cbc-crc": "true", "des": "true",
		"made-up-cipher": "unknown",
	} {
		if got := enctypeWeakness(canonicalEnctype(name)); got != want {
			t.Errorf("%s: weak = %s, want %s", name, got, want)
		}
	}
}

// TestConfSourceCountsOnce: a broken file is one parse error however often
// it is scraped; fixing it brings the settings back.
func TestConfSourceCountsOnce(t *testing.T) {
	dir := t.TempDir()
	path := testutil.WriteFile(t, dir, "kdc.conf", "[realms]\n\tX.TEST = {\n")
	c := newConfSource(log.NewNopLogger(), path, filepath.Join(dir, "missing-krb5.conf"))
	for i := 0; i < 3; i++ {
		if _, err := c.settings(nil); err == nil {
			t.Fatal("broken file parsed")
		}
	}
	if c.parseErrors != 1 {
		t.Errorf("parse errors = %v after 3 loads of one broken file, want 1", c.parseErrors)
	}
	testutil.WriteFile(t, dir, "kdc.conf", "[realms]\n\tX.TEST = {\n\t}\n")
	// The size changed; also move the mtime in case the clock is coarse.
	later := time.Now().Add(time.Minute)
	os.Chtimes(path, later, later)
	s, err := c.settings(nil)
	if err != nil || len(s.realms) != 1 || s.realms[0].name != "X.TEST" {
		t.Fatalf("after the fix: %+v, %v", s, err)
	}
	if c.parseErrors != 1 {
		t.Errorf("parse errors = %v", c.parseErrors)
	}

	c = newConfSource(log.NewNopLogger(), filepath.Join(dir, "nope.conf"), "")
	if _, err := c.settings(nil); err == nil || !strings.Contains(err.Error(), "no kdc.conf found") || c.parseErrors != 0 {
		t.Errorf("missing kdc.conf: %v, %v parse errors", err, c.parseErrors)
	}
}
