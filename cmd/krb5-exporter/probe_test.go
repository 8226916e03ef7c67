package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/prober"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// runProbe parses args as `krb5-exporter probe ...` and runs the command in
// process, returning its exit code and output.
func runProbe(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	app := kingpin.New("krb5-exporter", "")
	var stdout, stderr bytes.Buffer
	app.Terminate(nil)
	app.UsageWriter(&stderr)
	app.ErrorWriter(&stderr)
	p := addProbeCommand(app)
	if _, err := app.Parse(append([]string{"probe"}, args...)); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	code := p.run(&stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func probeRealm(t *testing.T) *realm.Realm {
	t.Helper()
	return realmtest.Realm(t, realm.Options{Users: 1, Services: 1, NoKadmind: true})
}

func TestProbeCommand(t *testing.T) {
	r := probeRealm(t)
	base := []string{"--kdc", r.KDCAddr, "--realm", r.Realm, "--client", r.ProbePrincipal, "--keytab", r.ProbeKeytab}
	withSvc := append(append([]string{}, base...), "--service", r.Service(1))

	code, out, _ := runProbe(t, withSvc...)
	ok := regexp.MustCompile(`^KRB5 OK - login [0-9.]+ms \(spake; preauth_required [0-9.]+ms, spake_challenge [0-9.]+ms, as_rep [0-9.]+ms; rep=aes256-cts-hmac-sha384-192 tkt=aes256-cts-hmac-sha384-192 ses=aes256-cts-hmac-sha384-192\), service ticket [0-9.]+ms \(rep=aes256-cts-hmac-sha384-192 .*\) \| as=[0-9.]+s;;;0 preauth_required=[0-9.]+s spake_challenge=[0-9.]+s as_rep=[0-9.]+s tgs=[0-9.]+s;;;0 clock_offset=-?[0-9.]+s;60;240\n$`)
	if code != prober.NagiosOK || !ok.MatchString(out) {
		t.Errorf("OK probe: exit %d\n%s", code, out)
	}

	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		match string
	}{
		{"tcp, login only, up front", append(append([]string{}, base...), "--transport", "tcp", "--preauth-upfront"), prober.NagiosOK, "KRB5 OK - login "},
		{"encrypted timestamp", append(append([]string{}, base...), "--preauth", "encrypted_timestamp"), prober.NagiosOK, "(encrypted_timestamp; preauth_required "},
		{"warning", append(append([]string{}, withSvc...), "--warning", "1ns"), prober.NagiosWarning, "KRB5 WARNING - login"},
		{"critical", append(append([]string{}, withSvc...), "--warning", "1ns", "--critical", "2ns"), prober.NagiosCritical, "KRB5 CRITICAL - login"},
		{"unknown service", append(append([]string{}, base...), "--service", "HTTP/nosuch."+r.Domain), prober.NagiosCritical, "service ticket failed: KDC_ERR_S_PRINCIPAL_UNKNOWN"},
		{"unknown client", []string{"--kdc", r.KDCAddr, "--realm", r.Realm, "--client", "nosuch", "--password-file", pwFile(t, "x")}, prober.NagiosCritical, "login failed: KDC_ERR_C_PRINCIPAL_UNKNOWN"},
		{"missing keytab", []string{"--kdc", r.KDCAddr, "--realm", r.Realm, "--client", "p", "--keytab", "/nonexistent.keytab"}, prober.NagiosUnknown, "KRB5 UNKNOWN - keytab: cannot open keytab: no such file or directory"},
		{"readable keytab", []string{"--kdc", r.KDCAddr, "--realm", r.Realm, "--client", "p", "--keytab", readableKeytab(t)}, prober.NagiosUnknown, "KRB5 UNKNOWN - keytab: keytab is readable by users other than its owner"},
		{"clock skew warning", append(append([]string{}, withSvc...), "--clock-skew-warning", "1ns"), prober.NagiosWarning, "KRB5 WARNING - login"},
		{"clock skew critical", append(append([]string{}, withSvc...), "--clock-skew-warning", "1ns", "--clock-skew-critical", "2ns"), prober.NagiosCritical, "KDC clock off by"},
		{"missing kdc", base[2:], prober.NagiosUnknown, "KRB5 UNKNOWN - address is required"},
		{"bad enctype", append(append([]string{}, base...), "--enctype", "rc4-hmac"), prober.NagiosUnknown, `KRB5 UNKNOWN - enctypes.0: unsupported enctype "rc4-hmac"`},
		{"module without file", append(append([]string{}, base...), "--module", "x"), prober.NagiosUnknown, "--module needs --config.file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runProbe(t, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.match) || strings.Count(out, "\n") != 1 {
				t.Errorf("exit %d, want %d; output (want %q):\n%s%s", code, tc.code, tc.match, out, errOut)
			}
		})
	}

	// A dead KDC is CRITICAL, and says why.
	dead := realmtest.DeadAddr(t)
	code, out, _ = runProbe(t, append([]string{"--kdc", dead}, base[2:]...)...)
	if code != prober.NagiosCritical || !strings.Contains(out, "login failed: connection_refused") || strings.Contains(out, "|") {
		t.Errorf("dead KDC: exit %d\n%s", code, out)
	}

	// --module takes the settings from the exporter's configuration file;
	// flags override its fields.
	cfgFile := filepath.Join(t.TempDir(), "c.yml")
	cfg := "modules:\n  default:\n    realm: " + r.Realm + "\n    client: " + r.ProbePrincipal + "\n    keytab: " + r.ProbeKeytab +
		"\n    service: HTTP/nosuch." + r.Domain + "\n"
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The old flag name still works (hidden alias).
	code, out, _ = runProbe(t, "--kdc", r.KDCAddr, "--module", "default", "--module.config-file", cfgFile)
	if code != prober.NagiosCritical || !strings.Contains(out, "KDC_ERR_S_PRINCIPAL_UNKNOWN") {
		t.Errorf("module from file: exit %d\n%s", code, out)
	}
	code, out, _ = runProbe(t, "--kdc", r.KDCAddr, "--module", "default", "--config.file", cfgFile, "--service", r.Service(1), "-v")
	if code != prober.NagiosOK {
		t.Errorf("module with --service override: exit %d\n%s", code, out)
	}
	code, out, _ = runProbe(t, "--kdc", r.KDCAddr, "--module", "nosuch", "--config.file", cfgFile)
	if code != prober.NagiosUnknown || !strings.Contains(out, `no module "nosuch"`) {
		t.Errorf("unknown module: exit %d\n%s", code, out)
	}
}

