package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Links, FIFOs and other users' files planted where OpenOwned and
// MkdirOwned work are refused, and the link's target is not created,
// written or entered (issue 26 item 8: the bench's lock in /tmp, its
// results/<timestamp> directory).
func TestOwnedRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	plant := func(name string, make func(string) error) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := make(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dangling := plant("dangling", func(p string) error { return os.Symlink(victim, p) })
	fifo := plant("fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) })
	for _, p := range []string{dangling, fifo} {
		if f, err := OpenOwned(p, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
			f.Close()
			t.Errorf("OpenOwned(%s) opened it", p)
		}
	}
	if _, err := os.Lstat(victim); err == nil {
		t.Errorf("OpenOwned created the target of a planted link")
	}
	if err := MkdirOwned(dangling, 0o755); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("MkdirOwned at a link: %v", err)
	}
	if _, err := os.Lstat(victim); err == nil {
		t.Errorf("MkdirOwned created the target of a planted link")
	}
	os.Mkdir(victim, 0o755)
	linkToDir := plant("linkdir", func(p string) error { return os.Symlink(victim, p) })
	if err := MkdirOwned(linkToDir, 0o755); err == nil {
		t.Error("MkdirOwned accepted a link to a directory")
	}
	if err := MkdirOwned(fifo, 0o755); err == nil {
		t.Error("MkdirOwned accepted a FIFO")
	}

	// Its own files and directories are used again.
	mine := filepath.Join(dir, "mine")
	for range 2 {
		f, err := OpenOwned(mine, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := MkdirOwned(mine+".d", 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// Another user's: only root can plant one here.
	if os.Getuid() != 0 {
		return
	}
	for _, p := range []string{mine, mine + ".d"} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if f, err := OpenOwned(mine, os.O_RDWR|os.O_CREATE, 0o600); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("OpenOwned on another user's file: %v", err)
		if err == nil {
			f.Close()
		}
	}
	if err := MkdirOwned(mine+".d", 0o755); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("MkdirOwned on another user's directory: %v", err)
	}
}
