package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/enctype"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcaddr"
	"github.com/krb5-exporter/krb5-exporter/internal/keytab"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// ProbeModule says how to probe a KDC: realm, who logs in with what, and
// which service ticket to ask for. Secrets stay in the files named here,
// never in a URL, a label or a log line.
//
//	modules:
//	  default:
//	    realm: EXAMPLE.COM
//	    client: krb5-exporter-probe          # realm defaults to `realm`
//	    keytab: /etc/krb5-exporter/probe.keytab
//	    service: HTTP/www.example.com         # optional: TGS exchange too
//	    transport: udp                        # or tcp
//	    timeout: 5s                           # per exchange
//	    udp_retransmit: 1s                    # as libkrb5; 0 = never resend
//	    preauth: auto                         # or spake, encrypted_timestamp
//	    allowed_kdcs: [kdc1.example.com, 10.1.0.0/16]   # for /probe
//	  proxy:                                  # through a KDC proxy ([MS-KKDCP])
//	    realm: EXAMPLE.COM
//	    client: krb5-exporter-probe
//	    keytab: /etc/krb5-exporter/probe.keytab
//	    transport: https                      # the target is the proxy's URL
//	    proxy_ca_file: /etc/ipa/ca.crt        # default: the system's roots
//	    proxy_server_name: ipa.example.com    # default: the URL's host
//	    allowed_proxy_urls: [https://ipa.example.com/KdcProxy]   # for /probe
//
// prober: kpasswd probes kadmind's password-change service instead (the
// target is kadmind, port 464 by default): a login for kadmin/changepw at
// `kdc`, then a kpasswd request kadmind must refuse without changing
// anything. prober: kadmin probes kadmind's admin RPC (the target is
// kadmind, port 749 by default) with no keys at all:
//
//	kpasswd:
//	  prober: kpasswd
//	  realm: EXAMPLE.COM
//	  client: krb5-exporter-probe
//	  keytab: /etc/krb5-exporter/probe.keytab
//	  kdc: kdc1.example.com:88              # where the login goes
//	  transport: udp                        # both exchanges
//	kadmin:
//	  prober: kadmin
//	  timeout: 5s
type ProbeModule struct {
	Realm string `yaml:"realm"`
	// Client is the principal that logs in ("name" or "name@REALM").
	Client string `yaml:"client"`
	// Keytab holds the client's keys (the normal case); it is re-read when
	// it changes. Exactly one of Keytab and PasswordFile.
	Keytab string `yaml:"keytab"`
	// PasswordFile holds the client's password on its first line; the keys
	// are derived once, not per login.
	PasswordFile string `yaml:"password_file"`
	// Service is the service principal of the TGS exchange; empty: AS only.
	Service string `yaml:"service"`
	// Transport is udp (default), tcp or https: through a KDC proxy
	// ([MS-KKDCP]), whose URL is then the target (a probe's address, the
	// target of /probe).
	Transport string `yaml:"transport"`
	// ProxyCAFile (https) holds the PEM certificates of the CAs that may
	// sign the proxy's certificate; default the system's roots. The
	// certificate is always verified; the probes read the file again when
	// it changes.
	ProxyCAFile string `yaml:"proxy_ca_file"`
	// ProxyServerName (https) is the name the proxy's certificate must
	// carry; default the URL's host.
	ProxyServerName string `yaml:"proxy_server_name"`
	// AllowedProxyURLs (https) are the proxy URLs /probe may use this
	// module against, compared exactly (host case and a default port 443
	// aside). Empty: /probe refuses the module, as allowed_kdcs.
	AllowedProxyURLs []string `yaml:"allowed_proxy_urls"`
	// Timeout bounds each exchange (AS, TGS); default 5s.
	Timeout time.Duration `yaml:"timeout"`
	// Preauth is the pre-authentication method: auto (default: SPAKE when
	// the KDC offers it, else encrypted timestamp, as kinit), spake (only;
	// a KDC without it fails the probe with preauth_unsupported) or
	// encrypted_timestamp.
	Preauth string `yaml:"preauth"`
	// PreauthUpfront pre-authenticates in the first AS-REQ, as a client that
	// remembers the KDC wants it: encrypted timestamp in one round trip
	// instead of two (with preauth: spake, the SPAKE support message: two
	// round trips instead of three).
	PreauthUpfront bool `yaml:"preauth_upfront"`
	// Enctypes are offered in this order; default the four RHEL 9 AES types
	// (aes256-cts-hmac-sha384-192, aes128-cts-hmac-sha256-128,
	// aes256-cts-hmac-sha1-96, aes128-cts-hmac-sha1-96).
	Enctypes []string `yaml:"enctypes"`
	// UDPRetransmit resends an unanswered UDP request after this long, then
	// after twice as long each time (libkrb5 uses 1s); 0 never resends.
	UDPRetransmit time.Duration `yaml:"udp_retransmit"`
	// TicketLifetime is the lifetime requested for tickets; default 10h.
	TicketLifetime time.Duration `yaml:"ticket_lifetime"`
	// AllowedKDCs are the KDCs /probe may use this module against: host
	// names (matched by name), IP addresses and CIDRs (matched against IP
	// targets), each optionally with :port. Empty: /probe refuses the
	// module (its requests carry key-derived data). The continuous probes
	// of `probes` are not affected.
	AllowedKDCs []string `yaml:"allowed_kdcs"`
	// MaxS2KIterations caps the PBKDF2 iterations a KDC may ask a
	// password_file module for (default 65536; MIT's defaults are 4096 and
	// 32768): beyond it the login fails as malformed_reply instead of
	// spending the exporter's CPU.
	MaxS2KIterations uint32 `yaml:"max_s2k_iterations"`
	// AllowReadableKeys accepts a keytab or password file that users other
	// than its owner may read (by default such a module does not load).
	AllowReadableKeys bool `yaml:"allow_readable_keys"`
	// Prober is what the module probes: kdc (default: AS and TGS
	// exchanges with the target KDC), kpasswd (kadmind's password-change
	// service at the target, port 464, after a login for kadmin/changepw
	// at KDC) or kadmin (kadmind's admin RPC at the target, port 749: no
	// keys, no realm). For kpasswd and kadmin, allowed_kdcs lists the
	// kadmind servers /probe may be pointed at.
	Prober string `yaml:"prober"`
	// KDC is the KDC the kpasswd prober logs in at (host:port, or a host:
	// port 88); required with prober: kpasswd, refused otherwise.
	KDC string `yaml:"kdc"`
	// RealmKDCs are the KDCs of the realm of a cross-realm service (a
	// service@OTHER.REALM): the probe logs in to the target KDC, asks it
	// for krbtgt/OTHER.REALM@REALM and asks these KDCs, in order until one
	// answers, for the service ticket. /probe uses such a module only if
	// allowed_kdcs allows each of them too.
	//
	//	service: HTTP/app.partner.example@PARTNER.EXAMPLE
	//	realm_kdcs:
	//	  PARTNER.EXAMPLE: [kdc1.partner.example:88, 10.2.0.5]
	RealmKDCs map[string][]string `yaml:"realm_kdcs"`
}

