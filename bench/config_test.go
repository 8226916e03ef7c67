package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadConfigStrict: the bench file is decoded as the daemon's is
// (config.Decode): unknown keys, wrong types and a second document are
// errors with the file and line.
func TestLoadConfigStrict(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, yml, want string }{
		{"unknown key", "clients: 4\nclinets: 8\n", `b.yml:2: unknown key "clinets"`},
		{"wrong type", "clients: 4\nduration: soon\n", "b.yml:2: "},
		{"second document", "clients: 4\n---\nclients: 8\n", "b.yml:2: a second YAML document"},
		{"realm without kdc", "realm:\n  name: EXAMPLE.COM\n", "realm needs at least name and kdc"},
	} {
		path := filepath.Join(dir, "b.yml")
		if err := os.WriteFile(path, []byte(tc.yml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(path, Config{Settings: Defaults()})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
	path := filepath.Join(dir, "ok.yml")
	os.WriteFile(path, []byte("clients: 3\nrealm:\n  name: EXAMPLE.COM\n  kdc: 127.0.0.1\n"), 0o600)
	cfg, err := LoadConfig(path, Config{Settings: Defaults()})
	if err != nil || cfg.Clients != 3 || cfg.Realm.KDC != "127.0.0.1" || cfg.Duration != Defaults().Duration {
		t.Errorf("ok.yml: %+v, %v", cfg.Settings, err)
	}
}
