package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// kdcLines appends n request lines of krb5kdc to path.
func kdcLines(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range n {
		fmt.Fprintf(f, "Nov 30 06:15:34 kdc1 krb5kdc[7559](info): AS_REQ (1 etypes {aes256-cts-hmac-sha1-96(18)}) 127.0.0.1: ISSUE: authtime 1796019334, etypes {rep=aes256-cts-hmac-sha1-96(18), tkt=aes256-cts-hmac-sha1-96(18), ses=aes256-cts-hmac-sha1-96(18)}, user%04d@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST\n", i)
	}
}

// logConfig writes a configuration that counts path from its beginning.
func logConfig(t *testing.T, dir, path string) string {
	t.Helper()
	cfg := filepath.Join(dir, "c.yml")
	if err := os.WriteFile(cfg, []byte("logs:\n  - path: "+path+"\n    type: kdc\n    start_at: beginning\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// waitIssued waits until the exporter at base counted want logins.
func waitIssued(t *testing.T, base string, want int) {
	t.Helper()
	name := `krb5_kdc_requests_total{request="as",status="ISSUE"}`
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := -1
		for _, l := range metricLines(t, base, "krb5_kdc_requests_total") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				got, _ = strconv.Atoi(v)
			}
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", name, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSecondInstanceRefuses starts a second exporter on the position file
// of a running one: it must refuse with an error naming the first, and
// the first must still count every line (the second read none).
func TestSecondInstanceRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "krb5kdc.log")
	pos := filepath.Join(dir, "positions.json")
	kdcLines(t, logPath, 10)
	cfg := logConfig(t, dir, logPath)
	base, first, _ := daemon(t, "--config.file", cfg, "--kdclog.position-file", pos,
		"--no-collector.process", "--no-collector.network", "--no-collector.kdcconf")
	waitIssued(t, base, 10)

	_, stderr, code := exporter(t, "--web.listen-address", "127.0.0.1:0", "--config.file", cfg,
		"--kdclog.position-file", pos, "--no-collector.process", "--no-collector.network", "--no-collector.kdcconf")
	if code != 1 {
		t.Errorf("second instance exited %d, want 1", code)
	}
	oneErrorLine(t, stderr, "in use by another process (pid "+strconv.Itoa(first.Process.Pid)+")")
	kdcLines(t, logPath, 5)
	waitIssued(t, base, 15)
}

// TestTakenPortReadsNoLog starts an exporter on a port another socket
// holds: it must exit before reading the log, so that the next exporter
// with the same position file counts every line.
func TestTakenPortReadsNoLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "krb5kdc.log")
	pos := filepath.Join(dir, "positions.json")
	kdcLines(t, logPath, 7)
	cfg := logConfig(t, dir, logPath)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, stderr, code := exporter(t, "--web.listen-address", taken.Addr().String(), "--config.file", cfg,
		"--kdclog.position-file", pos, "--kdclog.position-sync-interval", "10ms",
		"--no-collector.process", "--no-collector.network", "--no-collector.kdcconf")
	if code != 1 {
		t.Errorf("exporter on a taken port exited %d, want 1", code)
	}
	oneErrorLine(t, stderr, "address already in use")
	if _, err := os.Stat(pos); !os.IsNotExist(err) {
		t.Errorf("the exporter that could not serve wrote a position file (%v)", err)
	}
	base, _, _ := daemon(t, "--config.file", cfg, "--kdclog.position-file", pos,
		"--no-collector.process", "--no-collector.network", "--no-collector.kdcconf")
	waitIssued(t, base, 7)
}

// counterValue reads one unlabelled counter (or -1).
func counterValue(t *testing.T, base, name string) int {
	t.Helper()
	for _, l := range metricLines(t, base, name) {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// TestCrashRecountsOnlySinceLastSync kills the exporter (SIGKILL: no
// position saved on the way out) and checks the README's claim: after a
// crash only what was read since the last write of the position file is
// counted again, and nothing is lost.
func TestCrashRecountsOnlySinceLastSync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "krb5kdc.log")
	pos := filepath.Join(dir, "positions.json")
	cfg := logConfig(t, dir, logPath)
	args := []string{"--config.file", cfg, "--kdclog.position-file", pos, "--kdclog.position-sync-interval", "100ms",
		"--no-collector.process", "--no-collector.network", "--no-collector.kdcconf"}
	kdcLines(t, logPath, 200)
	base, first, _ := daemon(t, args...)
	waitIssued(t, base, 200)
	// The position file on disk records the end of the 200 lines (the
	// file is written only when a position changed: waiting for one more
	// write after the count could wait for ever).
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the position file to record the 200 lines", func() bool {
		off, ok := savedOffset(t, pos, logPath)
		return ok && off == fi.Size()
	})
	kdcLines(t, logPath, 30)
	waitIssued(t, base, 230)
	first.Process.Kill()
	first.Wait()

	kdcLines(t, logPath, 5)
	base2, _, _ := daemon(t, args...)
	// Counted again: the 30 lines if no write of the position file came
	// between them and the kill, none if one did; never the 200 before.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := -1
		for _, l := range metricLines(t, base2, "krb5_kdc_requests_total") {
			if v, ok := strings.CutPrefix(l, `krb5_kdc_requests_total{request="as",status="ISSUE"} `); ok {
				got, _ = strconv.Atoi(v)
			}
		}
		if got == 5 || got == 35 {
			break
		}
		if got > 35 || time.Now().After(deadline) {
			t.Fatalf("after the crash the next exporter counted %d lines, want 5 (+30 read since the last sync)", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