// The probers of ProbeModule.Prober.
const (
	ProberKDC     = "kdc"
	ProberKpasswd = "kpasswd"
	ProberKadmin  = "kadmin"
)

// EffectiveProber is Prober or its default, kdc.
func (m *ProbeModule) EffectiveProber() string {
	if m.Prober == "" {
		return ProberKDC
	}
	return m.Prober
}

// DefaultPort is the port of a target given without one: 88 for the KDC,
// kadmind's 464 (kpasswd) and 749 (admin RPC).
func (m *ProbeModule) DefaultPort() int {
	switch m.Prober {
	case ProberKpasswd:
		return 464
	case ProberKadmin:
		return 749
	}
	return 88
}

// validateKadmin checks a prober: kadmin module: it authenticates to
// nothing, so the fields about keys, principals and the KDC do not apply.
func (m *ProbeModule) validateKadmin() error {
	for _, f := range []struct{ name, v string }{{"client", m.Client}, {"keytab", m.Keytab},
		{"password_file", m.PasswordFile}, {"service", m.Service}, {"kdc", m.KDC}, {"preauth", m.Preauth},
		{"proxy_ca_file", m.ProxyCAFile}, {"proxy_server_name", m.ProxyServerName}} {
		if f.v != "" {
			return fieldErr(fmt.Sprintf("%s does not apply to prober kadmin (an unauthenticated RPC call)", f.name), f.name)
		}
	}
	if len(m.RealmKDCs) > 0 {
		return fieldErr("realm_kdcs does not apply to prober kadmin (an unauthenticated RPC call)", "realm_kdcs")
	}
	if m.Transport != "" && m.Transport != "tcp" {
		return fieldErr(fmt.Sprintf("transport %q: kadmind's RPC is tcp only", m.Transport), "transport")
	}
	if m.Realm != "" && strings.ContainsAny(m.Realm, " \t\n@/") {
		return fieldErr(fmt.Sprintf("invalid realm %q", m.Realm), "realm")
	}
	if m.Timeout < 0 {
		return fieldErr("timeout must not be negative", "timeout")
	}
	if m.Timeout > MaxProbeTimeout {
		return fieldErr(fmt.Sprintf("timeout %s is above the maximum %s", m.Timeout, MaxProbeTimeout), "timeout")
	}
	for i, a := range m.AllowedKDCs {
		if _, err := parseKDCPattern(a); err != nil {
			return fieldErr(err.Error(), "allowed_kdcs", fmt.Sprint(i))
		}
	}
	return nil
}

