// Package testutil holds the helpers the project's tests share: a throwaway
// MIT realm per test, kadmin.local commands, polling until a condition
// holds, and reading series out of a Prometheus registry. Test code only.
package testutil

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// InCI reports whether the tests run in CI (`CI` set, as .ci/run is run).
func InCI() bool { return os.Getenv("CI") != "" }

// RequireMIT skips the test when the MIT krb5 programs are missing, and
// fails it instead in CI: a broken install must not look like a pass.
func RequireMIT(t testing.TB) {
	t.Helper()
	if err := realm.Available(); err != nil {
		if InCI() {
			t.Fatalf("MIT krb5 programs missing in CI: %v", err)
		}
		t.Skipf("MIT krb5 programs not installed: %v", err)
	}
}

// RequireProgram returns the path of the first of names found in PATH.
// When none is, it skips the test, and fails it instead in CI: CI's
// machine is set up by scripts/deps.sh, so a missing program there is a
// broken install, not a pass.
func RequireProgram(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if InCI() {
		t.Fatalf("%s missing in CI (scripts/deps.sh installs it)", strings.Join(names, " or "))
	}
	t.Skipf("%s not installed (scripts/deps.sh installs it)", strings.Join(names, " or "))
	return ""
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
	Eventually(t, 30*time.Second, "every KDC worker and kadmind running", func() bool {
		return len(r.KDCPids()) == opts.Workers+1 && (opts.NoKadmind || r.KadmindPid() > 0)
	})
	return r
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

// Eventually polls cond every 20 ms until it holds; after limit it fails
// the test naming what it waited for. The limit is a bound against hangs,
// not a measurement: choose it generously.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v still waiting for %s", limit, what)
		}
	}
}

// Scrape is one Gather of a registry, indexed by metric name.
type Scrape struct {
	t   testing.TB
	MFs map[string]*dto.MetricFamily
}

// Gather collects g once; a gathering error fails the test.
func Gather(t testing.TB, g prometheus.Gatherer) *Scrape {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	s := &Scrape{t: t, MFs: map[string]*dto.MetricFamily{}}
	for _, mf := range mfs {
		s.MFs[mf.GetName()] = mf
	}
	return s
}

// Find returns the value of the first series of name whose labels include
// the name=value pairs given (the series may have more labels): a gauge's
// or counter's value, a histogram's or summary's sample count.
func (s *Scrape) Find(name string, labels ...string) (float64, bool) {
	mf := s.MFs[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if !HasLabels(m, labels...) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.GetSummary().GetSampleCount()), true
		}
	}
	return 0, false
}

// Value is Find that fails the test when no series matches.
func (s *Scrape) Value(name string, labels ...string) float64 {
	s.t.Helper()
	v, ok := s.Find(name, labels...)
	if !ok {
		s.t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// Sum adds the values of every series of name matching the labels.
func (s *Scrape) Sum(name string, labels ...string) float64 {
	var sum float64
	if mf := s.MFs[name]; mf != nil {
		for _, m := range mf.GetMetric() {
			if HasLabels(m, labels...) {
				sum += m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return sum
}

// Count is the number of series of name matching the labels.
func (s *Scrape) Count(name string, labels ...string) int {
	n := 0
	if mf := s.MFs[name]; mf != nil {
		for _, m := range mf.GetMetric() {
			if HasLabels(m, labels...) {
				n++
			}
		}
	}
	return n
}

// Names lists the metric names that start with prefix.
func (s *Scrape) Names(prefix string) []string {
	var out []string
	for n := range s.MFs {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// HasLabels reports whether m carries every name=value pair of labels.
func HasLabels(m *dto.Metric, labels ...string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Logger sends log lines to the test's log.
func Logger(t testing.TB) log.Logger {
	return log.LoggerFunc(func(kv ...any) error {
		t.Helper()
		t.Log(kv...)
		return nil
	})
}

// WriteKeytab writes a 0600 keytab for principal (name@REALM) with keys
// derived from password: kvno 1 from "old-"+password and kvno 2 from
// password, for enctypes 20 and 18, plus a key of another principal, so
// that loaders must pick the right principal and the newest kvno.
func WriteKeytab(t testing.TB, path, principal, password string) {
	t.Helper()
	name, realmName, _ := strings.Cut(principal, "@")
	kt := keytab.New()
	for _, e := range []int32{20, 18} {
		if err := kt.AddEntry(name, realmName, "old-"+password, time.Unix(1e9, 0), 1, e); err != nil {
			t.Fatal(err)
		}
		if err := kt.AddEntry(name, realmName, password, time.Unix(1e9+1, 0), 2, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := kt.AddEntry("someone-else", realmName, password, time.Unix(1e9, 0), 7, 17); err != nil {
		t.Fatal(err)
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// BlackHole returns a loopback UDP address held open for the test's
// lifetime that never answers: requests to it time out.
func BlackHole(t testing.TB) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
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

// Context returns a context cancelled after d or when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// MustRead returns the contents of path, failing the test when it cannot.
func MustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RequireKpropd skips a test when MIT's kpropd is not installed, and fails
// it in CI.
func RequireKpropd(t testing.TB) {
	t.Helper()
	if err := realm.KpropdAvailable(); err != nil {
		if InCI() {
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

// UDPServer answers each datagram sent to a loopback port with reply(req)
// (nothing when reply returns nil), for the test's lifetime: a fake KDC.
func UDPServer(t testing.TB, reply func(req []byte) []byte) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if b := reply(buf[:n]); b != nil {
				pc.WriteTo(b, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// LockedBuffer collects what a logger or a child process writes while the
// test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
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

// HeapAfterGC is the live heap after a collection: what a test that
// checks memory stays bounded compares before and after a load.
func HeapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
