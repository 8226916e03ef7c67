package collector

import (
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestAccessTrackerLogsChanges: a file that stays unreadable is one
// warning however many scrapes; readable again is one info line and the
// gauge back at 1; unreadable once more warns once more. Exited processes
// (ENOENT, ESRCH) are no access problem. The real unreadable case runs in
// TestIntegrationUnprivileged.
func TestAccessTrackerLogsChanges(t *testing.T) {
	var logs lockedBuffer
	a := newAccessTracker(log.NewLogfmtLogger(&logs))
	denied := &os.PathError{Op: "open", Path: "/proc/1/io", Err: fs.ErrPermission}
	scrape := func(errs ...error) float64 {
		t.Helper()
		for _, err := range errs {
			a.note("krb5kdc", "io", &kdcProc{pid: 1, dir: "/proc/1"}, "io", err, "its metrics are omitted")
		}
		ch := make(chan prometheus.Metric, 10)
		a.collect(ch)
		close(ch)
		var got []float64
		for m := range ch {
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				t.Fatal(err)
			}
			got = append(got, d.GetGauge().GetValue())
		}
		if len(got) != 1 {
			t.Fatalf("%d series, want 1", len(got))
		}
		return got[0]
	}
	count := func(want map[string]int) {
		t.Helper()
		for s, n := range want {
			if got := strings.Count(logs.String(), s); got != n {
				t.Errorf("%q logged %d times, want %d:\n%s", s, got, n, logs.String())
			}
		}
	}
	const warn, again = "cannot read io of krb5kdc", "can read io of krb5kdc again"
	for i := 0; i < 3; i++ {
		// One process readable, the next not: the program's file is not.
		if v := scrape(nil, denied); v != 0 {
			t.Errorf("scrape %d: readable = %v with a permission error", i, v)
		}
	}
	count(map[string]int{warn: 1, again: 0})
	for i := 0; i < 2; i++ {
		if v := scrape(nil, &os.PathError{Err: syscall.ESRCH}, &os.PathError{Err: syscall.ENOENT}); v != 1 {
			t.Errorf("readable = %v with only exited processes failing", v)
		}
	}
	count(map[string]int{warn: 1, again: 1})
	scrape(denied)
	count(map[string]int{warn: 2, again: 1})
}
