package kdclog

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestEndToEndRotation rotates a real KDC's log the ways logrotate does —
// rename then SIGHUP (krb5kdc reopens its log), the same while the
// exporter is stopped, and copytruncate — with logins before and after
// each step, and checks that the counters summed over both exporter runs
// equal an independent count of every line the KDC wrote.
func TestEndToEndRotation(t *testing.T) {
	needMIT(t)
	r, err := realm.Up(context.Background(), realm.Options{
		Dir: filepath.Join(t.TempDir(), "realm"), Users: 6, Services: 2, Fillers: -1, NoKadmind: true, DisableLastSuccess: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Down()
	c := clients{t: t, r: r}
	login := func(i int) {
		c.ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(i))
		c.ok("", "kvno", "--no-store", r.Service(1))
	}
	// hup is logrotate's postrotate: the KDC reopens (and creates) its log.
	hup := func() {
		pids := r.KDCPids()
		if len(pids) == 0 {
			t.Fatal("no krb5kdc")
		}
		if err := syscall.Kill(pids[0], syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(r.KDCLog); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("krb5kdc did not reopen its log after SIGHUP")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	rotated := func(n string) string { return r.KDCLog + "." + n }

	posFile := filepath.Join(t.TempDir(), "positions.json")
	src := config.LogSource{Path: r.KDCLog, Type: "kdc", StartAt: "beginning", PollInterval: 20 * time.Millisecond,
		RotateWait: 2 * time.Second, ProbePrincipals: []string{realm.ReadyPrincipal}}
	tm := startManager(t, posFile, src)
	login(1)

	// rename + SIGHUP while the exporter runs.
	if err := os.Rename(r.KDCLog, rotated("1")); err != nil {
		t.Fatal(err)
	}
	login(2) // still to the renamed file
	hup()
	login(3)
	waitValue(t, tm.reg, 3, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	waitValue(t, tm.reg, 0, "krb5_kdc_log_bytes_behind", "path", r.KDCLog)
	time.Sleep(50 * time.Millisecond)
	first := gather(t, tm.reg)
	tm.stop()
	if v := first[key("krb5_kdc_requests_total", "request", "as", "status", "ISSUE")]; v != 3 {
		t.Errorf("first run: %v logins, want 3", v)
	}

	// rename + SIGHUP while the exporter is stopped, logins before and after.
	login(4)
	if err := os.Rename(r.KDCLog, rotated("2")); err != nil {
		t.Fatal(err)
	}
	hup()
	login(5)
	tm = startManager(t, posFile, src)
	waitValue(t, tm.reg, 2, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	waitValue(t, tm.reg, 0, "krb5_kdc_log_bytes_behind", "path", r.KDCLog)

	// copytruncate while it runs (no traffic between copy and truncation).
	data, err := os.ReadFile(r.KDCLog)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rotated("3"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(r.KDCLog, 0); err != nil {
		t.Fatal(err)
	}
	login(6)
	waitValue(t, tm.reg, 1, "krb5_kdc_log_rotations_total", "path", r.KDCLog, "kind", "truncate")
	// The second run counts logins 4 (read on in the file rotated while
	// stopped), 5 and 6.
	waitValue(t, tm.reg, 3, "krb5_kdc_requests_total", "request", "as", "status", "ISSUE")
	waitValue(t, tm.reg, 3, "krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")
	waitValue(t, tm.reg, 0, "krb5_kdc_log_bytes_behind", "path", r.KDCLog)
	time.Sleep(100 * time.Millisecond)
	second := gather(t, tm.reg)

	sum := series{}
	for _, s := range []series{first, second} {
		for k, v := range s {
			sum[k] += v
		}
	}
	want := oracle(t, src.ProbePrincipals, rotated("1"), rotated("2"), rotated("3"), r.KDCLog)
	compareSeries(t, sum, want)
	for _, k := range []string{
		key("krb5_kdc_requests_total", "request", "as", "status", "ISSUE"),
		key("krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE"),
	} {
		if sum[k] != 6 {
			t.Errorf("%s = %v over both runs, the clients made 6", k, sum[k])
		}
	}
	for reason, n := range map[string]float64{"rotated_recovered": 1} {
		if v := value(t, tm.reg, "krb5_kdc_log_position_mismatches_total", "path", r.KDCLog, "reason", reason); v != n {
			t.Errorf("mismatch %s = %v, want %v", reason, v, n)
		}
	}
	if v := value(t, tm.reg, "krb5_kdc_log_truncation_copies_read_total", "path", r.KDCLog); v != 1 {
		t.Errorf("copy of the truncated log read %v times, want 1", v)
	}
}
