package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The printed environment survives eval in a shell, even for a directory
// with a quote in its name.
func TestPrintEnvQuotes(t *testing.T) {
	r := &realm.Realm{Krb5Conf: "/tmp/it's here/krb5.conf", KDCConf: "/tmp/x/kdc.conf", CCache: "/tmp/$HOME/cc"}
	var b strings.Builder
	printEnv(&b, r)
	out, err := exec.Command("sh", "-c", b.String()+`printf '%s|%s' "$KRB5_CONFIG" "$KRB5CCNAME"`).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := "/tmp/it's here/krb5.conf|FILE:/tmp/$HOME/cc"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// A realm run by another user than root: its journal sources name that
// user, whose entries count then (root's always do).
func TestRealmConfigJournalUser(t *testing.T) {
	kt := filepath.Join(t.TempDir(), "p.keytab")
	testutil.WriteKeytab(t, kt, "p@T.TEST", "secret")
	var b strings.Builder
	if err := realmConfigTmpl.Execute(&b, map[string]string{"Realm": "T.TEST", "Dir": "/d", "Module": "t_test",
		"ProbePrincipal": "p@T.TEST", "ProbeKeytab": kt, "Service": "host/x@T.TEST", "KDCAddr": "127.0.0.1:88", "KadmindLog": "x",
		"JournalDir": "/d/journal", "JournalUser": journalUser(1000)}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(b.String()), "realm.yml")
	if err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if len(cfg.Logs) != 2 {
		t.Fatalf("%d log sources:\n%s", len(cfg.Logs), b.String())
	}
	for _, l := range cfg.Logs {
		if uids, err := l.JournalUIDs(); err != nil || !slices.Equal(uids, []uint32{1000}) {
			t.Errorf("%s: uids %v, %v", l.Type, uids, err)
		}
	}
	if journalUser(0) != "" {
		t.Errorf("root's realm names a user: %q", journalUser(0))
	}
}
