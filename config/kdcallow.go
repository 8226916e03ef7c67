package config

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcaddr"
)

// kdcPattern is one entry of a module's allowed_kdcs.
type kdcPattern struct {
	name   string       // lower-case host name, or ""
	prefix netip.Prefix // an IP address (as /32 or /128) or a CIDR, when name is ""
	port   int          // 0: any port
}

// parseKDCPattern accepts a host name, an IP address or a CIDR, each
// optionally followed by :port ([v6]:port and [v6/bits]:port for IPv6).
func parseKDCPattern(s string) (kdcPattern, error) {
	var p kdcPattern
	host := strings.TrimSpace(s)
	if host == "" {
		return p, fmt.Errorf("empty KDC pattern")
	}
	if h, port, err := net.SplitHostPort(host); err == nil {
		n, err := net.LookupPort("udp", port)
		if err != nil || n == 0 {
			return p, fmt.Errorf("KDC pattern %q: bad port %q", s, port)
		}
		host, p.port = h, n
	}
	// A CIDR with a port as an address with one: 10.0.0.0/8:88, [2001:db8::/32]:88.
	if pr, err := netip.ParsePrefix(strings.Trim(host, "[]")); err == nil {
		p.prefix = pr.Masked()
		return p, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		a = a.Unmap()
		p.prefix = netip.PrefixFrom(a, a.BitLen())
		return p, nil
	}
	if strings.Contains(host, ":") || kdcaddr.Check(host) != nil {
		return p, fmt.Errorf("KDC pattern %q: want a host name, an IP address or a CIDR, each optionally with :port", s)
	}
	p.name = strings.ToLower(strings.TrimSuffix(host, "."))
	return p, nil
}

// AllowsKDC reports whether /probe may use this module against addr (a KDC
// address as kdcaddr.Check accepts it). Host names match host-name
// entries by name only (no DNS lookup, so a name cannot be re-pointed
// between check and use); IP addresses match IP and CIDR entries.
func (m *ProbeModule) AllowsKDC(addr string) bool {
	host, port := addr, 88
	if h, ps, err := net.SplitHostPort(addr); err == nil {
		n, err := net.LookupPort("udp", ps)
		if err != nil {
			return false
		}
		host, port = h, n
	}
	host = strings.Trim(host, "[]")
	ip, ipErr := netip.ParseAddr(host)
	if ipErr == nil {
		ip = ip.Unmap().WithZone("")
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, s := range m.AllowedKDCs {
		p, err := parseKDCPattern(s)
		if err != nil || (p.port != 0 && p.port != port) {
			continue
		}
		if p.name != "" {
			if ipErr != nil && p.name == name {
				return true
			}
			continue
		}
		if ipErr == nil && p.prefix.Contains(ip) {
			return true
		}
	}
	return false
}
