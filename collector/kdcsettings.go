package collector

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5profile"
)

// Compiled-in MIT defaults (krb5 1.20).
const (
	defaultTCPListenBacklog  = 5
	defaultKDCPort           = 88
	defaultSupportedEnctypes = "aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal"
	debianDatabase           = "/var/lib/krb5kdc/principal"
	rhelDatabase             = "/var/kerberos/krb5kdc/principal"
)

// kdcSettings is what the KDC would run with, read from the merged profile.
type kdcSettings struct {
	tcpListenBacklog int
	spakeGroups      []string
	realms           []realmSettings
	// udpListen and tcpListen are the union over the realms; they find the
	// KDC's sockets when its file descriptors cannot be read.
	udpListen, tcpListen []listenAddr
}

type realmSettings struct {
	name               string
	dbLibrary          string // db2, klmdb, kldap (or whatever is configured)
	dbFile             string // main database file; "" for LDAP
	disableLastSuccess bool
	disableLockout     bool
	enctypes           []string // canonical, without duplicates, in order
	ipropEnable        bool     // iprop_enable
	ipropLog           string   // the update log (iprop_logfile or its default)
}

// listenAddr is a kdc_listen entry; an empty host is the wildcard.
type listenAddr struct {
	host string
	port int
}

func (a listenAddr) matches(ip net.IP, port uint64) bool {
	if uint64(a.port) != port {
		return false
	}
	if a.host == "" || ip.IsUnspecified() {
		return true
	}
	want := net.ParseIP(a.host)
	return want != nil && want.Equal(ip)
}

// settings interprets the profile for the given realms (the running KDC's
// -r arguments). With none it uses default_realm, else the realms of
// kdc.conf, as a KDC started without -r would serve default_realm.
func (p *profile) settings(realms []string, defaultDB string) (*kdcSettings, error) {
	s := &kdcSettings{tcpListenBacklog: defaultTCPListenBacklog}
	if v, ok := p.Get("kdcdefaults", "kdc_tcp_listen_backlog"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("kdc_tcp_listen_backlog = %q is not a positive integer", v)
		}
		s.tcpListenBacklog = n
	}
	if v, ok := p.Get("libdefaults", "spake_preauth_groups"); ok {
		s.spakeGroups = splitList(v)
	}
	if len(realms) == 0 {
		if v, ok := p.Get("libdefaults", "default_realm"); ok && v != "" {
			realms = []string{v}
		} else {
			realms = p.Subsections("realms")
		}
	}
	defUDP := firstOf(p, "88", []string{"kdcdefaults", "kdc_listen"}, []string{"kdcdefaults", "kdc_ports"})
	defTCP := firstOf(p, "88", []string{"kdcdefaults", "kdc_tcp_listen"}, []string{"kdcdefaults", "kdc_tcp_ports"})
	seen := map[string]bool{}
	for _, name := range realms {
		if seen[name] {
			continue
		}
		seen[name] = true
		r, err := p.realm(name, defaultDB)
		if err != nil {
			return nil, err
		}
		s.realms = append(s.realms, r)
		udp := firstOf(p, defUDP, []string{"realms", name, "kdc_listen"}, []string{"realms", name, "kdc_ports"})
		tcp := firstOf(p, defTCP, []string{"realms", name, "kdc_tcp_listen"}, []string{"realms", name, "kdc_tcp_ports"})
		if s.udpListen, err = appendListen(s.udpListen, udp); err != nil {
			return nil, fmt.Errorf("realm %s: kdc_listen: %w", name, err)
		}
		if s.tcpListen, err = appendListen(s.tcpListen, tcp); err != nil {
			return nil, fmt.Errorf("realm %s: kdc_tcp_listen: %w", name, err)
		}
	}
	return s, nil
}

