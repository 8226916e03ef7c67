package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
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

// TestLoadConfigRefusesWhatConfigLoadRefuses: the bench file is read as
// the daemon's (safefile, config.MaxFileSize): a FIFO planted at the path
// is an error at once, not a bench that waits for a writer for ever, and
// a file above the limit is refused rather than read whole.
func TestLoadConfigRefusesWhatConfigLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := LoadConfig(fifo, Config{Settings: Defaults()})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		// Let the blocked open go: a writer that closes at once.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
		t.Errorf("LoadConfig still waiting on a FIFO after 5 s")
	}
	big := filepath.Join(dir, "big.yml")
	if err := os.WriteFile(big, []byte("clients: 3\n#"+strings.Repeat("x", config.MaxFileSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(big, Config{Settings: Defaults()}); !errors.Is(err, safefile.ErrTooLarge) {
		t.Errorf("a file above config.MaxFileSize: %v, want %v", err, safefile.ErrTooLarge)
	}
}
