package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A key file others can read is refused at load (file:line, the fix in
// words) unless the module says allow_readable_keys; a FIFO in its place
// does not hang the check; the error never names the key file.
func TestKeyFilePermissions(t *testing.T) {
	dir := t.TempDir()
	kt := filepath.Join(dir, "probe.keytab")
	writeKeytab(t, kt, "c@R")
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
	if err == nil || !strings.Contains(err.Error(), "p.yml:5: modules.m.password_file: cannot open password file: not a regular file: a FIFO") {
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
	m := ProbeModule{AllowedKDCs: []string{"kdc1.example.com", "kdc2.example.com:750", "10.1.0.0/16", "192.0.2.7", "[2001:db8::1]:88", "127.0.0.1:8888",
		"10.8.0.0/16:88", "[2001:db8:1::/48]:750"}}
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
		// CIDRs with a port: in the net at the port only.
		"10.8.255.255:88":          true,
		"10.8.0.1":                 true,
		"10.8.0.1:89":              false,
		"10.9.0.0:88":              false,
		"[2001:db8:1:ffff::1]:750": true,
		"[2001:db8:1::1]:88":       false,
		"[2001:db8:2::1]:750":      false,
		"[::ffff:10.8.1.1]:88":     true,
	} {
		if got := m.AllowsKDC(addr); got != want {
			t.Errorf("AllowsKDC(%q) = %v, want %v", addr, got, want)
		}
	}
	if (&ProbeModule{}).AllowsKDC("127.0.0.1:88") {
		t.Error("a module without allowed_kdcs allows a KDC")
	}
}

// TestKDCPatternCIDRWithPort: docs/security.md and the error message allow
// a CIDR with :port (an IPv6 one in brackets, as an IPv6 address); the
// port's and the prefix length's edges are accepted, one past them and an
// IPv6 CIDR with a port but no brackets are refused.
func TestKDCPatternCIDRWithPort(t *testing.T) {
	for s, want := range map[string]kdcPattern{
		"10.0.0.0/8:88":         {prefix: netip.MustParsePrefix("10.0.0.0/8"), port: 88},
		"10.1.2.3/8:1":          {prefix: netip.MustParsePrefix("10.0.0.0/8"), port: 1},
		"0.0.0.0/0:65535":       {prefix: netip.MustParsePrefix("0.0.0.0/0"), port: 65535},
		"192.0.2.7/32:kerberos": {prefix: netip.MustParsePrefix("192.0.2.7/32"), port: 88},
		"[::1/128]:88":          {prefix: netip.MustParsePrefix("::1/128"), port: 88},
		"[2001:db8::/32]:750":   {prefix: netip.MustParsePrefix("2001:db8::/32"), port: 750},
		"[2001:db8::/32]":       {prefix: netip.MustParsePrefix("2001:db8::/32")},
		"2001:db8::/32":         {prefix: netip.MustParsePrefix("2001:db8::/32")},
		"10.0.0.0/8":            {prefix: netip.MustParsePrefix("10.0.0.0/8")},
	} {
		got, err := parseKDCPattern(s)
		if err != nil || got != want {
			t.Errorf("parseKDCPattern(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	// The entries docs/security.md shows parse.
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	if m := regexp.MustCompile(`allowed_kdcs: \[(.*)\]`).FindSubmatch(doc); m != nil {
		for _, e := range strings.Split(string(m[1]), ",") {
			shown = append(shown, strings.Trim(strings.TrimSpace(e), `"`))
		}
	}
	if m := regexp.MustCompile("in brackets: `([^`]+)`, `([^`]+)`").FindSubmatch(doc); m != nil {
		shown = append(shown, string(m[1]), string(m[2]))
	}
	if len(shown) < 6 {
		t.Fatalf("docs/security.md: found only %q", shown)
	}
	for _, e := range shown {
		if _, err := parseKDCPattern(e); err != nil {
			t.Errorf("docs/security.md's %q: %v", e, err)
		}
	}
	for s, want := range map[string]string{
		"10.0.0.0/8:0":     `bad port "0"`,
		"10.0.0.0/8:65536": `bad port "65536"`,
		"10.0.0.0/8:":      `bad port ""`,
		"10.0.0.0/33:88":   "want a host name, an IP address or a CIDR",
		"[::1/129]:88":     "want a host name, an IP address or a CIDR",
		"2001:db8::/32:88": "want a host name, an IP address or a CIDR",
		"10.0.0.0/8:88:88": "want a host name, an IP address or a CIDR",
		"kdc.example/8:88": "want a host name, an IP address or a CIDR",
	} {
		if _, err := parseKDCPattern(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseKDCPattern(%q) = %v, want an error containing %q", s, err, want)
		}
	}
}

// Files where the configuration expects regular files (issue 26 items 5
// and 8): a configuration file that is a FIFO or /dev/zero, or larger than
// MaxFileSize, fails Load at once; a log path naming a FIFO fails with
// file:line; an empty, truncated, oversized keytab, or one without the
// client's key, fails at load with the keytab's line and quotes none of
// its bytes.
func TestFilesThatAreNotWhatTheyShouldBe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yml")
	os.WriteFile(big, []byte("logs: []\n"+strings.Repeat("#\n", MaxFileSize/2)), 0o600)
	for path, want := range map[string]string{
		fifo:        "not a regular file: a FIFO",
		"/dev/zero": "not a regular file: a device",
		big:         "file too large: more than 4194304 bytes",
	} {
		done := make(chan error, 1)
		go func() {
			_, err := Load(path)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Load(%s): %v, want %q", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) still running after 5 s", path)
		}
	}

	_, err := Parse([]byte("logs:\n  - path: /var/log/ok.log\n    type: kdc\n  - path: "+fifo+"\n    type: kadmind\n"), "c.yml")
	if err == nil || !strings.Contains(err.Error(), "c.yml:4: logs.1.path: log file \""+fifo+"\": not a regular file: a FIFO") {
		t.Errorf("FIFO log path: %v", err)
	}

	good := filepath.Join(dir, "good.keytab")
	writeKeytab(t, good, "c@R", "other@R")
	kt, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	keytabs := map[string][]byte{
		"empty":                               nil,
		"truncated":                           kt[:len(kt)-5],
		"too large":                           append(append([]byte{}, kt...), make([]byte, maxModuleKeytab)...),
		"without the client's key (wrong.kt)": kt,
	}
	wants := map[string]string{
		"empty":                               "malformed keytab: not a keytab (bad header)",
		"truncated":                           "malformed keytab: entry 2 is truncated",
		"too large":                           "cannot read keytab: file too large: more than 1048576 bytes",
		"without the client's key (wrong.kt)": "no AES key for nobody@R",
	}
	for name, b := range keytabs {
		path := filepath.Join(dir, "k.keytab")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		client := "c"
		if name == "without the client's key (wrong.kt)" {
			client = "nobody"
		}
		_, err := Parse([]byte("modules:\n  m:\n    realm: R\n    client: "+client+"\n    keytab: "+path+"\n"), "p.yml")
		if err == nil || !strings.Contains(err.Error(), "p.yml:5: modules.m.keytab: "+wants[name]) {
			t.Errorf("%s keytab: %v, want %q", name, err, wants[name])
			continue
		}
		if strings.Contains(err.Error(), path) {
			t.Errorf("%s keytab: the error names the keytab: %v", name, err)
		}
		// No 8 bytes of the file in the error (keys, names).
		for i := 0; i+8 <= len(kt); i++ {
			if strings.Contains(err.Error(), string(kt[i:i+8])) && !strings.Contains(wants[name], string(kt[i:i+8])) {
				t.Errorf("%s keytab: the error quotes the file at %d: %v", name, i, err)
				break
			}
		}
	}
	if _, err := Parse([]byte("modules:\n  m:\n    realm: R\n    client: c\n    keytab: "+good+"\n"), "p.yml"); err != nil {
		t.Errorf("good keytab: %v", err)
	}
}
