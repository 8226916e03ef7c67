package collector

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// statusSwitches sums the context switches in the pids' own
// /proc/PID/status, parsed here independently of the collector.
func statusSwitches(t *testing.T, pids []int) (vol, nonvol float64) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(non)?voluntary_ctxt_switches:\s+(\d+)$`)
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindAllStringSubmatch(string(b), -1)
		if len(m) != 2 {
			t.Fatalf("pid %d: %d ctxt lines in status", pid, len(m))
		}
		for _, l := range m {
			n, _ := strconv.ParseFloat(l[2], 64)
			if l[1] == "" {
				vol += n
			} else {
				nonvol += n
			}
		}
	}
	return vol, nonvol
}

// TestIntegrationContextSwitches checks that the context switches a scrape
// reports are those of the daemons' status files, on an idle KDC (the
// schedstat shortcut serves them from the previous read) and again after
// the workers served requests (schedstat changed: status must be read
// again). The KDC is idle when compared; a count that moved during the
// scrape is retried, a few times at most.
func TestIntegrationContextSwitches(t *testing.T) {
	t.Parallel()
	r := upRealm(t, 2, false)
	_, reg := newTestCollector(t, realmConfig(r))
	check := func(what string) float64 {
		t.Helper()
		var vol0, nonvol0, vol, nonvol float64
		var s *scrape
		for try := 0; try < 5; try++ {
			pids := r.KDCPids()
			vol0, nonvol0 = statusSwitches(t, pids)
			s = gather(t, reg)
			vol, nonvol = statusSwitches(t, pids)
			if vol == vol0 && nonvol == nonvol0 {
				break
			}
		}
		gv := s.Value("krb5_process_context_switches_total", "program", "krb5kdc", "ctxswitch", "voluntary")
		gn := s.Value("krb5_process_context_switches_total", "program", "krb5kdc", "ctxswitch", "nonvoluntary")
		if gv != vol || gn != nonvol {
			t.Errorf("%s: scrape says %v voluntary, %v nonvoluntary; the status files %v, %v", what, gv, gn, vol, nonvol)
		}
		return vol + nonvol
	}
	check("first scrape")
	before := check("idle, second scrape")
	asLoad(t, r, 200)
	if after := check("after 200 requests"); after <= before {
		t.Errorf("context switches %v after serving requests, %v before", after, before)
	}
}
