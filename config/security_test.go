package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A key file others can read is refused at load (file:line, the fix in
// words) unless the module says allow_readable_keys; a FIFO in its place
// does not hang the check; the error never names the key file.
func TestKeyFilePermissions(t *testing.T) {
	dir := t.TempDir()
	kt := filepath.Join(dir, "probe.keytab")
	if err := os.WriteFile(kt, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	yml := func(extra string) []byte {
		return []byte("modules:\n  m:\n    realm: R\n    client: c\n    keytab: " + kt + "\n" + extra)
	}
	if _, err := Parse(yml(""), "p.yml"); err != nil {
		t.Fatalf("0600 keytab: %v", err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644} {
		if err := os.Chmod(kt, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Parse(yml(""), "p.yml")
		if err == nil || !strings.HasPrefix(err.Error(), "p.yml:5: modules.m.keytab: keytab is readable by users other than its owner") ||
			!strings.Contains(err.Error(), "allow_readable_keys: true") {
			t.Errorf("mode %04o: %v", mode, err)
		}
		if err != nil && strings.Contains(err.Error(), kt) {
			t.Errorf("mode %04o: the error names the keytab: %v", mode, err)
		}
		if _, err := Parse(yml("    allow_readable_keys: true\n"), "p.yml"); err != nil {
			t.Errorf("mode %04o with allow_readable_keys: %v", mode, err)
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Parse([]byte("modules:\n  m:\n    realm: R\n    client: c\n    password_file: "+fifo+"\n"), "p.yml")
	if err == nil || !strings.Contains(err.Error(), "p.yml:5: modules.m.password_file: password file is not a regular file") {
		t.Errorf("FIFO: %v", err)
	}
	_, err = Parse([]byte("modules:\n  m:\n    realm: R\n    client: c\n    keytab: "+dir+"/missing\n"), "p.yml")
	if err == nil || strings.Contains(err.Error(), dir) {
		t.Errorf("missing keytab: the error must not name it: %v", err)
	}
}

func TestSecondDocumentIsAnError(t *testing.T) {
	_, err := Parse([]byte("logs: []\n---\nbogus: 1\n"), "x.yml")
	if err == nil || !strings.Contains(err.Error(), "x.yml:2: a second YAML document") {
		t.Errorf("got %v", err)
	}
	if _, err := Parse([]byte("---\nlogs: []\n"), "x.yml"); err != nil {
		t.Errorf("one document with a leading ---: %v", err)
	}
}

func TestAllowsKDC(t *testing.T) {
	m := ProbeModule{AllowedKDCs: []string{"kdc1.example.com", "kdc2.example.com:750", "10.1.0.0/16", "192.0.2.7", "[2001:db8::1]:88", "127.0.0.1:8888"}}
	for addr, want := range map[string]bool{
		"kdc1.example.com:88":  true,
		"KDC1.example.com.:88": true,
		"kdc1.example.com:750": true,
		"kdc2.example.com:750": true,
		"kdc2.example.com:88":  false,
		"kdc3.example.com:88":  false,
		"10.1.2.3:88":          true,
		"10.2.0.1:88":          false,
		"[::ffff:10.1.2.3]:88": true,
		"192.0.2.7:88":         true,
		"192.0.2.8:88":         false,
		"[2001:db8::1]:88":     true,
		"[2001:db8::1]:89":     false,
		"127.0.0.1:8888":       true,
		"127.0.0.1:8889":       false,
		"kdc1.example.com":     true,
		"10.1.0.1":             true,
		"evil.example.com:88":  false,
	} {
		if got := m.AllowsKDC(addr); got != want {
			t.Errorf("AllowsKDC(%q) = %v, want %v", addr, got, want)
		}
	}
	if (&ProbeModule{}).AllowsKDC("127.0.0.1:88") {
		t.Error("a module without allowed_kdcs allows a KDC")
	}
}