func (p *profile) realm(name, defaultDB string) (realmSettings, error) {
	r := realmSettings{name: name, dbLibrary: "db2"}
	module := name
	if v, ok := p.Get("realms", name, "database_module"); ok {
		module = v
	}
	if v, ok := p.Get("dbmodules", module, "db_library"); ok {
		r.dbLibrary = v
	}
	var err error
	// LDAP falls back to [dbdefaults]; db2 and LMDB read [dbmodules] only.
	for _, b := range []struct {
		tag string
		dst *bool
	}{{"disable_last_success", &r.disableLastSuccess}, {"disable_lockout", &r.disableLockout}} {
		v, ok := p.Get("dbmodules", module, b.tag)
		if !ok && r.dbLibrary == "kldap" {
			v, ok = p.Get("dbdefaults", b.tag)
		}
		if ok {
			if *b.dst, err = profileBool(v); err != nil {
				return r, fmt.Errorf("[dbmodules] %s: %s: %w", module, b.tag, err)
			}
		}
	}
	switch r.dbLibrary {
	case "db2", "klmdb":
		db, ok := p.Get("dbmodules", module, "database_name")
		if !ok {
			if db, ok = p.Get("realms", name, "database_name"); !ok {
				db = defaultDB
			}
		}
		if r.dbLibrary == "klmdb" {
			db += ".mdb"
		}
		r.dbFile = db
	}
	if v, ok := p.Get("realms", name, "iprop_enable"); ok {
		if r.ipropEnable, err = profileBool(v); err != nil {
			return r, fmt.Errorf("realm %s: iprop_enable: %w", name, err)
		}
	}
	// MIT's default is the realm section's database_name plus .ulog; it
	// never looks at [dbmodules].
	r.ipropLog = firstOf(p, firstOf(p, defaultDB, []string{"realms", name, "database_name"})+".ulog",
		[]string{"realms", name, "iprop_logfile"})
	enc, ok := p.Get("realms", name, "supported_enctypes")
	if !ok {
		enc = defaultSupportedEnctypes
	}
	seen := map[string]bool{}
	for _, ks := range splitList(enc) {
		e, _, _ := strings.Cut(ks, ":")
		c := canonicalEnctype(e)
		if !seen[c] {
			seen[c] = true
			r.enctypes = append(r.enctypes, c)
		}
	}
	return r, nil
}

// firstOf returns the first relation that exists, else def.
func firstOf(p *profile, def string, paths ...[]string) string {
	for _, path := range paths {
		if v, ok := p.Get(path...); ok {
			return v
		}
	}
	return def
}

// appendListen parses "88", "127.0.0.1:88", "[::1]:88", "127.0.0.1" items.
func appendListen(out []listenAddr, list string) ([]listenAddr, error) {
	for _, item := range splitList(list) {
		a := listenAddr{port: defaultKDCPort}
		host, port := item, ""
		switch {
		case isDigits(item):
			host, port = "", item
		case strings.HasPrefix(item, "["):
			end := strings.IndexByte(item, ']')
			if end < 0 {
				return out, fmt.Errorf("bad address %q", item)
			}
			host = item[1:end]
			if rest := item[end+1:]; rest != "" {
				if !strings.HasPrefix(rest, ":") {
					return out, fmt.Errorf("bad address %q", item)
				}
				port = rest[1:]
			}
		case strings.Count(item, ":") == 1:
			host, port, _ = strings.Cut(item, ":")
		}
		if port != "" {
			n, err := strconv.Atoi(port)
			if err != nil || n < 1 || n > 65535 {
				return out, fmt.Errorf("bad port in %q", item)
			}
			a.port = n
		}
		a.host = host
		dup := false
		for _, o := range out {
			dup = dup || o == a
		}
		if !dup {
			out = append(out, a)
		}
	}
	return out, nil
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// profileBool accepts what libprofile's profile_parse_boolean accepts.
func profileBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "y", "yes", "true", "t", "1", "on":
		return true, nil
	case "n", "no", "false", "nil", "0", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", v)
}

// confSource reads the KDC profile, re-parsing only when one of its files
// changed, so a broken file counts as one parse error, not one per scrape.
type confSource struct {
	logger    log.Logger
	kdcPaths  []string // KRB5_KDC_PROFILE-style list
	krb5Paths []string // merged after kdc.conf; missing files are skipped
	defaultDB string

	stamps      []fileStamp
	prof        *profile
	err         error
	parseErrors float64

	// Within one scrape (begin to end) the files are stamped once, not
	// once per collector that asks.
	inScrape, checked bool

	// settings memo: the interpretation for one profile and realm list
	setProf   *profile
	setRealms string
	set       *kdcSettings
	setErr    error
}

