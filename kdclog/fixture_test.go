package kdclog

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The fixtures are real lines of MIT krb5 1.20 captured from harness
// realms (testdata/README.md). These tests need no MIT binaries.
var fixtures = []string{"mit-1.20-kdc.log", "mit-1.20-kadmind.log", "mit-1.20-workers-kdc.log", "mit-1.20-clockskew-kdc.log"}

var fixtureProbes = []string{"krb5-exporter-probe@PERF.TEST", realm.ReadyPrincipal}

// Rewrites of a 1.20 line into the other forms the parser must read.
var (
	reFileHeader = regexp.MustCompile(`^(\w{3}) (\d\d) (\d\d:\d\d:\d\d) (\S+) ([a-z0-9_.]+)\[(\d+)\]\(\w+\): `)
	reNamedEtype = regexp.MustCompile(`[A-Za-z0-9:_-]*\((-?\d+)\)`)
	reEtypeList  = regexp.MustCompile(`\((\d+) etypes \{([^}]*)\}\)`)
	reRepEtypes  = regexp.MustCompile(`etypes \{rep=([^}]*)\}`)
)

// toPre118 writes etypes as releases before 1.18 did: numbers only, the
// requested list space-separated, a failed TGS without a reply etype list.
func toPre118(line string) string {
	line = reEtypeList.ReplaceAllStringFunc(line, func(s string) string {
		m := reEtypeList.FindStringSubmatch(s)
		list := strings.ReplaceAll(reNamedEtype.ReplaceAllString(m[2], "$1"), ", ", " ")
		return "(" + m[1] + " etypes {" + list + "})"
	})
	line = strings.Replace(line, "etypes {rep=UNSUPPORTED:(0)} ", " ", 1)
	return reRepEtypes.ReplaceAllStringFunc(line, func(s string) string {
		inner := reRepEtypes.FindStringSubmatch(s)[1]
		inner = strings.ReplaceAll(reNamedEtype.ReplaceAllString(inner, "$1"), ", ", " ")
		return "etypes {rep=" + inner + "}"
	})
}

// toRFC3164 is the line as a syslog daemon writes it to a file.
func toRFC3164(line string) string {
	m := reFileHeader.FindStringSubmatch(line)
	if m == nil {
		return line
	}
	day := strings.TrimPrefix(m[2], "0")
	return m[1] + " " + strings.Repeat(" ", 2-len(day)) + day + " " + m[3] + " " + m[4] + " " + m[5] + "[" + m[6] + "]: " + line[len(m[0]):]
}

// toRFC5424 is the line as sent with RFC 5424 framing.
func toRFC5424(line string) string {
	m := reFileHeader.FindStringSubmatch(line)
	if m == nil {
		return line
	}
	return "<30>1 2026-11-30T" + m[3] + ".000000+00:00 " + m[4] + " " + m[5] + " " + m[6] + " - - " + line[len(m[0]):]
}

func rewrite(t *testing.T, from, to string, f func(string) string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	for i, l := range lines {
		if strings.HasSuffix(l, "\n") {
			lines[i] = f(strings.TrimSuffix(l, "\n")) + "\n"
		}
	}
	if err := os.WriteFile(to, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// countFile runs a Manager over one file from its start and returns the
// oracle families once every line is read.
func countFile(t *testing.T, path, typ string) series {
	t.Helper()
	tm := startManager(t, "", config.LogSource{Path: path, Type: typ, StartAt: "beginning",
		PollInterval: 10 * time.Millisecond, ProbePrincipals: fixtureProbes})
	waitValue(t, tm.reg, completeLines(t, path), "krb5_kdc_log_lines_read_total", "path", path)
	for _, reason := range []string{"no_header", "other_program", "unknown_message", "malformed", "too_long"} {
		if v := value(t, tm.reg, "krb5_kdc_log_lines_unparsed_total", "path", path, "reason", reason); v != 0 {
			t.Errorf("%s: %v lines not understood (%s)", filepath.Base(path), v, reason)
		}
	}
	got := gather(t, tm.reg)
	tm.stop()
	return got
}

// TestFixtures counts every captured log, and the same log rewritten in
// the pre-1.18 etype format and in both syslog framings: each must give
// exactly the counts the oracle reads from the original.
func TestFixtures(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			orig := filepath.Join("testdata", name)
			typ := "kdc"
			if strings.Contains(name, "kadmind") {
				typ = "kadmind"
			}
			want := oracle(t, fixtureProbes, orig)
			if len(want) < 3 {
				t.Fatalf("oracle found almost nothing in %s: %v", name, want)
			}
			compareSeries(t, countFile(t, orig, typ), want)
			for form, f := range map[string]func(string) string{
				"pre-1.18": toPre118, "rfc3164": toRFC3164, "rfc5424": toRFC5424,
				"rfc3164 pre-1.18": func(l string) string { return toRFC3164(toPre118(l)) },
			} {
				p := filepath.Join(t.TempDir(), name)
				rewrite(t, orig, p, f)
				t.Run(form, func(t *testing.T) { compareSeries(t, countFile(t, p, typ), want) })
			}
		})
	}
}

func TestRewrites(t *testing.T) {
	in := "Nov 30 06:35:19 kdc1 krb5kdc[5830](info): TGS_REQ (4 etypes {aes256-cts-hmac-sha384-192(20), DEPRECATED:arcfour-hmac(23), aes256-cts-hmac-sha1-96(18), aes128-cts-hmac-sha1-96(17)}) 127.0.0.1: LOOKING_UP_SERVER: authtime 0, etypes {rep=UNSUPPORTED:(0)} u@R for s@R, Server not found in Kerberos database"
	if got, want := toPre118(in), "Nov 30 06:35:19 kdc1 krb5kdc[5830](info): TGS_REQ (4 etypes {20 23 18 17}) 127.0.0.1: LOOKING_UP_SERVER: authtime 0,  u@R for s@R, Server not found in Kerberos database"; got != want {
		t.Errorf("toPre118:\n got %s\nwant %s", got, want)
	}
	issue := "Nov 03 06:35:19 kdc1 krb5kdc[5830](info): AS_REQ (1 etypes {aes256-cts-hmac-sha384-192(20)}) 127.0.0.1: ISSUE: authtime 1, etypes {rep=aes256-cts-hmac-sha384-192(20), tkt=DEPRECATED:arcfour-hmac(23), ses=aes256-cts-hmac-sha1-96(18)}, u@R for k@R"
	if got, want := toRFC3164(toPre118(issue)), "Nov  3 06:35:19 kdc1 krb5kdc[5830]: AS_REQ (1 etypes {20}) 127.0.0.1: ISSUE: authtime 1, etypes {rep=20 tkt=23 ses=18}, u@R for k@R"; got != want {
		t.Errorf("toRFC3164(toPre118):\n got %s\nwant %s", got, want)
	}
}
