package main

import (
	"net"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// exposureWarning returns the key-values of the one start-up warning the
// daemon logs when its endpoint publishes principal names and client
// addresses (the top talkers, the attack signals: both count the KDC's
// lines) to anyone who can reach it: no authentication in the web
// configuration (basic auth, or client certificates verified against a
// CA) and a socket bound beyond loopback. Nil when none of that holds.
func exposureWarning(addrs []net.Addr, webConfigFile string, cfg *config.Config) []any {
	var published []string
	if countsKDCLines(cfg) {
		if !cfg.TopTalkers.Disabled {
			published = append(published, "top_talkers")
		}
		if !cfg.AttackSignals.Disabled {
			published = append(published, "attack_signals")
		}
	}
	if len(published) == 0 || webAuthenticated(webConfigFile) {
		return nil
	}
	var open []string
	for _, a := range addrs {
		if t, ok := a.(*net.TCPAddr); ok && !t.IP.IsLoopback() {
			open = append(open, t.String())
		}
	}
	if len(open) == 0 {
		return nil
	}
	return []any{"msg", "principal names and client addresses are published without authentication beyond loopback",
		"listen", strings.Join(open, ","), "published", strings.Join(published, ","),
		"fix", "--web.listen-address=127.0.0.1:10088, or a --web.config.file with basic_auth_users or client certificates (client_auth_type: RequireAndVerifyClientCert), or top_talkers/attack_signals: {disabled: true} (docs/security.md)"}
}

// countsKDCLines reports a log source that counts the KDC's lines.
func countsKDCLines(cfg *config.Config) bool {
	for _, l := range cfg.Logs {
		if l.Type == "kdc" || l.Type == "any" {
			return true
		}
	}
	return false
}

// webAuthenticated reports an exporter-toolkit web configuration that
// authenticates every client: basic auth users, or TLS client
// certificates verified against its CA. A file that does not read as one
// fails the start anyway (exporter-toolkit checks it).
func webAuthenticated(path string) bool {
	if path == "" {
		return false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var c struct {
		TLS struct {
			ClientAuth string `yaml:"client_auth_type"`
		} `yaml:"tls_server_config"`
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if yaml.Unmarshal(b, &c) != nil {
		return false
	}
	return len(c.Users) > 0 || c.TLS.ClientAuth == "RequireAndVerifyClientCert"
}
