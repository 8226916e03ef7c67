package capacity

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// run writes report.json of a run named name into dir.
func writeRun(t *testing.T, dir, name string, body []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "report.json"), body, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBenchCeiling: the latest run of the results directory is exported,
// its figures as report.json holds them (read here with encoding/json):
// as in requests (logins × 3 for a SPAKE run), tgs, the finish time.
// A newer run that does not validate is reported invalid, logged once,
// and its figures are not exported; a run directory without a report is
// passed over.
func TestBenchCeiling(t *testing.T) {
	body := testutil.MustRead(t, "../bench/report/testdata/report.json")
	var raw struct {
		Finished time.Time `json:"finished"`
		System   struct {
			Preauth string `json:"generator_preauth"`
		} `json:"system"`
		AS, TGS struct {
			Rate float64 `json:"rate_per_s"`
		}
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(raw.System.Preauth, "spake") {
		t.Fatalf("the fixture's preauth %q: this test expects a SPAKE run", raw.System.Preauth)
	}
	dir := t.TempDir()
	writeRun(t, dir, "20261201T000000Z", body)
	if err := os.MkdirAll(filepath.Join(dir, "20261202T000000Z"), 0o755); err != nil { // interrupted: no report
		t.Fatal(err)
	}
	logs := &testutil.LockedBuffer{}
	k, _, _ := newFake(0, 1)
	g := New(k, Config{Bench: NewBench(dir, log.NewLogfmtLogger(logs))})
	s := testutil.Gather(t, g)
	near(t, "as ceiling", s.Value(MetricBenchCapacity, "request", "as"), 3*raw.AS.Rate)
	near(t, "tgs ceiling", s.Value(MetricBenchCapacity, "request", "tgs"), raw.TGS.Rate)
	near(t, "timestamp", s.Value(MetricBenchTimestamp), float64(raw.Finished.UnixNano())/1e9)
	if v := s.Value(MetricBenchValid); v != 1 {
		t.Errorf("valid = %g", v)
	}
	if v := s.Value(MetricBenchInfo, "preauth", raw.System.Preauth); v != 1 {
		t.Errorf("info = %g", v)
	}

	// Hostile and broken reports: each is the newest run in turn.
	for i, bad := range []string{
		`{"schema": 1, "as": {"rate_per_s": 1e300}`, // cut short
		strings.Replace(string(body), `"schema": 1`, `"schema": 99`, 1),
		strings.Replace(string(body), `"requests": `, `"requests": -`, 1), // a negative count
	} {
		name := "2026121" + string(rune('3'+i)) + "T000000Z"
		writeRun(t, dir, name, []byte(bad))
		for range 2 {
			s = testutil.Gather(t, g)
		}
		if v := s.Value(MetricBenchValid); v != 0 {
			t.Errorf("run %d: valid = %g for a report that does not validate", i, v)
		}
		if _, ok := s.Find(MetricBenchCapacity); ok {
			t.Errorf("run %d: ceilings exported from a report that does not validate", i)
		}
	}
	if n := strings.Count(logs.String(), "cannot use the latest bench run"); n != 3 {
		t.Errorf("%d log lines for 3 bad reports scraped twice each, want 3:\n%s", n, logs)
	}

	// A FIFO as the newest report.json: refused, not waited on.
	fifoRun := filepath.Join(dir, "20261220T000000Z")
	if err := os.MkdirAll(fifoRun, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fifoRun, "report.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); testutil.Gather(t, g) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the gather blocks on a FIFO named report.json")
	}
}
