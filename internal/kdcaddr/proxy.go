package kdcaddr

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ParseProxyURL checks a KDC proxy's URL ([MS-KKDCP]): https, a host, a
// port if any that parses, no user information (secrets never go into a
// URL), no query or fragment.
func ParseProxyURL(s string) (*url.URL, error) {
	if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), "https://") {
		return nil, fmt.Errorf("proxy URL %q: want https://host[:port]/path", s)
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("proxy URL: %w", err)
	}
	switch {
	case u.Scheme != "https":
		return nil, fmt.Errorf("proxy URL %q: want https://host[:port]/path", s)
	case u.Hostname() == "":
		return nil, fmt.Errorf("proxy URL %q has no host", s)
	case u.User != nil:
		return nil, errors.New("proxy URL must not carry user information")
	case u.Fragment != "" || u.RawQuery != "" || u.ForceQuery:
		return nil, fmt.Errorf("proxy URL %q: no query or fragment", s)
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := net.LookupPort("tcp", p); err != nil || n == 0 {
			return nil, fmt.Errorf("proxy URL %q: bad port %q", s, p)
		}
	}
	if h := u.Hostname(); Check(h) != nil {
		return nil, fmt.Errorf("proxy URL %q: bad host %q", s, h)
	}
	return u, nil
}

// CanonicalProxyURL is the form in which proxy URLs are compared: lower-case
// host, the port written out (443 by default), the path as given ("/" when
// empty).
func CanonicalProxyURL(s string) (string, error) {
	u, err := ParseProxyURL(s)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return "https://" + net.JoinHostPort(strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), port) + path, nil
}
