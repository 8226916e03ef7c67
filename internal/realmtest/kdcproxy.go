package realmtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// RequireKDCProxy skips the test (fails it in CI) unless the harness can
// serve a KDC proxy (gunicorn, python3-kdcproxy) and MIT's kinit can use
// it (the k5tls plugin, Debian's krb5-k5tls).
func RequireKDCProxy(t testing.TB) {
	t.Helper()
	RequireMIT(t)
	err := realm.KDCProxyAvailable()
	if m, _ := filepath.Glob("/usr/lib*/*/krb5/plugins/tls/k5tls.so"); err == nil && len(m) == 0 {
		if m, _ = filepath.Glob("/usr/lib*/krb5/plugins/tls/k5tls.so"); len(m) == 0 {
			err = errors.New("MIT's TLS plugin k5tls.so is missing (apt-get install krb5-k5tls)")
		}
	}
	if err != nil {
		if testutil.InCI() {
			t.Fatalf("KDC proxy test in CI: %v", err)
		}
		t.Skip(err)
	}
}

// KinitVia runs MIT kinit -k as the realm's probe principal, and kvno of
// service when not empty, with a krb5.conf whose only KDC is the proxy at
// url trusting caFile; it returns their output with libkrb5's trace
// (KRB5_TRACE) and the first failure.
func KinitVia(t testing.TB, r *realm.Realm, url, caFile, service string) (string, error) {
	t.Helper()
	cmds := [][]string{{"kinit", "-k", "-t", r.ProbeKeytab, r.ProbePrincipal}}
	if service != "" {
		cmds = append(cmds, []string{"kvno", service})
	}
	return runVia(t, r, url, caFile, cmds...)
}

// KinitArgsVia runs kinit with args (stdin empty) as KinitVia does.
func KinitArgsVia(t testing.TB, r *realm.Realm, url, caFile string, args ...string) (string, error) {
	t.Helper()
	return runVia(t, r, url, caFile, append([]string{"kinit"}, args...))
}

func runVia(t testing.TB, r *realm.Realm, url, caFile string, cmds ...[]string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(conf, []byte(r.KDCProxyKrb5Conf(url, caFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "KRB5_CONFIG="+conf, "KRB5CCNAME=FILE:"+filepath.Join(dir, "ccache"), "KRB5_TRACE=/dev/stderr")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var all []byte
	for _, c := range cmds {
		cmd := exec.CommandContext(ctx, c[0], c[1:]...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		all = append(all, out...)
		if err != nil {
			return string(all), err
		}
	}
	return string(all), nil
}
