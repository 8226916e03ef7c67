package kdclog

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/kdclog/attack"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// documentedRecoverWindow is N of "within the next N AS lines" in
// docs/metrics.md's row of krb5_kdc_preauth_failures_recovered_total.
func documentedRecoverWindow(t *testing.T) uint64 {
	t.Helper()
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^\\| `krb5_kdc_preauth_failures_recovered_total` .*within the next ([0-9,]+) AS lines").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/metrics.md: no recovery window in the row of krb5_kdc_preauth_failures_recovered_total")
	}
	n, err := strconv.ParseUint(strings.ReplaceAll(string(m[1]), ",", ""), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRecoverWindow: an ISSUE for the same client and address counts as
// the recovery of a PREAUTH_FAILED when it is within the next N AS lines
// that docs/metrics.md gives, not one line later. Other clients' AS lines
// fill the gap; TGS lines are not AS lines and do not count.
func TestRecoverWindow(t *testing.T) {
	window := documentedRecoverWindow(t)
	if oRecoverWindow != window {
		t.Errorf("the oracle's window %d, docs/metrics.md says %d", oRecoverWindow, window)
	}
	for _, tc := range []struct {
		name      string
		gap       uint64 // AS lines of other clients between failure and ISSUE
		tgs       int    // TGS lines among them
		recovered float64
	}{
		{"next line", 0, 0, 1},
		{"last line of the window", window - 1, 0, 1},
		{"last line of the window, TGS lines between", window - 1, 50, 1},
		{"first line after the window", window, 0, 0},
		{"long after", 2 * window, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounts()
			s := newSource(config.LogSource{Path: "t", Type: "kdc"}, c, &sourceStats{})
			feed := func(l string) { s.handle([]byte(l), false) }
			feed(hdr + "preauth (encrypted_timestamp) verify failure: Preauthentication failed")
			feed(asLine("PREAUTH_FAILED", "alice@PERF.TEST", ", Preauthentication failed"))
			for i := range tc.tgs {
				feed(tgsIssue("user" + strconv.Itoa(i) + "@PERF.TEST"))
			}
			for i := range tc.gap {
				feed(asLine("NEEDED_PREAUTH", "user"+strconv.FormatUint(i, 10)+"@PERF.TEST", ", Additional pre-authentication required"))
			}
			feed(asIssue("alice@PERF.TEST"))
			s.flush()
			byMethod := map[string]float64{}
			for m := range c.recovered {
				if v := c.recovered[m].Load(); v > 0 {
					byMethod[c.methods.name(m)] += float64(v)
				}
			}
			if got := byMethod["encrypted_timestamp"]; got != tc.recovered || len(byMethod) > 1 {
				t.Errorf("recovered %v, want %v from encrypted_timestamp (the ISSUE is AS line %d after the failure)", byMethod, tc.recovered, tc.gap+1)
			}
		})
	}
}

