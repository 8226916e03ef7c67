package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
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
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 5, Services: 3, Fillers: -1, NoKadmind: true})
	// Both schedules: one login after another, and logins at random
	// times running concurrently (each user's client serving one at a
	// time), whose counts must add up all the same.
	for _, arrivals := range []string{"steady", "poisson"} {
		before := len(testutil.MustRead(t, r.KDCLog))
		out, stderr, code := exporter(t, "realm", "load", "--dir", r.Dir, "--rate", "20", "--duration", "2s", "--arrivals", arrivals,
			"--wrong-password-every", "7", "--unknown-user-every", "11", "--weak-enctype-every", "5", "--unknown-service-every", "9")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s%s", arrivals, code, out, stderr)
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
			"wrong_password KDC_ERR_PREAUTH_FAILED":       `PREAUTH_FAILED: user000[1-5]@` + r.Realm + ` for krbtgt/\S+, Preauthentication failed`,
			"unknown_user KDC_ERR_C_PRINCIPAL_UNKNOWN":    `CLIENT_NOT_FOUND: demo-nosuch-user000[1-3]@`,
			"unknown_service KDC_ERR_S_PRINCIPAL_UNKNOWN": `TGS_REQ .* LOOKING_UP_SERVER: .* for HTTP/nosuch`,
			"weak_enctype_offered":                        `AS_REQ .*arcfour-hmac\(23\)\}\) \S+: ISSUE: `,
			"ticket":                                      `TGS_REQ .* ISSUE: .* for HTTP/web`,
		} {
			if said[kind] == "" || said[kind] == "0" || count(re) != said[kind] {
				t.Errorf("%s: %s: the load says %q, the KDC's log has %s", arrivals, kind, said[kind], count(re))
			}
		}
		if n := strings.Count(log, "ISSUE: "); n < 20 {
			t.Errorf("%s: only %d ISSUE lines in 2 s at 20 logins/s:\n%s", arrivals, n, out)
		}
	}

	// The demo's attackers: from an address of their own, wrong passwords
	// taking turns among the users, unknown names among --unknown-users,
	// every service ticket for --service.
	before := len(testutil.MustRead(t, r.KDCLog))
	svc := r.Service(2)
	out, stderr, code := exporter(t, "realm", "load", "--dir", r.Dir, "--rate", "20", "--duration", "2s", "--source", "127.0.0.2",
		"--wrong-password-every", "2", "--unknown-user-every", "3", "--unknown-users", "3", "--weak-enctype-every", "0", "--service", svc)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	log := string(testutil.MustRead(t, r.KDCLog)[before:])
	distinct := func(re string) int {
		seen := map[string]bool{}
		for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(log, -1) {
			seen[m[1]] = true
		}
		return len(seen)
	}
	if n, from := len(regexp.MustCompile(`_REQ \(`).FindAllString(log, -1)), strings.Count(log, ") 127.0.0.2: "); n < 20 || from != n {
		t.Errorf("--source 127.0.0.2: %d of %d requests logged from it:\n%s", from, n, log)
	}
	if n := distinct(`PREAUTH_FAILED: (user\d+)@`); n != 5 {
		t.Errorf("wrong passwords for %d distinct users, want the 5 of --users:\n%s", n, out)
	}
	if n := distinct(`CLIENT_NOT_FOUND: (demo-nosuch-user\d+)@`); n != 3 {
		t.Errorf("%d distinct unknown principals, want --unknown-users 3:\n%s", n, out)
	}
	if tgs, to := strings.Count(log, "TGS_REQ"), strings.Count(log, " for "+svc); tgs == 0 || to != tgs {
		t.Errorf("--service %s: %d of %d service ticket requests for it:\n%s", svc, to, tgs, log)
	}

	// Many hosts: from a prefix, each user from an address of its own.
	before = len(testutil.MustRead(t, r.KDCLog))
	out, stderr, code = exporter(t, "realm", "load", "--dir", r.Dir, "--rate", "20", "--duration", "1s", "--source", "127.0.1.0/28",
		"--wrong-password-every", "1", "--unknown-user-every", "0", "--weak-enctype-every", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	log = string(testutil.MustRead(t, r.KDCLog)[before:])
	pairs := map[string]bool{}
	for _, m := range regexp.MustCompile(`\) (127\.0\.1\.\d+): PREAUTH_FAILED: user000(\d)@`).FindAllStringSubmatch(log, -1) {
		pairs[m[1]+" "+m[2]] = true // the prefix's (a late line of the load before can follow)
	}
	if want := map[string]bool{"127.0.1.0 1": true, "127.0.1.1 2": true, "127.0.1.2 3": true, "127.0.1.3 4": true, "127.0.1.4 5": true}; !maps.Equal(pairs, want) {
		t.Errorf("--source 127.0.1.0/28: wrong passwords from %v, want user i from 127.0.1.(i-1):\n%s", pairs, log)
	}

	// Its bounds: a demo's load, not the bench's.
	for _, args := range [][]string{{"--rate", "500"}, {"--duration", "48h"}, {"--users", "6"}, {"--tickets=-1"},
		{"--unknown-users", "0"}, {"--source", "10.0.0.1"}, {"--source", "::1"}, {"--source", "10.0.0.0/24"}, {"--source", "127.0.0.0/4"}} {
		_, stderr, code := exporter(t, append([]string{"realm", "load", "--dir", r.Dir}, args...)...)
		if flag, _, _ := strings.Cut(args[0], "="); code != 1 || !strings.Contains(stderr, flag) {
			t.Errorf("%v: exit %d, %q; want 1 and the flag named", args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "krb5-load-rc4.conf")); err != nil {
		t.Errorf("the RC4 client profile is not inside the realm's directory: %v", err)
	}
}
