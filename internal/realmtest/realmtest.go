// Package realmtest holds the test helpers that run the harness (package
// realm): a throwaway MIT realm or replica per test, kadmin.local commands,
// loopback ports leased from the harness's pool, and loads and log
// witnesses against a realm's KDC. The harness-free helpers (polling,
// scrapes, loggers, the race and CI switches) are in internal/testutil,
// which must not import realm: tests that need no KDC do not link it
// (config's TestTestCoreDoesNotLinkTheHarness). Test code only.
package realmtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// RequireMIT skips the test when the MIT krb5 programs are missing, and
// fails it instead in CI: a broken install must not look like a pass.
func RequireMIT(t testing.TB) {
	t.Helper()
	if err := realm.Available(); err != nil {
		if testutil.InCI() {
			t.Fatalf("MIT krb5 programs missing in CI: %v", err)
		}
		t.Skipf("MIT krb5 programs not installed: %v", err)
	}
}

// Realm starts a small private MIT realm for one test and removes it when
// the test ends. Zero counts in opts mean 4 users, 2 services, no fillers
// (the harness's own zero values mean the seed's large realm). It returns
// once the KDC answers, every `-w N` worker has forked and, unless
// NoKadmind, kadmind has written its pid file.
func Realm(t testing.TB, opts realm.Options) *realm.Realm {
	t.Helper()
	RequireMIT(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Users == 0 {
		opts.Users = 4
	}
	if opts.Services == 0 {
		opts.Services = 2
	}
	if opts.Fillers == 0 {
		opts.Fillers = -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := realm.Up(ctx, opts)
	if err != nil {
		t.Fatalf("realm: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Down(); err != nil {
			t.Errorf("realm down: %v", err)
		}
	})
	testutil.Eventually(t, 30*time.Second, "every KDC worker and kadmind running", func() bool {
		return len(r.KDCPids()) == opts.Workers+1 && (opts.NoKadmind || r.KadmindPid() > 0)
	})
	return r
}

// TrustRealm is the name of the trusted realm of Trusted.
const TrustRealm = "TRUST.TEST"

// Trusted starts two small private realms with a two-way trust for one
// test (realm.Options.Trust): opts's realm (PERF.TEST by default) and
// TrustRealm, each with its own KDC, removed when the test ends.
func Trusted(t testing.TB, opts realm.Options) (a, b *realm.Realm) {
	t.Helper()
	if opts.Trust == "" {
		opts.Trust = TrustRealm
	}
	opts.NoKadmind = true
	a = Realm(t, opts)
	b = a.Trusted
	if b == nil || len(b.KDCPids()) == 0 {
		t.Fatalf("the trusted realm %s is not running", opts.Trust)
	}
	return a, b
}

// Kadmin runs kadmin.local commands against r and fails the test when one
// reports an error.
func Kadmin(t testing.TB, r *realm.Realm, cmds ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := r.KadminLocal(ctx, cmds...)
	if err != nil {
		t.Fatalf("kadmin.local %q: %v\n%s", cmds, err, out)
	}
	return out
}

// DeadAddr returns a loopback address where nothing listens, over UDP
// (ICMP port unreachable: connection refused) and TCP (reset). The port is
// reserved by the harness's allocator for the test's lifetime (realm's
// pool, below the kernel's ephemeral range): no socket of this machine
// gets it by accident, as a released ephemeral port could come back as a
// client's own source port, and that client would then talk to itself.
func DeadAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Port(t, realm.TCPUDP)))
}

// Port reserves a loopback port free for need for the test's lifetime
// (realm.LeasePort): for a child process to listen on, instead of a port
// the kernel chose and the test released, which any socket may take
// before the child binds it.
func Port(t testing.TB, need realm.PortNeed) int {
	t.Helper()
	l, err := realm.LeasePort(need)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Release)
	return l.Port
}

// Addr is Port for TCP as a 127.0.0.1:port address.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Port(t, realm.TCP)))
}

