package krb5profile

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

func mustProfile(t *testing.T, paths ...string) *Profile {
	t.Helper()
	p, err := Load(paths[:1], paths[1:], nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProfileSyntax(t *testing.T) {
	dir := t.TempDir()
	path := testutil.WriteFile(t, dir, "kdc.conf", `this line comes before any section and is ignored, as in MIT
 [indented] headers are ignored before the first section too
[kdcdefaults]
	kdc_tcp_listen_backlog = 20   
# a comment
	; another comment
[realms]
	A.TEST = {
		quoted = "a \"b\"\tc\\" ignored after the quote
		hash = value # not a comment: part of the value
		nested = {
			deep = 1
		}
	}
	B.TEST =
	{
		x = 2
	}
[realms]
	C.TEST = {
		y = 3
	}
`)
	p := mustProfile(t, path)
	for _, c := range []struct {
		path []string
		want string
		ok   bool
	}{
		{[]string{"kdcdefaults", "kdc_tcp_listen_backlog"}, "20", true},
		{[]string{"realms", "A.TEST", "quoted"}, "a \"b\"\tc\\", true},
		{[]string{"realms", "A.TEST", "hash"}, "value # not a comment: part of the value", true},
		{[]string{"realms", "A.TEST", "nested", "deep"}, "1", true},
		{[]string{"realms", "B.TEST", "x"}, "2", true},
		{[]string{"realms", "C.TEST", "y"}, "3", true},
		{[]string{"realms", "A.TEST", "nested"}, "", false}, // a subsection is not a value
		{[]string{"indented"}, "", false},
	} {
		v, ok := p.Get(c.path...)
		if v != c.want || ok != c.ok {
			t.Errorf("get(%v) = %q, %v; want %q, %v", c.path, v, ok, c.want, c.ok)
		}
	}
	if got := strings.Join(p.Subsections("realms"), " "); got != "A.TEST B.TEST C.TEST" {
		t.Errorf("realms = %q (repeated [realms] headers merge)", got)
	}
}

func TestProfileErrors(t *testing.T) {
	for name, c := range map[string]struct {
		text, want string
		line       int
	}{
		"missing equals":  {"[realms]\n\tA.TEST {\n", "expected 'tag = value'", 2},
		"space in tag":    {"[realms]\n\tfoo bar = 1\n", "contains white space", 2},
		"extra brace":     {"[realms]\n\tx = 1\n}\n", "without a matching", 3},
		"unclosed":        {"[realms]\n\tA.TEST = {\n\t\tx = 1\n", "missing '}'", 3},
		"section inside":  {"[realms]\n\tA.TEST = {\n[libdefaults]\n", "inside subsection", 3},
		"bad header":      {"[realms\n", "bad section header", 1},
		"text after hdr":  {"[realms] x\n", "text after section header", 1},
		"no brace":        {"[realms]\n\tA.TEST =\n\tx = 1\n", "missing '{'", 3},
		"text after {":    {"[realms]\n\tA.TEST = { x = 1 }\n", "text after '{'", 2},
		"module":          {"module /lib/x.so:residual\n[realms]\n", "module directive", 1},
		"missing include": {"include /nonexistent/krb5-exporter-test.conf\n", "no such file", 0},
	} {
		t.Run(name, func(t *testing.T) {
			path := testutil.WriteFile(t, t.TempDir(), "kdc.conf", c.text)
			_, err := ParseFile(path)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if !strings.Contains(err.Error(), c.want) || pe.Line != c.line {
				t.Errorf("err = %q (line %d), want %q at line %d", err, pe.Line, c.want, c.line)
			}
		})
	}
}

func TestProfileIncludes(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteFile(t, dir, "d/10-realm", "[realms]\n\tA.TEST = {\n\t\tfrom = dir\n\t}\n")
	testutil.WriteFile(t, dir, "d/20.conf", "[kdcdefaults]\n\tkdc_tcp_listen_backlog = 7\n")
	testutil.WriteFile(t, dir, "d/skip.bak", "not a profile at all {{{\n")
	testutil.WriteFile(t, dir, "d/.hidden.conf", "not a profile at all {{{\n")
	testutil.WriteFile(t, dir, "inc.conf", "[libdefaults]\n\tspake_preauth_groups = edwards25519\n")
	main := testutil.WriteFile(t, dir, "kdc.conf", "include "+filepath.Join(dir, "inc.conf")+"\nincludedir "+filepath.Join(dir, "d")+"\n[realms]\n\tA.TEST = {\n\t\tmain = yes\n\t}\n")
	f, err := ParseFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Files) != 4 {
		t.Errorf("files read: %v, want the main file, inc.conf, 10-realm and 20.conf", f.Files)
	}
	p := &Profile{Files: []*File{f}, KDCFiles: 1}
	for path, want := range map[string]string{
		"libdefaults/spake_preauth_groups":   "edwards25519",
		"kdcdefaults/kdc_tcp_listen_backlog": "7",
		"realms/A.TEST/from":                 "dir",
		"realms/A.TEST/main":                 "yes",
	} {
		if v, _ := p.Get(strings.Split(path, "/")...); v != want {
			t.Errorf("%s = %q, want %q", path, v, want)
		}
	}

	loop := testutil.WriteFile(t, dir, "loop.conf", "include "+filepath.Join(dir, "loop.conf")+"\n")
	if _, err := ParseFile(loop); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("include loop: err = %v", err)
	}
}

// TestProfileFinal: the first file wins; a node marked final with '*'
// hides what later files say under it.
func TestProfileFinal(t *testing.T) {
	dir := t.TempDir()
	kdc := testutil.WriteFile(t, dir, "kdc.conf", `[libdefaults]*
	default_realm = KDC.TEST
[realms]
	A.TEST = {
		x = kdc
	}*
	B.TEST = {
		x* = kdc
	}
[dbmodules]
	m = {
		db_library = klmdb
	}
`)
	krb5 := testutil.WriteFile(t, dir, "krb5.conf", `[libdefaults]
	spake_preauth_groups = edwards25519
[realms]
	A.TEST = {
		y = krb5
	}
	B.TEST = {
		y = krb5
	}
[dbmodules]
	m = {
		db_library = db2
		disable_last_success = true
	}
`)
	p := mustProfile(t, kdc, krb5)
	for path, want := range map[string]string{
		"libdefaults/default_realm":        "KDC.TEST",
		"libdefaults/spake_preauth_groups": "", // [libdefaults]* in kdc.conf
		"realms/A.TEST/x":                  "kdc",
		"realms/A.TEST/y":                  "", // A.TEST = {...}* in kdc.conf
		"realms/B.TEST/y":                  "krb5",
		"dbmodules/m/db_library":           "klmdb", // first file wins
		"dbmodules/m/disable_last_success": "true",  // not final: merged
	} {
		if v, _ := p.Get(strings.Split(path, "/")...); v != want {
			t.Errorf("%s = %q, want %q", path, v, want)
		}
	}
}

// A FIFO at kdc.conf's path, or at a file it includes, is a parse error
// at once (issue 26: a blocking read of a FIFO hung every scrape).
func TestProfileFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.conf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	main := testutil.WriteFile(t, dir, "kdc.conf", "include "+fifo+"\n")
	for _, p := range []string{fifo, main} {
		done := make(chan error, 1)
		go func() {
			_, err := ParseFile(p)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "a FIFO") {
				t.Errorf("%s: %v, want an error naming the FIFO", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still parsing after 5 s", p)
		}
	}
}