// Defaults of a probe's optional fields.
const (
	DefaultProbeTimeout   = 5 * time.Second
	DefaultProbeInterval  = 15 * time.Second
	DefaultTicketLifetime = 10 * time.Hour
	MinProbeInterval      = time.Second
	// minS2KIterations is the lowest PBKDF2 iteration count of any enctype
	// (aes*-sha1's default): a smaller cap would refuse every KDC.
	minS2KIterations = 4096
	// Upper bounds: beyond them a value is a typo, not a setting.
	MaxProbeTimeout   = time.Minute
	MaxProbeInterval  = 24 * time.Hour
	MaxTicketLifetime = 365 * 24 * time.Hour
)

// Validate checks a module on its own.
func (m *ProbeModule) Validate() error {
	switch m.Prober {
	case "", ProberKDC:
		if m.KDC != "" {
			return fieldErr("kdc applies to prober kpasswd only (a kdc prober's KDC is its target)", "kdc")
		}
	case ProberKpasswd:
		if m.KDC == "" {
			return fieldErr("prober kpasswd needs kdc: the KDC the login for kadmin/changepw goes to", "prober")
		}
		if err := kdcaddr.Check(m.KDC); err != nil {
			return fieldErr(err.Error(), "kdc")
		}
		if m.Service != "" {
			return fieldErr("service does not apply to prober kpasswd (its ticket is for kadmin/changepw)", "service")
		}
		if len(m.RealmKDCs) > 0 {
			return fieldErr("realm_kdcs does not apply to prober kpasswd (its ticket is for kadmin/changepw of the module's realm)", "realm_kdcs")
		}
		if m.Transport == "https" {
			return fieldErr("transport https: kpasswd goes to kadmind over udp or tcp", "transport")
		}
	case ProberKadmin:
		return m.validateKadmin()
	default:
		return fieldErr(fmt.Sprintf("prober %q: want kdc, kpasswd or kadmin", m.Prober), "prober")
	}
	if strings.TrimSpace(m.Realm) == "" {
		return fieldErr("realm is required", "realm")
	}
	if strings.ContainsAny(m.Realm, " \t\n@/") {
		return fieldErr(fmt.Sprintf("invalid realm %q", m.Realm), "realm")
	}
	if err := checkProbePrincipal(m.Client); err != nil {
		return fieldErr(err.Error(), "client")
	}
	switch {
	case m.Keytab == "" && m.PasswordFile == "":
		return fieldErr("one of keytab or password_file is required", "keytab")
	case m.Keytab != "" && m.PasswordFile != "":
		return fieldErr("keytab and password_file are exclusive", "password_file")
	}
	if m.Service != "" {
		if err := checkProbePrincipal(m.Service); err != nil {
			return fieldErr(err.Error(), "service")
		}
	}
	switch m.Transport {
	case "", "udp", "tcp":
		if m.ProxyCAFile != "" {
			return fieldErr("proxy_ca_file applies to transport https only", "proxy_ca_file")
		}
		if m.ProxyServerName != "" {
			return fieldErr("proxy_server_name applies to transport https only", "proxy_server_name")
		}
		if len(m.AllowedProxyURLs) > 0 {
			return fieldErr("allowed_proxy_urls applies to transport https only (list KDCs in allowed_kdcs)", "allowed_proxy_urls")
		}
	case "https":
		if len(m.AllowedKDCs) > 0 {
			return fieldErr("allowed_kdcs applies to transport udp and tcp: list the proxy's URLs in allowed_proxy_urls", "allowed_kdcs")
		}
		if n := m.ProxyServerName; n != "" && !isIP(n) && (strings.ContainsAny(n, ":[]") || kdcaddr.Check(n) != nil) {
			return fieldErr(fmt.Sprintf("proxy_server_name %q: want a host name or an IP address", n), "proxy_server_name")
		}
		for i, u := range m.AllowedProxyURLs {
			if _, err := kdcaddr.CanonicalProxyURL(u); err != nil {
				return fieldErr(err.Error(), "allowed_proxy_urls", fmt.Sprint(i))
			}
		}
	default:
		return fieldErr(fmt.Sprintf("transport %q: want udp, tcp or https", m.Transport), "transport")
	}
	switch m.Preauth {
	case "", "auto", "spake", "encrypted_timestamp":
	default:
		return fieldErr(fmt.Sprintf("preauth %q: want auto, spake or encrypted_timestamp", m.Preauth), "preauth")
	}
	if m.Timeout < 0 {
		return fieldErr("timeout must not be negative", "timeout")
	}
	if m.Timeout > MaxProbeTimeout {
		return fieldErr(fmt.Sprintf("timeout %s is above the maximum %s", m.Timeout, MaxProbeTimeout), "timeout")
	}
	if m.UDPRetransmit < 0 {
		return fieldErr("udp_retransmit must not be negative", "udp_retransmit")
	}
	if m.UDPRetransmit > MaxProbeTimeout {
		return fieldErr(fmt.Sprintf("udp_retransmit %s is above the maximum %s", m.UDPRetransmit, MaxProbeTimeout), "udp_retransmit")
	}
	if m.UDPRetransmit > 0 && m.Transport != "" && m.Transport != "udp" {
		return fieldErr("udp_retransmit applies to transport udp only", "udp_retransmit")
	}
	if m.TicketLifetime < 0 {
		return fieldErr("ticket_lifetime must not be negative", "ticket_lifetime")
	}
	if m.TicketLifetime > MaxTicketLifetime {
		return fieldErr(fmt.Sprintf("ticket_lifetime %s is above the maximum %s", m.TicketLifetime, MaxTicketLifetime), "ticket_lifetime")
	}
	if n := m.MaxS2KIterations; n != 0 && (n < minS2KIterations || n > enctype.MaxS2KIterations) {
		return fieldErr(fmt.Sprintf("max_s2k_iterations %d: want %d to %d", n, minS2KIterations, enctype.MaxS2KIterations), "max_s2k_iterations")
	}
	for i, a := range m.AllowedKDCs {
		if _, err := parseKDCPattern(a); err != nil {
			return fieldErr(err.Error(), "allowed_kdcs", fmt.Sprint(i))
		}
	}
	if err := m.validateCrossRealm(); err != nil {
		return err
	}
	seen := map[int32]bool{}
	for i, e := range m.Enctypes {
		id, err := enctype.ParseClient(e)
		if err != nil {
			return fieldErr(err.Error(), "enctypes", fmt.Sprint(i))
		}
		if seen[id] {
			return fieldErr(fmt.Sprintf("enctype %q listed twice", e), "enctypes", fmt.Sprint(i))
		}
		seen[id] = true
	}
	return nil
}