// TestRecoverAcrossWorkers: failures and their recoveries as krb5kdc -w N
// logs them, each line from the worker (pid) that answered, interleaved.
// Every PREAUTH_FAILED followed within the window by an ISSUE for the same
// client and address counts, by the method of its own worker's verify
// failure line, also when two workers' pids are equal modulo 16.
func TestRecoverAcrossWorkers(t *testing.T) {
	by := func(pid int, line string) string {
		return strings.Replace(line, "krb5kdc[7559]", "krb5kdc["+strconv.Itoa(pid)+"]", 1)
	}
	verify := func(pid int, method string) string {
		return by(pid, hdr+"preauth ("+method+") verify failure: Preauthentication failed")
	}
	failed := func(pid int, client string) string {
		return by(pid, asLine("PREAUTH_FAILED", client, ", Preauthentication failed"))
	}
	issue := func(pid int, client string) string { return by(pid, asIssue(client)) }
	const alice, bob = "alice@PERF.TEST", "bob@PERF.TEST"
	for _, tc := range []struct {
		name  string
		lines []string
		want  map[string]float64
	}{
		{"two fallbacks of one client on two workers, ISSUEs after both", []string{
			verify(100, "spake"), failed(100, alice),
			verify(101, "spake"), failed(101, alice),
			issue(101, alice), issue(100, alice),
		}, map[string]float64{"spake": 2}},
		{"verify lines of two workers before their AS lines", []string{
			verify(100, "spake"), verify(116, "encrypted_timestamp"),
			failed(116, bob), failed(100, alice),
			issue(117, alice), issue(101, bob),
		}, map[string]float64{"spake": 1, "encrypted_timestamp": 1}},
		{"a retyped password: both failures followed by the ISSUE", []string{
			verify(100, "encrypted_timestamp"), failed(100, alice),
			verify(101, "encrypted_timestamp"), failed(101, alice),
			issue(100, alice),
		}, map[string]float64{"encrypted_timestamp": 2}},
		{"a verify line belongs to its own AS line only", []string{
			verify(100, "spake"), issue(100, bob),
			failed(100, alice), issue(100, alice),
		}, map[string]float64{"other": 1}},
		{"more failures of one client than are kept: the oldest is dropped", []string{
			failed(100, alice), failed(101, alice), failed(100, alice),
			failed(101, alice), failed(100, alice), issue(101, alice),
		}, map[string]float64{"other": attack.MaxRecovered}},
		{"another client's ISSUE recovers nothing", []string{
			verify(100, "spake"), failed(100, alice), issue(101, bob),
		}, map[string]float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounts()
			s := newSource(config.LogSource{Path: "t", Type: "kdc"}, c, &sourceStats{})
			for _, l := range tc.lines {
				s.handle([]byte(l), false)
			}
			s.flush()
			got := map[string]float64{}
			for m := range c.recovered {
				if v := c.recovered[m].Load(); v > 0 {
					got[c.methods.name(m)] += float64(v)
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("recovered %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSPAKEFallbacksAcrossWorkers: MIT kinit with only a SPAKE group the
// KDC lacks (P-256 against the harness's edwards25519) fails its SPAKE
// step and logs in with encrypted timestamp instead, against krb5kdc -w 2.
// Four clients at once, two per principal, so that one principal's
// fallbacks overlap and are answered by either worker: every kinit
// succeeded (the clients' own word), so every one of their PREAUTH_FAILED
// lines was followed by an ISSUE, and all are counted recovered under
// spake; the oracle agrees line by line.
func TestSPAKEFallbacksAcrossWorkers(t *testing.T) {
	needMIT(t)
	r, tm := followedRealm(t, realm.Options{Users: 2, Services: 1, Fillers: -1, Workers: 2, NoKadmind: true, DisableLastSuccess: true})
	conf, err := os.ReadFile(r.Krb5Conf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "spake_preauth_groups = edwards25519") {
		t.Fatalf("%s does not offer edwards25519:\n%s", r.Krb5Conf, conf)
	}
	clientConf := filepath.Join(t.TempDir(), "krb5.conf")
	if err := os.WriteFile(clientConf, []byte(strings.Replace(string(conf), "spake_preauth_groups = edwards25519", "spake_preauth_groups = P-256", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	const clients, each = 4, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	logins := 0
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := append(os.Environ(), r.Env()...)
			env = append(env, "KRB5_CONFIG="+clientConf, "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "cc"))
			for range each {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				cmd := exec.CommandContext(ctx, "kinit", "-k", "-t", r.UserKeytab, r.User(c%2+1))
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					t.Errorf("kinit with P-256 only: %v: %s", err, out)
					return
				}
				mu.Lock()
				logins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
	got := gather(t, tm.reg)
	failed := got[key("krb5_kdc_requests_total", "request", "as", "status", "PREAUTH_FAILED")]
	recovered := got[key("krb5_kdc_preauth_failures_recovered_total", "method", "spake")]
	t.Logf("%d logins: %v PREAUTH_FAILED, %v recovered from spake", logins, failed, recovered)
	if failed < float64(logins) {
		t.Errorf("%d logins falling back logged %v PREAUTH_FAILED, want one each at least", logins, failed)
	}
	if recovered != failed {
		t.Errorf("%v PREAUTH_FAILED of logins that all succeeded, %v counted recovered from spake", failed, recovered)
	}
	compareSeries(t, got, oracle(t, []string{realm.ReadyPrincipal}, r.KDCLog))
}
