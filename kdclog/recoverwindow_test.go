package kdclog

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/config"
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
