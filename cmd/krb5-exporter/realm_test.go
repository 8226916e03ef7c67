package main

import (
	"os/exec"
	"strings"
	"testing"

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