// CheckKeyFile reads the module's keytab or password file: a missing,
// unreadable, too widely readable or broken file is an error at the
// module's keytab or password_file line. Load checks it (--config.check
// fails with a file:LINE); the daemon loads with LoadDeferringKeys and
// its probes check it before each load (prober.ModuleCredentials), so
// that one module's file fails that module's probes, not the exporter.
func (m *ProbeModule) CheckKeyFile() error {
	if err := checkKeyFile("keytab", m.Keytab, maxModuleKeytab, m.AllowReadableKeys, m.keytabHoldsClient); err != nil {
		return fieldErr(err.Error(), "keytab")
	}
	if err := checkKeyFile("password file", m.PasswordFile, keytab.MaxPasswordFile, m.AllowReadableKeys, nil); err != nil {
		return fieldErr(err.Error(), "password_file")
	}
	return nil
}

// CheckProxyCA reads proxy_ca_file as the probes do: Load (and
// --config.check) fails at its line; the daemon (LoadDeferringKeys) lets
// the module's probes fail as result="tls" until the file loads.
func (m *ProbeModule) CheckProxyCA() error {
	if _, err := m.ProxyRoots(); err != nil {
		return fieldErr(err.Error(), "proxy_ca_file")
	}
	return nil
}

// maxCAFile bounds proxy_ca_file (a system bundle is ~200 kB).
const maxCAFile = 4 << 20

