package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// SIGTERM in the middle of a load ends `bench` within 5 s, --once and the
// daemon alike: the ephemeral realm's krb5kdc and kadmind are gone with
// its directory, and against an existing realm the lock is released (a
// second bench takes it) while that realm's KDC is left running.
func TestBenchStopsMidLoad(t *testing.T) {
	realmtest.RequireMIT(t)
	for _, test := range []string{"as", "tgs", "tcp", "latency", "degradation"} {
		t.Run(test, func(t *testing.T) {
			stderr, code := stopMidLoad(t, test, longLoad(smallBench(t.TempDir(), "--tests", test)), "")
			// docs/bench.md: an interrupted run is exit 1, the test cut short an error.
			if code != 1 || !regexp.MustCompile(`bench: `+test+` error in [0-9.]+s: context canceled`).MatchString(stderr) {
				t.Errorf("exit %d, want 1 with %s an error; stderr:\n%s", code, test, stderr)
			}
		})
	}
	t.Run("daemon", func(t *testing.T) {
		args := append(longLoad(smallBench(t.TempDir(), "--tests", "as")), "--web.listen-address", realmtest.Addr(t), "--interval", "1h")
		args = slices.DeleteFunc(args, func(a string) bool { return a == "--once" })
		if stderr, code := stopMidLoad(t, "as", args, ""); code != 0 {
			t.Errorf("daemon: exit %d, want 0; stderr:\n%s", code, stderr)
		}
	})
	t.Run("existing realm", func(t *testing.T) {
		t.Setenv("TMPDIR", t.TempDir()) // the lock file
		r := realmtest.Realm(t, realm.Options{Users: 6, Services: 3})
		cfg := filepath.Join(t.TempDir(), "bench.yml")
		yml := fmt.Sprintf("realm:\n  name: %s\n  kdc: %s\n  users_keytab: %s\n  users: 6\n  services: 3\n  krb5_config: %s\n  kdc_log: %s\n",
			r.Realm, r.KDCAddr, r.UserKeytab, r.Krb5Conf, r.KDCLog)
		if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"bench", "--once", "--config.file", cfg, "--output-dir", t.TempDir(), "--tests", "as", "--clients", "2", "--duration", "10m"}
		if _, code := stopMidLoad(t, "as", args, r.KDCLog); code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		if len(r.KDCPids()) == 0 {
			t.Error("the existing realm's KDC was stopped")
		}
		// The lock is free: a second bench runs instead of being refused.
		if _, stderr, code := exporter(t, "bench", "--once", "--config.file", cfg, "--output-dir", t.TempDir(), "--tests", "as", "--clients", "2", "--duration", "200ms", "--target.as-min-rate", "1"); code != 0 {
			t.Errorf("second bench: exit %d\n%s", code, stderr)
		}
	})
}

// longLoad makes smallBench's loads last far longer than the test waits.
func longLoad(args []string) []string {
	args = slices.Clone(args)
	for i := range args[:len(args)-1] {
		switch args[i] {
		case "--duration":
			args[i+1] = "10m"
		case "--degradation-logins":
			args[i+1] = "10000000"
		}
	}
	return args
}

// stopMidLoad starts bench with args, waits until the KDC answers its test
// (the KDC's log grows after "bench: TEST ..."), sends SIGTERM and
// returns once it ended within 5 s. With kdcLog "" the realm is the
// bench's own, which must be gone afterwards: its directory and every
// krb5kdc and kadmind process read from its pid files.
func stopMidLoad(t *testing.T, test string, args []string, kdcLog string) (string, int) {
	t.Helper()
	stderr := &testutil.LockedBuffer{}
	cmd := exec.Command(binary, args...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	running := func() bool {
		select {
		case <-done:
			t.Fatalf("bench ended before SIGTERM (exit %d):\n%s", cmd.ProcessState.ExitCode(), stderr.String())
		default:
		}
		return true
	}
	var dir string
	if kdcLog == "" {
		testutil.Eventually(t, 60*time.Second, "the ephemeral realm's directory", func() bool {
			m := regexp.MustCompile(`creating an ephemeral realm in (\S+)`).FindStringSubmatch(stderr.String())
			if m != nil {
				dir = m[1]
			}
			return running() && m != nil
		})
		kdcLog = filepath.Join(dir, "krb5kdc.log")
	}
	testutil.Eventually(t, 60*time.Second, "bench: "+test+" ...", func() bool {
		return running() && strings.Contains(stderr.String(), "bench: "+test+" ...\n")
	})
	var pids []int
	if dir != "" {
		if rl, err := realm.Load(dir); err == nil {
			pids = rl.KDCPids()
			if p := rl.KadmindPid(); p > 0 {
				pids = append(pids, p)
			}
		}
		// A failed test must not leave the realm behind.
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-done
			for _, p := range alive(pids) {
				syscall.Kill(p, syscall.SIGKILL)
			}
			os.RemoveAll(dir)
		})
		if len(pids) < 2 {
			t.Fatalf("pids of the realm's krb5kdc and kadmind: %v", pids)
		}
	}
	size := func() int64 {
		fi, err := os.Stat(kdcLog)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	base := size()
	testutil.Eventually(t, 30*time.Second, "the KDC logging the load", func() bool { return running() && size() > base+4096 })
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5 s after SIGTERM in the middle of %s:\n%s", test, stderr.String())
	}
	t.Logf("%s: ended %v after SIGTERM", test, time.Since(sent).Round(time.Millisecond))
	if left := alive(pids); len(left) > 0 {
		t.Errorf("krb5kdc/kadmind of the ephemeral realm still run: pids %v of %v", left, pids)
	}
	if dir != "" {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the ephemeral realm's directory %s is still there: %v", dir, err)
		}
	}
	return stderr.String(), cmd.ProcessState.ExitCode()
}

// alive is those of pids that still are a krb5kdc or kadmind (/proc).
func alive(pids []int) []int {
	var out []int
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err == nil && (strings.Contains(string(b), "krb5kdc") || strings.Contains(string(b), "kadmind")) {
			out = append(out, p)
		}
	}
	return out
}