func pwFile(t *testing.T, pw string) string {
	f := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(f, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// readableKeytab is a copy-free stand-in: a file others may read, refused
// before it is ever parsed.
func readableKeytab(t *testing.T) string {
	f := filepath.Join(t.TempDir(), "readable.keytab")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(f, 0o644)
	return f
}

// A bad command line is UNKNOWN (3) with one line on stdout, as a
// monitoring system expects of a check; the daemon's bad flags exit 2.
func TestProbeBadCommandLine(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"probe", "--no-such-flag"},
		{"probe", "--kdc", "k", "--timeout", "soon"},
		{"probe", "--kdc", "k", "--transport", "sctp"},
		{"probe", "--kdc"},
	} {
		out, stderr, code := exporter(t, args...)
		if code != prober.NagiosUnknown || !strings.HasPrefix(out, "KRB5 UNKNOWN - bad command line: ") || strings.Count(out, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 3 and one UNKNOWN line", args, code, out, stderr)
		}
	}
	if _, _, code := exporter(t, "--no-such-flag"); code != 2 {
		t.Errorf("the daemon's bad flag: exit %d, want 2", code)
	}
}

// The probe check is a KDC's: a kpasswd or kadmin module exits UNKNOWN
// with where to use it, not with a KDC verdict.
func TestProbeCommandRefusesKadmindProbers(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "p.yml")
	os.WriteFile(cfg, []byte("modules:\n  k:\n    prober: kadmin\n"), 0o600)
	out, _, code := exporter(t, "probe", "--config.file", cfg, "--module", "k", "--kdc", "127.0.0.1:749")
	if code != prober.NagiosUnknown || out != "KRB5 UNKNOWN - module \"k\" is a prober kadmin module: use it under probes: or at /probe\n" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
}
