package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Open and ReadFile return at once, with an error that says what the path
// names, for a FIFO nobody writes to (a blocking open waits for ever), a
// directory, a device and a link where links are refused; /dev/zero is
// refused as a device, and a regular file above the limit (or one growing
// past it) as too large.
func TestReadRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 101), 0o600)
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("hello"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(small, link)
	for _, tc := range []struct {
		path string
		flag int
		want string
		is   error
	}{
		{fifo, 0, "a FIFO", ErrNotRegular},
		{dir, 0, "a directory", ErrNotRegular},
		{"/dev/zero", 0, "a device", ErrNotRegular},
		{big, 0, "more than 100 bytes", ErrTooLarge},
		{link, syscall.O_NOFOLLOW, "too many levels of symbolic links", nil},
	} {
		done := make(chan error, 1)
		go func() {
			_, _, err := ReadFile(tc.path, 100, tc.flag)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ReadFile still blocked after 5 s", tc.path)
		}
	}
	for _, p := range []string{small, link} {
		if b, fi, err := ReadFile(p, 100, 0); err != nil || string(b) != "hello" || fi.Size() != 5 {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	// /proc files claim size 0: the limit holds on what is read.
	if _, _, err := ReadFile("/proc/self/maps", 10, 0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("/proc/self/maps with a 10-byte limit: %v", err)
	}
}
