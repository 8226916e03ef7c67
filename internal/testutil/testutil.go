// Package testutil is the core of the helpers the project's tests share:
// polling until a condition holds, reading series out of a Prometheus
// registry, a test's logger, the CI and race switches, programs a test
// needs, loopback fakes. It imports nothing of the harness (realm) or the
// Kerberos engine, so that tests without a KDC do not link them
// (config's TestTestCoreDoesNotLinkTheHarness); the realm helpers are in
// internal/realmtest. Test code only.
package testutil

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// InCI reports whether the tests run in CI (`CI` set, as .ci/run is run).
func InCI() bool { return os.Getenv("CI") != "" }

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

// ReadExposition parses the text exposition file at path (a textfile, a
// saved scrape); a file that cannot be read or parsed fails the test.
func ReadExposition(t testing.TB, path string) *Scrape {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatal(err)
	}
	return &Scrape{t: t, MFs: mfs}
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

// Context returns a context cancelled after d or when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// WriteFile writes content to dir/name, making name's directories, and
// returns its path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
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

// HeapAfterGC is the live heap after a collection: what a test that
// checks memory stays bounded compares before and after a load.
func HeapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
