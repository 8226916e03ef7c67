// Package kdcaddr checks KDC addresses as the configuration, the probe
// command and the Kerberos engine accept them. It is a leaf so that config
// can check an address without linking the engine.
package kdcaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Check accepts host:port, [v6]:port, a bare host name or an IP literal
// (port 88 is then implied).
func Check(a string) error {
	if strings.TrimSpace(a) == "" {
		return fmt.Errorf("address is required")
	}
	host := a
	if h, port, err := net.SplitHostPort(a); err == nil {
		if n, err := net.LookupPort("udp", port); err != nil || port == "" || n == 0 {
			return fmt.Errorf("address %q: bad port %q", a, port)
		}
		host = h
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return nil
	}
	if !validHostName(host) {
		return fmt.Errorf("address %q: want host:port, [v6]:port, a host name or an IP address", a)
	}
	return nil
}

// validHostName accepts DNS names (letters, digits, '-', '_', '.').
func validHostName(h string) bool {
	if h == "" || len(h) > 253 || strings.HasPrefix(h, ".") || strings.Contains(h, "..") {
		return false
	}
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}
