package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The lock file in the temporary directory is never a planted link (its
// target would be created as the bench's user), FIFO or another user's
// file (issue 26 item 8).
func TestLockRefusesPlantedFiles(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	e := &ExistingRealm{Name: "R.TEST", KDC: "127.0.0.1:1"}
	lock := filepath.Join(os.TempDir(), "krb5-bench-R.TEST_127.0.0.1_1.lock")
	victim := filepath.Join(t.TempDir(), "victim")
	plants := []struct {
		what  string
		plant func() error
	}{
		{"a link", func() error { return os.Symlink(victim, lock) }},
		{"a FIFO", func() error { return syscall.Mkfifo(lock, 0o666) }},
	}
	if os.Getuid() == 0 {
		plants = append(plants, struct {
			what  string
			plant func() error
		}{"another user's file", func() error {
			if err := os.WriteFile(lock, nil, 0o666); err != nil {
				return err
			}
			return os.Chown(lock, 65534, 65534)
		}})
	}
	for _, p := range plants {
		os.Remove(lock)
		if err := p.plant(); err != nil {
			t.Fatal(err)
		}
		if unlock, err := lockRealm(e, ""); err == nil {
			unlock()
			t.Errorf("%s at the lock's path: locked", p.what)
		}
		if _, err := os.Lstat(victim); err == nil {
			t.Fatalf("%s at the lock's path: its target was created", p.what)
		}
	}
	os.Remove(lock)
	unlock, err := lockRealm(e, "")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}

// An existing realm's KDC processes, from its pid file: those the
// harness started (realm's own walk of /proc), and none when the pid
// file names a process that is not a krb5kdc (a stale file whose pid was
// reused): a stranger's CPU and memory are never the KDC's.
func TestKDCPidsFromPidFile(t *testing.T) {
	stale := filepath.Join(t.TempDir(), "krb5kdc.pid")
	if err := os.WriteFile(stale, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := kdcPids(stale); len(got) != 0 {
		t.Errorf("a pid file naming the test process (not a krb5kdc): pids %v, want none", got)
	}
	r := realmtest.Realm(t, realm.Options{})
	want := r.KDCPids()
	got := kdcPids(r.KDCPidFile)
	slices.Sort(want)
	slices.Sort(got)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("pids %v, the realm's %v", got, want)
	}
}