// ProxyRoots reads proxy_ca_file into a pool: nil (the system's roots)
// when the module names none; an error when the file is unreadable,
// writable by its group or others, or holds no certificate.
func (m *ProbeModule) ProxyRoots() (*x509.CertPool, error) {
	if m.ProxyCAFile == "" {
		return nil, nil
	}
	b, fi, err := safefile.ReadFile(m.ProxyCAFile, maxCAFile, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("cannot %s proxy CA file: %w", pe.Op, pe.Err)
		}
		return nil, err
	}
	// The trust anchor of the proxy probes, re-read when it changes: a
	// user who could write it could make any proxy trusted.
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return nil, fmt.Errorf("proxy CA file is writable by users other than its owner (mode %04o): chmod go-w it", perm)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("proxy CA file holds no PEM certificate")
	}
	return pool, nil
}

// AllowsProxyURL reports whether /probe may use this https module against
// the proxy at u.
func (m *ProbeModule) AllowsProxyURL(u string) bool {
	c, err := kdcaddr.CanonicalProxyURL(u)
	if err != nil {
		return false
	}
	for _, a := range m.AllowedProxyURLs {
		if ac, err := kdcaddr.CanonicalProxyURL(a); err == nil && ac == c {
			return true
		}
	}
	return false
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// maxModuleKeytab bounds a probe module's keytab: one client's keys, a
// few kvnos and enctypes, are a few hundred bytes.
const maxModuleKeytab = 1 << 20

// checkKeyFile reads a key file (empty path: nothing to check): a regular
// file of at most limit bytes (a FIFO fails at once, never hangs the
// check) and, unless allowReadable, readable by its owner only; check,
// when not nil, judges its content. Errors never name the path (it is at
// the line they point to) nor quote the file.
func checkKeyFile(what, path string, limit int64, allowReadable bool, check func([]byte) error) error {
	if path == "" {
		return nil
	}
	b, fi, err := safefile.ReadFile(path, limit, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("cannot %s %s: %w", pe.Op, what, pe.Err)
		}
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o044 != 0 && !allowReadable {
		return fmt.Errorf("%s is readable by users other than its owner (mode %04o): chmod 0600 it, or set allow_readable_keys: true", what, perm)
	}
	if check != nil {
		return check(b)
	}
	return nil
}

// keytabHoldsClient checks that keytab bytes parse and hold a key of the
// module's client that the prober can use, as the probe's own load does.
func (m *ProbeModule) keytabHoldsClient(b []byte) error {
	entries, err := keytab.Parse(b)
	if err != nil {
		return err
	}
	name, realm := m.Client, m.Realm
	if at := strings.LastIndexByte(name, '@'); at >= 0 {
		name, realm = name[:at], name[at+1:]
	}
	comps := strings.Split(name, "/")
	for _, e := range entries {
		t, ok := enctype.ByID(e.EncType)
		if ok && t.Client && len(e.Key) == t.KeyLen && e.Realm == realm && slices.Equal(e.Components, comps) {
			return nil
		}
	}
	return fmt.Errorf("no AES key for %s@%s", name, realm)
}

// maxRealmKDCs bounds the KDCs tried for a cross-realm service.
const maxRealmKDCs = 16

// validateCrossRealm checks realm_kdcs against the service: exactly the
// service's realm, when it is not the module's, with valid addresses.
func (m *ProbeModule) validateCrossRealm() error {
	sr := m.ServiceRealm()
	if m.CrossRealm() && m.Transport == "https" {
		return fieldErr("a service of another realm is probed over udp or tcp, not through a KDC proxy", "transport")
	}
	if m.CrossRealm() && len(m.RealmKDCs[sr]) == 0 {
		return fieldErr(fmt.Sprintf("service %q is in realm %s: list that realm's KDCs in realm_kdcs", m.Service, sr), "service")
	}
	for r, kdcs := range m.RealmKDCs {
		switch {
		case strings.ContainsAny(r, " \t\n@/") || r == "":
			return fieldErr(fmt.Sprintf("invalid realm %q", r), "realm_kdcs", r)
		case r == m.Realm:
			return fieldErr(fmt.Sprintf("realm_kdcs lists the module's own realm %s: its KDC is the probe's target", r), "realm_kdcs", r)
		case r != sr:
			return fieldErr(fmt.Sprintf("realm_kdcs lists %s, but the service is in realm %s", r, sr), "realm_kdcs", r)
		case len(kdcs) > maxRealmKDCs:
			return fieldErr(fmt.Sprintf("%d KDCs for %s: at most %d", len(kdcs), r, maxRealmKDCs), "realm_kdcs", r)
		}
		for i, a := range kdcs {
			if err := kdcaddr.Check(a); err != nil {
				return fieldErr(err.Error(), "realm_kdcs", r, fmt.Sprint(i))
			}
		}
	}
	return nil
}

// ServiceRealm is the realm of the module's service ("" without one).
func (m *ProbeModule) ServiceRealm() string {
	if m.Service == "" {
		return ""
	}
	if at := strings.LastIndexByte(m.Service, '@'); at >= 0 {
		return m.Service[at+1:]
	}
	return m.Realm
}

// CrossRealm reports whether the service is in another realm than the
// client's: the probe then walks the trust (realm_kdcs).
func (m *ProbeModule) CrossRealm() bool {
	sr := m.ServiceRealm()
	return sr != "" && sr != m.Realm
}

// RemoteKDCs are the KDCs of a cross-realm service's realm.
func (m *ProbeModule) RemoteKDCs() []string { return m.RealmKDCs[m.ServiceRealm()] }

// EffectiveTimeout is Timeout or its default.
func (m *ProbeModule) EffectiveTimeout() time.Duration {
	if m.Timeout > 0 {
		return m.Timeout
	}
	return DefaultProbeTimeout
}

// EffectiveTicketLifetime is TicketLifetime or its default.
func (m *ProbeModule) EffectiveTicketLifetime() time.Duration {
	if m.TicketLifetime > 0 {
		return m.TicketLifetime
	}
	return DefaultTicketLifetime
}

// checkProbePrincipal adds to checkPrincipal what the prober cannot encode:
// escapes and empty name components.
func checkProbePrincipal(p string) error {
	if err := checkPrincipal(p); err != nil {
		return err
	}
	name := p
	if at := strings.LastIndexByte(p, '@'); at >= 0 {
		name = p[:at]
	}
	if strings.ContainsAny(name, "\\@") {
		return fmt.Errorf("principal %q: escapes and a second @ are not supported", p)
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" {
			return fmt.Errorf("principal %q has an empty component", p)
		}
	}
	return nil
}

