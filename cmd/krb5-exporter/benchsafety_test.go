package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench"
)

// The results go to OUTPUT_DIR/<timestamp>, a name known in advance: a
// link planted there is refused, and its target receives nothing.
func TestBenchResultsRefusePlantedLink(t *testing.T) {
	out, victim := t.TempDir(), t.TempDir()
	dir := filepath.Join(out, "20260101T000000Z")
	if err := os.Symlink(victim, dir); err != nil {
		t.Fatal(err)
	}
	rep := &bench.Report{Started: time.Now(), Verdict: bench.Pass}
	if err := writeResults(rep, dir, ""); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("writing through a planted link: %v", err)
	}
	if entries, _ := os.ReadDir(victim); len(entries) != 0 {
		t.Errorf("the link's target received %v", entries)
	}
	os.Remove(dir)
	if err := writeResults(rep, dir, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.json")); err != nil {
		t.Error(err)
	}
}

// The bench daemon binds its port before the first run: a taken port
// ends it at once with exit 2, before the run takes its lock or loads
// the KDC.
func TestBenchDaemonTakenPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "bench.yml")
	if err := os.WriteFile(cfg, []byte("realm: {name: R.TEST, kdc: \"127.0.0.1:1\", domain: r.test, users: 1, services: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "bench", "--config.file", cfg, "--tests", "as", "--duration", "1s",
		"--web.listen-address", ln.Addr().String(), "--output-dir", filepath.Join(tmp, "out"))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "address already in use") {
		t.Fatalf("taken port: %v after %s: %s", err, took, out)
	}
	if locks, _ := filepath.Glob(filepath.Join(tmp, "krb5-bench-*.lock")); len(locks) > 0 {
		t.Errorf("a run began before the port was bound (lock %v) and took %s", locks, took)
	}
	t.Logf("exit 2 after %s: %s", took, out)
}
