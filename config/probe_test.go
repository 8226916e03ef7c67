package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"

	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// probeFiles creates the keytab (keys of every client the test
// configurations name) and password file they name, and returns yaml with
// KT and PW replaced.
func probeFiles(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	kt, pw := filepath.Join(dir, "probe.keytab"), filepath.Join(dir, "probe.pw")
	writeKeytab(t, kt, "krb5-exporter-probe@EXAMPLE.COM", "c@R")
	if err := os.WriteFile(pw, []byte("password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("KT", kt, "PW", pw).Replace(yaml)
}

// writeKeytab writes a 0600 keytab with an aes256-sha1 key of each
// principal (name@REALM).
func writeKeytab(t *testing.T, path string, principals ...string) {
	t.Helper()
	kt := keytab.New()
	for _, p := range principals {
		name, realm, _ := strings.Cut(p, "@")
		if err := kt.AddEntry(name, realm, "password", time.Unix(1e9, 0), 1, 18); err != nil {
			t.Fatal(err)
		}
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

const probeYAML = `modules:
  default:
    realm: EXAMPLE.COM
    client: krb5-exporter-probe
    keytab: KT
    service: HTTP/www.example.com
    transport: udp
    timeout: 3s
    udp_retransmit: 1s
    enctypes: [aes256-cts-hmac-sha384-192, aes256-sha1]
  pw:
    realm: EXAMPLE.COM
    client: probe@OTHER.COM
    password_file: PW
    transport: tcp
    preauth: spake
    preauth_upfront: true
probes:
  - name: kdc1
    address: kdc1.example.com:88
    module: default
    interval: 30s
  - name: kdc2-v6
    address: "[2001:db8::1]:88"
    module: pw
  - name: kdc3
    address: 192.0.2.3
    module: default
`

// TestProbeConfigHTTPS: a module of transport https with its CA file, a
// continuous probe whose address is the proxy's URL, and /probe's
// allow-list compared in canonical form (host case, port 443).
func TestProbeConfigHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := realmCA(ca); err != nil {
		t.Fatal(err)
	}
	y := probeFiles(t, `modules:
  p:
    realm: EXAMPLE.COM
    client: krb5-exporter-probe
    keytab: KT
    transport: https
    proxy_ca_file: `+ca+`
    proxy_server_name: ipa.example.com
    allowed_proxy_urls: ["https://IPA.example.com/KdcProxy", "https://10.0.0.1:8443/KdcProxy"]
probes:
  - {name: ipa, address: "https://ipa.example.com/KdcProxy", module: p}
`)
	cfg, err := Parse([]byte(y), "p.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Modules["p"]
	if pool, err := m.ProxyRoots(); err != nil || pool == nil {
		t.Fatalf("ProxyRoots: %v %v", pool, err)
	}
	for u, want := range map[string]bool{
		"https://ipa.example.com/KdcProxy":     true,
		"https://ipa.example.com:443/KdcProxy": true,
		"https://10.0.0.1:8443/KdcProxy":       true,
		"https://10.0.0.1/KdcProxy":            false,
		"https://ipa.example.com/kdcproxy":     false,
		"https://evil.example.com/KdcProxy":    false,
		"http://ipa.example.com/KdcProxy":      false,
	} {
		if got := m.AllowsProxyURL(u); got != want {
			t.Errorf("AllowsProxyURL(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestProbeConfig(t *testing.T) {
	cfg, err := Parse([]byte(probeFiles(t, probeYAML)), "p.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Modules["default"]
	if m.Timeout != 3*time.Second || m.UDPRetransmit != time.Second || len(m.Enctypes) != 2 || m.Service != "HTTP/www.example.com" {
		t.Errorf("default module %+v", m)
	}
	if m.EffectiveTimeout() != 3*time.Second || m.EffectiveTicketLifetime() != DefaultTicketLifetime {
		t.Errorf("effective timeout/lifetime %v %v", m.EffectiveTimeout(), m.EffectiveTicketLifetime())
	}
	pw := cfg.Modules["pw"]
	if pw.EffectiveTimeout() != DefaultProbeTimeout || !pw.PreauthUpfront || pw.Preauth != "spake" || pw.PasswordFile == "" || m.Preauth != "" {
		t.Errorf("pw module %+v", pw)
	}
	if cfg.Probes[0].EffectiveInterval() != 30*time.Second || cfg.Probes[1].EffectiveInterval() != DefaultProbeInterval {
		t.Errorf("intervals %v %v", cfg.Probes[0].EffectiveInterval(), cfg.Probes[1].EffectiveInterval())
	}
}

func TestCrossRealmModule(t *testing.T) {
	y := "modules:\n  x:\n    realm: R\n    client: c\n    keytab: KT\n    service: HTTP/app.b@B\n    realm_kdcs: {B: ['127.0.0.1:750', kdc.b]}\n" +
		"    allowed_kdcs: [127.0.0.1]\n"
	cfg, err := Parse([]byte(probeFiles(t, y)), "p.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Modules["x"]
	if !m.CrossRealm() || m.ServiceRealm() != "B" || len(m.RemoteKDCs()) != 2 {
		t.Errorf("cross-realm %v, service realm %q, remote KDCs %q", m.CrossRealm(), m.ServiceRealm(), m.RemoteKDCs())
	}
	local := ProbeModule{Realm: "R", Service: "HTTP/a"}
	if local.CrossRealm() || local.ServiceRealm() != "R" {
		t.Errorf("a service without a realm is in the module's: %v %q", local.CrossRealm(), local.ServiceRealm())
	}
}

func TestProbeConfigErrors(t *testing.T) {
	mod := "modules:\n  m:\n    realm: R\n    client: c\n    keytab: KT\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown key", mod + "    keytabs: /x\n", `p.yml:6: unknown key "keytabs"`},
		{"no realm", "modules:\n  m:\n    client: c\n    keytab: KT\n", "modules.m.realm: realm is required"},
		{"no client", "modules:\n  m:\n    realm: R\n    keytab: KT\n", "modules.m.client: empty principal"},
		{"no keys", "modules:\n  m:\n    realm: R\n    client: c\n", "one of keytab or password_file is required"},
		{"both keys", mod + "    password_file: PW\n", "keytab and password_file are exclusive"},
		{"bad transport", mod + "    transport: sctp\n", `p.yml:6: modules.m.transport: transport "sctp": want udp, tcp or https`},
		{"bad preauth", mod + "    preauth: pkinit\n", `p.yml:6: modules.m.preauth: preauth "pkinit": want auto, spake or encrypted_timestamp`},
		{"bad timeout", mod + "    timeout: soon\n", "p.yml:6: cannot unmarshal"},
		{"negative timeout", mod + "    timeout: -1s\n", "timeout must not be negative"},
		{"rc4", mod + "    enctypes: [aes256-sha2, arcfour-hmac]\n", `p.yml:6: modules.m.enctypes.1: unsupported enctype "arcfour-hmac"`},
		{"duplicate enctype", mod + "    enctypes: [aes256-sha2, aes256-cts-hmac-sha384-192]\n", "listed twice"},
		{"retransmit over tcp", mod + "    transport: tcp\n    udp_retransmit: 1s\n", "udp_retransmit applies to transport udp only"},
		{"bad client", "modules:\n  m:\n    realm: R\n    client: a//b\n    keytab: KT\n", "empty component"},
		{"bad service", mod + "    service: HTTP/x@R@S\n", "modules.m.service"},
		{"bad realm", "modules:\n  m:\n    realm: R S\n    client: c\n    keytab: KT\n", "invalid realm"},
		{"no target name", mod + "probes:\n  - address: k:88\n    module: m\n", "probes.0.name: name is required"},
		{"bad address", mod + "probes:\n  - name: a\n    address: 'k k:88'\n    module: m\n", "p.yml:8: probes.0.address"},
		{"empty port", mod + "probes:\n  - name: a\n    address: 'k:'\n    module: m\n", "bad port"},
		{"no module", mod + "probes:\n  - name: a\n    address: k\n", "probes.0.module: module is required"},
		{"unknown module", mod + "probes:\n  - name: a\n    address: k\n    module: n\n", `unknown module "n"`},
		{"short interval", mod + "probes:\n  - name: a\n    address: k\n    module: m\n    interval: 10ms\n", "below the minimum 1s"},
		{"missing keytab", "modules:\n  m:\n    realm: R\n    client: c\n    keytab: /nonexistent/k.keytab\n",
			"p.yml:5: modules.m.keytab: cannot open keytab: no such file or directory"},
		{"missing password file", "modules:\n  m:\n    realm: R\n    client: c\n    password_file: /nonexistent/p.pw\n",
			"p.yml:5: modules.m.password_file: cannot open password file: no such file or directory"},
		{"timeout too long", mod + "    timeout: 2562047h\n", "p.yml:6: modules.m.timeout: timeout 2562047h0m0s is above the maximum 1m0s"},
		{"lifetime too long", mod + "    ticket_lifetime: 2562047h\n", "p.yml:6: modules.m.ticket_lifetime: ticket_lifetime 2562047h0m0s is above the maximum"},
		{"interval too long", mod + "probes:\n  - {name: a, address: k, module: m, interval: 2562047h}\n", "p.yml:7: probes.0.interval: interval 2562047h0m0s is above the maximum 24h0m0s"},
		{"port 0", mod + "probes:\n  - {name: a, address: 'k:0', module: m}\n", `p.yml:7: probes.0.address: address "k:0": bad port "0"`},
		{"bad allowed kdc", mod + "    allowed_kdcs: [kdc1, 'k k']\n", `p.yml:6: modules.m.allowed_kdcs.1: KDC pattern "k k"`},
		{"s2k cap too low", mod + "    max_s2k_iterations: 1000\n", "p.yml:6: modules.m.max_s2k_iterations: max_s2k_iterations 1000: want 4096 to 16777216"},
		{"s2k cap too high", mod + "    max_s2k_iterations: 16777217\n", "p.yml:6: modules.m.max_s2k_iterations"},
		{"allowed kdc port 0", mod + "    allowed_kdcs: ['10.0.0.1:0']\n", `modules.m.allowed_kdcs.0: KDC pattern "10.0.0.1:0": bad port "0"`},
		{"cross-realm without kdcs", mod + "    service: HTTP/x@B\n", "p.yml:6: modules.m.service: service \"HTTP/x@B\" is in realm B: list that realm's KDCs in realm_kdcs"},
		{"realm kdcs of another realm", mod + "    service: HTTP/x@B\n    realm_kdcs: {B: [kb], C: [kc]}\n", "p.yml:7: modules.m.realm_kdcs.C: realm_kdcs lists C, but the service is in realm B"},
		{"realm kdcs of own realm", mod + "    realm_kdcs: {R: [k]}\n", "p.yml:6: modules.m.realm_kdcs.R: realm_kdcs lists the module's own realm R"},
		{"cross-realm through a proxy", mod + "    service: HTTP/x@B\n    transport: https\n    realm_kdcs: {B: [kb]}\n", "p.yml:7: modules.m.transport: a service of another realm is probed over udp or tcp"},
		{"bad realm kdc", mod + "    service: HTTP/x@B\n    realm_kdcs:\n      B: [kb, 'k k']\n", `p.yml:8: modules.m.realm_kdcs.B.1: address "k k"`},
		{"https with allowed_kdcs", mod + "    transport: https\n    allowed_kdcs: [k]\n", "p.yml:7: modules.m.allowed_kdcs: allowed_kdcs applies to transport udp and tcp"},
		{"proxy ca over udp", mod + "    proxy_ca_file: /x\n", "p.yml:6: modules.m.proxy_ca_file: proxy_ca_file applies to transport https only"},
		{"proxy urls over tcp", mod + "    transport: tcp\n    allowed_proxy_urls: ['https://p/']\n", "p.yml:7: modules.m.allowed_proxy_urls: allowed_proxy_urls applies to transport https only"},
		{"http proxy url", mod + "    transport: https\n    allowed_proxy_urls: ['https://p/', 'http://p/KdcProxy']\n", `p.yml:7: modules.m.allowed_proxy_urls.1: proxy URL "http://p/KdcProxy": want https://host[:port]/path`},
		{"proxy url with user", mod + "    transport: https\n    allowed_proxy_urls: ['https://u:secret@p/']\n", "p.yml:7: modules.m.allowed_proxy_urls.0: proxy URL must not carry user information"},
		{"bad server name", mod + "    transport: https\n    proxy_server_name: 'p:443'\n", `p.yml:7: modules.m.proxy_server_name: proxy_server_name "p:443": want a host name or an IP address`},
		{"missing proxy ca", mod + "    transport: https\n    proxy_ca_file: /nonexistent/ca.pem\n", "p.yml:7: modules.m.proxy_ca_file: cannot open proxy CA file: no such file or directory"},
		{"proxy ca not pem", mod + "    transport: https\n    proxy_ca_file: PW\n", "p.yml:7: modules.m.proxy_ca_file: proxy CA file holds no PEM certificate"},
		{"retransmit over https", mod + "    transport: https\n    udp_retransmit: 1s\n", "udp_retransmit applies to transport udp only"},
		{"url for a udp module", mod + "probes:\n  - {name: a, address: 'https://p/KdcProxy', module: m}\n", `p.yml:7: probes.0.address: address "https://p/KdcProxy" is a URL: module "m" must be of transport https`},
		{"kdc for an https module", mod + "    transport: https\nprobes:\n  - {name: a, address: 'k:88', module: m}\n", `p.yml:8: probes.0.address: module "m" is of transport https: the address must be the proxy's https:// URL`},
		{"bad proxy address", mod + "    transport: https\nprobes:\n  - {name: a, address: 'https://p:0/', module: m}\n", `p.yml:8: probes.0.address: proxy URL "https://p:0/": bad port "0"`},
		{"duplicate name", mod + "probes:\n  - {name: a, address: k, module: m}\n  - {name: a, address: j, module: m}\n", `duplicate probe name "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(probeFiles(t, tc.yaml)), "p.yml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// TestProxyCAWritableByOthers: a proxy CA file its group or other users
// can write is refused at its line, as keys readable by others are: any
// of them could make a proxy trusted; go-w, it loads.
func TestProxyCAWritableByOthers(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := realmCA(ca); err != nil {
		t.Fatal(err)
	}
	y := probeFiles(t, "modules:\n  m:\n    realm: R\n    client: c\n    keytab: KT\n    transport: https\n    proxy_ca_file: "+ca+"\n")
	for mode, want := range map[os.FileMode]string{
		0o666: "p.yml:7: modules.m.proxy_ca_file: proxy CA file is writable by users other than its owner (mode 0666)",
		0o620: "(mode 0620)",
		0o602: "(mode 0602)",
		0o644: "",
	} {
		if err := os.Chmod(ca, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Parse([]byte(y), "p.yml")
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("mode %04o: %v, want %q", mode, err, want)
		}
	}
}

// TestLoadDeferringKeys: a module whose keytab is truncated fails Load
// (--config.check) at its keytab line, while LoadDeferringKeys (the
// daemon's) returns the configuration with the same finding for that
// module alone, naming the configuration file and line, not the keytab.
func TestLoadDeferringKeys(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.keytab"), filepath.Join(dir, "bad.keytab")
	testutil.WriteKeytab(t, good, "probe@EXAMPLE.COM", "secret")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.yml")
	os.WriteFile(cfg, []byte("modules:\n  good:\n    realm: EXAMPLE.COM\n    client: probe\n    keytab: "+good+
		"\n  bad:\n    realm: EXAMPLE.COM\n    client: probe\n    keytab: "+bad+"\n"), 0o600)
	want := cfg + ":9: modules.bad.keytab: malformed keytab"
	if _, err := Load(cfg); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Load: %v, want %q...", err, want)
	}
	c, err := LoadDeferringKeys(cfg)
	if err != nil {
		t.Fatalf("LoadDeferringKeys: %v", err)
	}
	if err := c.KeyFileError("bad"); err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), bad) {
		t.Errorf("KeyFileError(bad) = %v, want %q... without the keytab's path", err, want)
	}
	if err := c.KeyFileError("good"); err != nil {
		t.Errorf("KeyFileError(good) = %v", err)
	}
}

// TestKadmindProberConfig: the kpasswd and kadmin probers' fields, each
// error at its file:line.
func TestKadmindProberConfig(t *testing.T) {
	kp := "modules:\n  m:\n    prober: kpasswd\n    realm: R\n    client: c\n    keytab: KT\n"
	ka := "modules:\n  m:\n    prober: kadmin\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown prober", "modules:\n  m:\n    prober: ldap\n", `p.yml:3: modules.m.prober: prober "ldap": want kdc, kpasswd or kadmin`},
		{"kpasswd without kdc", kp, "p.yml:3: modules.m.prober: prober kpasswd needs kdc"},
		{"kpasswd bad kdc", kp + "    kdc: 'k k:88'\n", "p.yml:7: modules.m.kdc"},
		{"kpasswd with service", kp + "    kdc: k\n    service: HTTP/x\n", "p.yml:8: modules.m.service: service does not apply to prober kpasswd"},
		{"kpasswd without keys", "modules:\n  m:\n    prober: kpasswd\n    realm: R\n    client: c\n    kdc: k\n", "one of keytab or password_file is required"},
		{"kdc on a kdc prober", "modules:\n  m:\n    realm: R\n    client: c\n    keytab: KT\n    kdc: k\n", "p.yml:6: modules.m.kdc: kdc applies to prober kpasswd only"},
		{"kadmin with keytab", ka + "    keytab: KT\n", "p.yml:4: modules.m.keytab: keytab does not apply to prober kadmin"},
		{"kadmin with client", ka + "    client: c\n", "p.yml:4: modules.m.client: client does not apply"},
		{"kadmin over udp", ka + "    transport: udp\n", `p.yml:4: modules.m.transport: transport "udp": kadmind's RPC is tcp only`},
		{"kadmin timeout", ka + "    timeout: 2h\n", "p.yml:4: modules.m.timeout: timeout 2h0m0s is above the maximum"},
		{"kadmin allowed", ka + "    allowed_kdcs: ['k k']\n", "p.yml:4: modules.m.allowed_kdcs.0"},
		{"kpasswd over https", kp + "    kdc: k\n    transport: https\n", "p.yml:8: modules.m.transport: transport https: kpasswd goes to kadmind over udp or tcp"},
		{"kadmin proxy ca", ka + "    proxy_ca_file: /x\n", "p.yml:4: modules.m.proxy_ca_file: proxy_ca_file does not apply to prober kadmin"},
		{"kpasswd cross-realm", kp + "    kdc: k\n    realm_kdcs: {B: [kb]}\n", "p.yml:8: modules.m.realm_kdcs: realm_kdcs does not apply to prober kpasswd"},
		{"kadmin cross-realm", ka + "    realm_kdcs: {B: [kb]}\n", "p.yml:4: modules.m.realm_kdcs: realm_kdcs does not apply to prober kadmin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(probeFiles(t, tc.yaml)), "p.yml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
	for _, y := range []string{ka, ka + "    transport: tcp\n    allowed_kdcs: [127.0.0.1]\nprobes:\n  - {name: a, address: 127.0.0.1, module: m}\n",
		kp + "    kdc: 127.0.0.1:88\n    transport: tcp\n"} {
		if _, err := Parse([]byte(probeFiles(t, y)), "p.yml"); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
}

// realmCA writes a self-signed CA certificate (config's tests do not link
// the harness, which makes the real ones).
func realmCA(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}