// ProbeTarget is one KDC probed continuously: an AS exchange (and a TGS
// exchange when the module names a service) every interval, independent of
// scrapes.
//
//	probes:
//	  - name: kdc1                 # the `target` label
//	    address: kdc1.example.com:88
//	    module: default
//	    interval: 15s
type ProbeTarget struct {
	// Name is the value of the `target` label; unique.
	Name string `yaml:"name"`
	// Address is the KDC: host:port, [v6]:port, or a host or IP (port 88);
	// with a module of transport https, the proxy's https:// URL.
	Address string `yaml:"address"`
	// Module names the entry of `modules` to use.
	Module string `yaml:"module"`
	// Interval between probes; default 15s, at least 1s.
	Interval time.Duration `yaml:"interval"`
}

// Validate checks a target on its own; Config.Validate checks that the
// module exists and names are unique.
func (t *ProbeTarget) Validate() error {
	if strings.TrimSpace(t.Name) == "" {
		return fieldErr("name is required", "name")
	}
	if len(t.Name) > 128 || strings.ContainsAny(t.Name, "\n\x00") {
		return fieldErr(fmt.Sprintf("name %q: at most 128 characters on one line", t.Name), "name")
	}
	if err := checkName("name", t.Name); err != nil {
		return fieldErr(err.Error(), "name")
	}
	if strings.HasPrefix(t.Address, "https://") {
		if _, err := kdcaddr.ParseProxyURL(t.Address); err != nil {
			return fieldErr(err.Error(), "address")
		}
	} else if err := kdcaddr.Check(t.Address); err != nil {
		return fieldErr(err.Error(), "address")
	}
	if t.Module == "" {
		return fieldErr("module is required", "module")
	}
	if t.Interval != 0 && t.Interval < MinProbeInterval {
		return fieldErr(fmt.Sprintf("interval %s is below the minimum %s", t.Interval, MinProbeInterval), "interval")
	}
	if t.Interval > MaxProbeInterval {
		return fieldErr(fmt.Sprintf("interval %s is above the maximum %s", t.Interval, MaxProbeInterval), "interval")
	}
	return nil
}

// EffectiveInterval is Interval or its default.
func (t *ProbeTarget) EffectiveInterval() time.Duration {
	if t.Interval > 0 {
		return t.Interval
	}
	return DefaultProbeInterval
}
