//go:build linux

package testutil

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Tracefs makes sure tracefs is mounted where cilium/ebpf looks for it
// (the per-syscall tracepoints' ids are read there): a systemd host mounts
// it at boot, a container may not. Mounted here, it is unmounted when the
// test ends.
func Tracefs(t testing.TB) {
	t.Helper()
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(dir + "/events"); err == nil {
			return
		}
	}
	const dir = "/sys/kernel/tracing"
	if err := unix.Mount("tracefs", dir, "tracefs", 0, ""); err != nil {
		if InCI() {
			t.Fatalf("mount tracefs: %v", err)
		}
		t.Logf("tracefs not mounted, and mounting it failed: %v", err)
		return
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
}
