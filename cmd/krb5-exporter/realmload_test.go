package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestRealmLoad runs `realm load` briefly with every kind of request made
// frequent, and checks what it says it did against the KDC's own log:
// logins and service tickets issued, the wrong passwords, the unknown
// user, the unknown services and the RC4 offers each as many times as the
// load counted them, none missing.
func TestRealmLoad(t *testing.T) {
	t.Parallel()
	testutil.RequireProgram(t, "kinit")
	r := testutil.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 5, Services: 3, Fillers: -1, NoKadmind: true})
	before := len(testutil.MustRead(t, r.KDCLog))
	out, stderr, code := exporter(t, "realm", "load", "--dir", r.Dir, "--rate", "20", "--duration", "2s",
		"--wrong-password-every", "7", "--unknown-user-every", "11", "--weak-enctype-every", "5", "--unknown-service-every", "9")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	said := map[string]string{}
	for _, m := range regexp.MustCompile(`([a-z_]+(?: [A-Z_]+)?): (\d+)`).FindAllStringSubmatch(out, -1) {
		said[m[1]] = m[2]
	}
	log := string(testutil.MustRead(t, r.KDCLog)[before:])
	count := func(re string) string {
		return strconv.Itoa(len(regexp.MustCompile(re).FindAllString(log, -1)))
	}
	for kind, re := range map[string]string{
		"wrong_password KDC_ERR_PREAUTH_FAILED":       `PREAUTH_FAILED: user0001@` + r.Realm + ` for krbtgt/\S+, Preauthentication failed`,
		"unknown_user KDC_ERR_C_PRINCIPAL_UNKNOWN":    `CLIENT_NOT_FOUND: demo-nosuch-user@`,
		"unknown_service KDC_ERR_S_PRINCIPAL_UNKNOWN": `TGS_REQ .* LOOKING_UP_SERVER: .* for HTTP/nosuch`,
		"weak_enctype_offered":                        `AS_REQ .*arcfour-hmac\(23\)\}\) \S+: ISSUE: `,
		"ticket":                                      `TGS_REQ .* ISSUE: .* for HTTP/web`,
	} {
		if said[kind] == "" || said[kind] == "0" || count(re) != said[kind] {
			t.Errorf("%s: the load says %q, the KDC's log has %s", kind, said[kind], count(re))
		}
	}
	if n := strings.Count(log, "ISSUE: "); n < 20 {
		t.Errorf("only %d ISSUE lines in 2 s at 20 logins/s:\n%s", n, out)
	}

	// Its bounds: a demo's load, not the bench's.
	for _, args := range [][]string{{"--rate", "500"}, {"--duration", "48h"}, {"--users", "6"}, {"--tickets=-1"}} {
		_, stderr, code := exporter(t, append([]string{"realm", "load", "--dir", r.Dir}, args...)...)
		if flag, _, _ := strings.Cut(args[0], "="); code != 1 || !strings.Contains(stderr, flag) {
			t.Errorf("%v: exit %d, %q; want 1 and the flag named", args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "krb5-load-rc4.conf")); err != nil {
		t.Errorf("the RC4 client profile is not inside the realm's directory: %v", err)
	}
}
