package tailer

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
)

// TestHostilePositionFile plants what an attacker with write access to the
// state directory could: the position file must be read only if it is a
// regular file of sane size, never through a symbolic link, and never
// block the start.
func TestHostilePositionFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"version":1,"files":{}}`+strings.Repeat(" ", maxPositionFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, want string
		plant      func(path string) error
	}{
		{"symlink to a FIFO", "symbolic link", func(p string) error { return os.Symlink(fifo, p) }},
		{"symlink to /dev/zero", "symbolic link", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"FIFO", "not a regular file", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"directory", "not a regular file", func(p string) error { return os.Mkdir(p, 0o700) }},
		{"too large", "larger than", func(p string) error { return os.Rename(big, p) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "positions.json")
			if err := c.plant(path); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				p, err := OpenPositions(path, log.NewNopLogger())
				if err == nil {
					p.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("OpenPositions: %v, want an error saying %q", err, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("OpenPositions blocks") // the goroutine stays blocked: the test binary ends anyway
			}
		})
	}
	// A symbolic link planted as the lock file is not followed either.
	path := filepath.Join(t.TempDir(), "positions.json")
	target := filepath.Join(dir, "victim")
	os.WriteFile(target, []byte("keep\n"), 0o644)
	os.Symlink(target, path+".lock")
	if p, err := OpenPositions(path, log.NewNopLogger()); err == nil {
		p.Close()
		t.Error("a symbolic link as lock file was followed")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("the lock file's symlink target was written: %q", b)
	}
}

// TestPositionLockOfAnotherUser: a lock file planted by another user in the
// state directory is refused (they could hold its flock for ever, or read
// the pid), and so is a FIFO there; it opened before safefile.OpenOwned.
func TestPositionLockOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	path := filepath.Join(t.TempDir(), "positions.json")
	if err := os.WriteFile(path+".lock", nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path+".lock", 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if p, err := OpenPositions(path, log.NewNopLogger()); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		if err == nil {
			p.Close()
		}
		t.Errorf("OpenPositions with another user's lock file: %v", err)
	}
	fifo := filepath.Join(t.TempDir(), "positions.json")
	if err := syscall.Mkfifo(fifo+".lock", 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := OpenPositions(fifo, log.NewNopLogger()); err == nil || !strings.Contains(err.Error(), "FIFO") {
		if err == nil {
			p.Close()
		}
		t.Errorf("OpenPositions with a FIFO as lock file: %v", err)
	}
}

// TestPositionLock: one position file, one holder at a time.
func TestPositionLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "positions.json")
	a, err := OpenPositions(path, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPositions(path, log.NewNopLogger()); err == nil || !strings.Contains(err.Error(), "in use by another process (pid") {
		t.Errorf("second open: %v", err)
	}
	a.Close()
	b, err := OpenPositions(path, log.NewNopLogger())
	if err != nil {
		t.Fatalf("open after Close: %v", err)
	}
	b.Close()
}

// BenchmarkPositionsFlush is the cost of one position file write (one a
// second while a log is written to), with one followed log.
func BenchmarkPositionsFlush(b *testing.B) {
	p, err := OpenPositions(filepath.Join(b.TempDir(), "positions.json"), log.NewNopLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	cur := FilePos{Dev: 2049, Ino: 1234, Offset: 1, HeadLen: 1024, HashLen: 512}
	for b.Loop() {
		cur.Offset++
		p.Set("/var/log/krb5kdc.log", Position{Current: &cur, Saved: time.Now().UnixNano()})
		if err := p.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