// RequireKpropd skips a test when MIT's kpropd is not installed, and fails
// it in CI.
func RequireKpropd(t testing.TB) {
	t.Helper()
	if err := realm.KpropdAvailable(); err != nil {
		if testutil.InCI() {
			t.Fatalf("kpropd missing in CI: %v", err)
		}
		t.Skip(err)
	}
}

// Replica starts a replica of the primary p (realm.UpReplica: its own KDC
// and database, kpropd polling p's kadmind every second) for one test and
// removes it when the test ends. Without kpropd it skips, and fails in CI.
func Replica(t testing.TB, p *realm.Realm) *realm.Realm {
	t.Helper()
	RequireKpropd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := realm.UpReplica(ctx, p, realm.Options{Dir: t.TempDir()}, 0)
	if err != nil {
		t.Fatalf("replica: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Down(); err != nil {
			t.Errorf("replica down: %v", err)
		}
	})
	return r
}

// PreauthLoad sends clients × n AS-REQs without pre-authentication for the
// realm's first four users, each client over UDP from its own socket, and
// returns how many replies came back: the KDC answers each with
// PREAUTH_REQUIRED and logs one NEEDED_PREAUTH line.
func PreauthLoad(t testing.TB, r *realm.Realm, clients, n int) int {
	t.Helper()
	var mu sync.Mutex
	replies := 0
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("udp", r.KDCAddr)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			buf := make([]byte, 4096)
			for i := range n {
				pkt, err := realm.ASRequest(r.Realm, strings.TrimSuffix(r.User((c*n+i)%4+1), "@"+r.Realm))
				if err != nil {
					t.Error(err)
					return
				}
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := conn.Write(pkt); err != nil {
					t.Error(err)
					return
				}
				if _, err := conn.Read(buf); err == nil {
					mu.Lock()
					replies++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return replies
}

// The KDC log lines of a harness realm's users getting a TGT (ASIssue)
// and a ticket for one of its services (TGSIssue).
const (
	ASIssue  = `AS_REQ .* 127\.0\.0\.1: ISSUE: .* user\d+@PERF\.TEST for krbtgt/`
	TGSIssue = `TGS_REQ .* 127\.0\.0\.1: ISSUE: .* user\d+@PERF\.TEST for HTTP/web`
)

// DrainKDC returns once the KDC has logged every request sent to it so
// far: a load cut off at its end leaves requests queued at the KDC, which
// it answers (and logs) afterwards. One KDC process takes its UDP
// datagrams in order and logs each before it replies, so once a login of
// an unknown principal sent now has failed, its log line (and every
// earlier one) is in the log.
func DrainKDC(t testing.TB, r *realm.Realm) {
	t.Helper()
	name := fmt.Sprintf("drain%d", drains.Add(1))
	cmd := exec.Command("kinit", name)
	cmd.Env = append(os.Environ(), r.Env()...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not found") {
		t.Fatalf("kinit %s: %v: %s", name, err, out)
	}
	re := regexp.MustCompile(`CLIENT_NOT_FOUND: ` + name + `@`)
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, err := os.ReadFile(r.KDCLog)
		if err != nil {
			t.Fatal(err)
		}
		if re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the KDC never logged the login of %s", name)
		}
		time.Sleep(5 * time.Millisecond) // should the log be written after the reply
	}
}

var drains atomic.Int64

// keyState picks what a password or key change alters from getprinc.
var keyState = regexp.MustCompile(`(?m)^(Last modified: .*|Last password change: .*|Key: vno \d+.*)$`)

// KeyState is a principal's key versions, last password change and last
// modification as kadmin.local's getprinc reads them: the oracle that a
// probe changed no password or key.
func KeyState(t testing.TB, r *realm.Realm, princ string) string {
	t.Helper()
	out := Kadmin(t, r, "getprinc "+princ)
	m := keyState.FindAllString(out, -1)
	if len(m) < 3 {
		t.Fatalf("getprinc %s: no kvno or dates in\n%s", princ, out)
	}
	return strings.Join(m, "\n") + "\n"
}
