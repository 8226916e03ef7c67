package top

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// A real krb5kdc -w 4: top's rows are the supervisor and workers 0-3, each
// with a pid of the KDC (as the harness knows them), and they show as gone
// once the KDC is stopped.
func TestSourceAgainstWorkers(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{Workers: 4, NoKadmind: true})
	w, err := kdcproc.NewWorkers("/proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewSource("/proc", r.KDCPidFile, nil, w)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(src)
	s := NewSampler(reg)
	snap, err := s.Sample(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pids := r.KDCPids()
	var names []string
	for _, row := range snap.Rows {
		names = append(names, row.Name)
		want := slices.Contains(pids[1:], row.PID)
		if row.Name == "supervisor" {
			want = row.PID == pids[0]
		}
		if !want || row.Gone || !(row.RSS > 0) {
			t.Errorf("row %+v: not a live process of the KDC %v", row, pids)
		}
		if i, err := strconv.Atoi(row.Name); err == nil {
			if j, ok := w.Index(row.PID); !ok || i != j {
				t.Errorf("row %s has pid %d, whose index is %d, %v", row.Name, row.PID, j, ok)
			}
		}
	}
	if got := slices.Sorted(slices.Values(names)); !slices.Equal(got, []string{"0", "1", "2", "3", "supervisor"}) {
		t.Errorf("rows %v, want supervisor and 0-3", got)
	}

	// Another realm's KDC on the host (as a second test suite runs one)
	// is never taken for this one once its pid file is gone.
	realmtest.Realm(t, realm.Options{NoKadmind: true})
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	snap, err = s.Sample(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range snap.Rows {
		if !row.Gone {
			t.Errorf("after the KDC stopped, row %+v not gone", row)
		}
	}
}
