package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// As a user tries it: realm up --log-to-syslog leaves a relay process
// serving the daemons' /dev/log, writes a configuration that follows the
// journal, the daemon counts the logins made, and realm down stops the
// relay with the daemons.
func TestRealmUpLogToSyslog(t *testing.T) {
	t.Parallel()
	realmtest.RequireMIT(t)
	if _, err := os.Stat(realm.JournalRemote); err != nil {
		if testutil.InCI() {
			t.Fatalf("%s missing in CI: %v", realm.JournalRemote, err)
		}
		t.Skip(err)
	}
	dir := filepath.Join(t.TempDir(), "r")
	cfg := filepath.Join(t.TempDir(), "exporter.yml")
	_, stderr, code := exporter(t, "realm", "up", "--dir", dir, "--users=3", "--services=1", "--fillers=-1", "--log-to-syslog", "--exporter-config", cfg)
	if code != 0 {
		t.Fatalf("realm up --log-to-syslog: %d %s", code, stderr)
	}
	t.Cleanup(func() { exporter(t, "realm", "down", "--dir", dir) })
	b, err := os.ReadFile(filepath.Join(dir, "syslog-relay.pid"))
	if err != nil {
		t.Fatal(err)
	}
	relay, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(relay) + "/cmdline"); !strings.Contains(string(cmdline), realm.RelayCommand) {
		t.Fatalf("no relay running as pid %d: %q", relay, cmdline)
	}
	if c, _ := os.ReadFile(cfg); !strings.Contains(string(c), "journal: {directory: "+filepath.Join(dir, "journal")+journalUser(os.Getuid())+"}") {
		t.Fatalf("the configuration does not follow the journal:\n%s", c)
	}
	r, err := realm.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		kinit := exec.Command("kinit", "-k", "-t", r.UserKeytab, r.User(i))
		kinit.Env = append(os.Environ(), r.Env()...)
		if out, err := kinit.CombinedOutput(); err != nil {
			t.Fatalf("kinit: %v %s", err, out)
		}
	}
	base, _, logs := daemon(t, "--config.file", cfg)
	want := `krb5_kdc_requests_total{request="as",status="ISSUE"} 3`
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(strings.Join(metricLines(t, base, "krb5_kdc_requests_total"), "\n"), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s: %v\n%s", want, metricLines(t, base, "krb5_kdc_requests_total"), logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, stderr, code := exporter(t, "realm", "down", "--dir", dir); code != 0 {
		t.Fatalf("realm down: %s", stderr)
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(relay) + "/stat"); err == nil && !strings.Contains(string(b), ") Z ") {
		t.Errorf("relay pid %d still running after realm down", relay)
	}
}
