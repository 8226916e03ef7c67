package kdcaddr

import (
	"strings"
	"testing"
)

func TestParseProxyURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://ipa.example.com/KdcProxy":       "https://ipa.example.com:443/KdcProxy",
		"HTTPS://IPA.Example.com.:8443/KdcProxy": "https://ipa.example.com:8443/KdcProxy",
		"https://10.0.0.1":                       "https://10.0.0.1:443/",
		"https://[2001:db8::1]:444/kdc":          "https://[2001:db8::1]:444/kdc",
	} {
		if got, err := CanonicalProxyURL(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"127.0.0.1:88":            "want https://",
		"http://p/KdcProxy":       "want https://",
		"https:///KdcProxy":       "no host",
		"https://u:pw@p/KdcProxy": "user information",
		"https://p/KdcProxy?x=1":  "no query",
		"https://p/KdcProxy#f":    "no query or fragment",
		"https://p:0/":            "bad port",
		"https://p:/":             "bad port",
		"https://p q/":            "",
		"https://p_-%2F/":         "",
	} {
		_, err := ParseProxyURL(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
}
