package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// SIGTERM ends the daemon within 5 s while its journalctl child is
// stopped (SIGSTOP: it neither reads, writes nor exits), and the journal
// cursor of the last entry counted is in the position file.
func TestSIGTERMWithStoppedJournalctl(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(realm.JournalRemote); err != nil {
		if testutil.InCI() {
			t.Fatalf("%s missing in CI: %v", realm.JournalRemote, err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	jdir := filepath.Join(dir, "journal")
	os.Mkdir(jdir, 0o700)
	var export bytes.Buffer
	for i := range 20 {
		fmt.Fprintf(&export, "__REALTIME_TIMESTAMP=%d\n_BOOT_ID=0123456789abcdef0123456789abcdef\nSYSLOG_IDENTIFIER=krb5kdc\n_COMM=krb5kdc\n_UID=0\n_PID=7\nMESSAGE=AS_REQ line %d\n\n", 1764556800000000+i, i)
	}
	remote := exec.Command(realm.JournalRemote, "--output="+filepath.Join(jdir, "system.journal"), "-")
	remote.Stdin = &export
	if out, err := remote.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The last entry's cursor, as journalctl itself tells it.
	out, err := exec.Command("journalctl", "--directory="+jdir, "--output=json", "--lines=1", "--output-fields=__CURSOR").Output()
	var last struct {
		Cursor string `json:"__CURSOR"`
	}
	if err != nil || json.Unmarshal(out, &last) != nil || last.Cursor == "" {
		t.Fatalf("journalctl: %v %s", err, out)
	}
	cfg := filepath.Join(dir, "c.yml")
	pos := filepath.Join(dir, "pos.json")
	os.WriteFile(cfg, []byte("logs:\n  - type: kdc\n    start_at: beginning\n    journal: {directory: "+jdir+"}\n"), 0o600)
	base, cmd, logs := daemon(t, "--config.file", cfg, "--kdclog.position-file", pos,
		"--no-collector.process", "--no-collector.network", "--no-collector.kdcconf")
	path := "journal:" + jdir + ":krb5kdc"
	testutil.Eventually(t, 60*time.Second, "the 20 entries counted", func() bool {
		return metric(t, base, `krb5_kdc_log_lines_read_total{path="`+path+`"}`) != "" &&
			strings.HasSuffix(metric(t, base, `krb5_kdc_log_lines_read_total{path="`+path+`"}`), " 20")
	})
	child := journalctlChild(t, cmd.Process.Pid)
	if err := syscall.Kill(child, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(child, syscall.SIGKILL)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
		t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the daemon did not exit within 5 s of SIGTERM with journalctl stopped:\n%s", logs.String())
	}
	b, err := os.ReadFile(pos)
	if err != nil || !strings.Contains(string(b), strconv.Quote(last.Cursor)) {
		t.Errorf("the position file lacks the last entry's cursor %s: %v\n%s", last.Cursor, err, b)
	}
}

// journalctlChild is the pid of the journalctl that parent runs.
func journalctlChild(t *testing.T, parent int) int {
	t.Helper()
	var pid int
	testutil.Eventually(t, 30*time.Second, "the journalctl child", func() bool {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, p := range strings.Fields(string(b)) {
				comm, _ := os.ReadFile("/proc/" + p + "/comm")
				if strings.TrimSpace(string(comm)) == "journalctl" {
					pid, _ = strconv.Atoi(p)
					return true
				}
			}
		}
		return false
	})
	return pid
}