type fileStamp struct {
	path  string
	size  int64
	mtime time.Time
	ino   uint64
	ok    bool
}

func stampOf(path string) fileStamp {
	st := fileStamp{path: path}
	if fi, err := os.Stat(path); err == nil {
		st.size, st.mtime, st.ok = fi.Size(), fi.ModTime(), true
		st.ino = inode(fi)
	}
	return st
}

func newConfSource(logger log.Logger, kdcPaths, krb5Paths string) *confSource {
	kp := krb5profile.SplitPaths(kdcPaths)
	return &confSource{logger: logger, kdcPaths: kp, krb5Paths: krb5profile.SplitPaths(krb5Paths), defaultDB: defaultDatabase(kp)}
}

// load returns the merged profile; the error is a missing kdc.conf or a
// parse error (then counted once per change of the files).
// begin and end bracket a scrape: between them the profile's files are
// looked at by the first load only.
func (c *confSource) begin() { c.inScrape, c.checked = true, false }
func (c *confSource) end()   { c.inScrape = false }

func (c *confSource) load() (*profile, error) {
	if c.stamps != nil && (c.inScrape && c.checked || !c.changed()) {
		c.checked = c.inScrape
		return c.prof, c.err
	}
	c.checked = c.inScrape
	c.prof, c.err = c.parse()
	var pe *krb5profile.Error
	if errors.As(c.err, &pe) {
		c.parseErrors++
		level.Error(c.logger).Log("msg", "cannot parse KDC profile; kdcconf metrics withheld until the file changes", "err", c.err)
	}
	return c.prof, c.err
}

// settings interprets the profile for the realms the KDC serves. A value
// the KDC would reject (a bad boolean, port or backlog) is a parse error
// too, counted once per profile version and realm list.
func (c *confSource) settings(realms []string) (*kdcSettings, error) {
	prof, err := c.load()
	if err != nil {
		return nil, err
	}
	key := strings.Join(realms, " ")
	if c.setProf == prof && c.setRealms == key {
		return c.set, c.setErr
	}
	c.setProf, c.setRealms = prof, key
	c.set, c.setErr = prof.settings(realms, c.defaultDB)
	if c.setErr != nil {
		c.setErr = fmt.Errorf("%s: %w", strings.Join(c.kdcPaths, ":"), c.setErr)
		c.parseErrors++
		level.Error(c.logger).Log("msg", "invalid value in KDC profile; kdcconf metrics withheld until the file changes", "err", c.setErr)
	}
	return c.set, c.setErr
}

func (c *confSource) changed() bool {
	for _, st := range c.stamps {
		if stampOf(st.path) != st {
			return true
		}
	}
	return false
}

func (c *confSource) parse() (*profile, error) {
	// Stamp the configured paths (even missing ones: creating one is a
	// change) and then every file actually read, includes too.
	c.stamps = c.stamps[:0]
	for _, path := range append(append([]string(nil), c.kdcPaths...), c.krb5Paths...) {
		c.stamps = append(c.stamps, stampOf(path))
	}
	p, err := krb5profile.Load(c.kdcPaths, c.krb5Paths, func(path string) {
		if !slices.Contains(c.kdcPaths, path) && !slices.Contains(c.krb5Paths, path) {
			c.stamps = append(c.stamps, stampOf(path))
		}
	})
	if err != nil {
		return nil, err
	}
	if p.KDCFiles == 0 {
		return nil, fmt.Errorf("%w (looked for %s)", errNoProfile, strings.Join(c.kdcPaths, ", "))
	}
	return &profile{p}, nil
}

// profile is the KDC's merged profile, which the settings interpret.
type profile struct{ *krb5profile.Profile }

// errNoProfile means none of the configured kdc.conf files exists.
var errNoProfile = errors.New("no kdc.conf found")

// defaultDatabase is the compiled-in database path of the distribution
// whose kdc.conf location is in use.
func defaultDatabase(kdcPaths []string) string {
	if len(kdcPaths) > 0 && strings.HasPrefix(kdcPaths[0], "/var/kerberos/") {
		return rhelDatabase
	}
	return debianDatabase
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
