package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// An existing realm's KDC processes, from its pid file: those the
// harness started (realm's own walk of /proc), and none when the pid
// file names a process that is not a krb5kdc (a stale file whose pid was
// reused): a stranger's CPU and memory are never the KDC's.
func TestBenchKDCPidsFromPidFile(t *testing.T) {
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
