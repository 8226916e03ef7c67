package kdclog

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/config"
)

func TestLabelCharsets(t *testing.T) {
	for _, tc := range []struct {
		v       string
		allowed func(byte) bool
		want    bool
	}{
		{"CLIENT LOCKED OUT", statusChar, true},
		{"NEEDED_PREAUTH", statusChar, true},
		{"KDC_ERR_42", statusChar, true},
		{"making state", statusChar, false},
		{"alice@EXAMPLE.COM from 10.9.9.9", statusChar, false},
		{"10.9.9.9", statusChar, false},
		{"A:B", statusChar, false},
		{"/etc/passwd", statusChar, false},
		{"spake", identChar, true},
		{"kadm5_get_principal", identChar, true},
		{"SPAKE", identChar, false},
		{"spake@x", identChar, false},
		{"a.b", identChar, false},
		{"a b", identChar, false},
		{"", identChar, false},
		{strings.Repeat("a", maxLabelLen+1), identChar, false},
	} {
		if got := validLabel([]byte(tc.v), tc.allowed); got != tc.want {
			t.Errorf("validLabel(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
	for _, set := range [][]string{knownStatuses} {
		for _, v := range set {
			if !validLabel([]byte(v), statusChar) {
				t.Errorf("known status %q outside the status set", v)
			}
		}
	}
	for _, set := range [][]string{knownPreauthMethods, knownKadminOps} {
		for _, v := range set {
			if !validLabel([]byte(v), identChar) {
				t.Errorf("known name %q outside the identifier set", v)
			}
		}
	}
}

// TestForgedLinesMakeNoLabel counts forged and odd lines and checks that
// no label value holds a principal, an address or a path, and where each
// line went instead.
func TestForgedLinesMakeNoLabel(t *testing.T) {
	const hdr = "Nov 09 08:01:02 kdc1 krb5kdc[1234](info): "
	const khdr = "Nov 09 08:01:02 kdc1 kadmind[99](Notice): "
	for _, tc := range []struct {
		name, line string
		reason     Reason // ReasonNone: parsed
		status     string // for a parsed request: the status label
	}{
		{"principal in status", hdr + "AS_REQ (1 etypes {18}) 10.1.2.3: alice@EXAMPLE.COM from 10.9.9.9: x", ReasonMalformed, ""},
		{"address in status", hdr + "TGS_REQ (1 etypes {18}) 10.1.2.3: 10.9.9.9: x", ReasonMalformed, ""},
		{"path in status", hdr + "AS_REQ (1 etypes {18}) 10.1.2.3: /etc/shadow: x", ReasonMalformed, ""},
		{"lower-case status", hdr + "AS_REQ (1 etypes {18}) 10.1.2.3: making state: authtime 0,  a for b", ReasonNone, "other"},
		{"unknown upper-case status", hdr + "AS_REQ (1 etypes {18}) 10.1.2.3: NEW_STATUS: a@R for b@R", ReasonNone, "NEW_STATUS"},
		{"principal as preauth method", hdr + "preauth (bob@EXAMPLE.COM) verify failure: Preauthentication failed", ReasonUnknownMessage, ""},
		{"upper-case preauth method", hdr + "preauth (SPAKE) verify failure: Preauthentication failed", ReasonUnknownMessage, ""},
		{"principal as kadmind op", khdr + "Request: bob@EXAMPLE.COM, x, success, client=a@R, service=kadmin/admin@R, addr=10.0.0.1, flavor=6", ReasonMalformed, ""},
		{"address as unauthorized op", khdr + "Unauthorized request: 10.0.0.1, x, client=a@R, service=kadmin/admin@R, addr=10.0.0.1", ReasonMalformed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounts()
			st := &sourceStats{}
			src := newSource(config.LogSource{Path: "t", Type: "any"}, c, st)
			src.handle([]byte(tc.line), false)
			src.flush()
			var e Event
			Parse([]byte(tc.line), &e)
			if e.Reason != tc.reason {
				t.Fatalf("reason %q, want %q", reasonNames[e.Reason], reasonNames[tc.reason])
			}
			for _, b := range []*boundedLabels{c.statuses, c.methods, c.ops} {
				for i := range b.size() {
					if v := b.name(i); strings.ContainsAny(v, "@.:/") {
						t.Errorf("label value %q", v)
					}
				}
			}
			if tc.status == "" {
				return
			}
			var got string
			for r := range c.requests {
				for i := range c.requests[r] {
					if c.requests[r][i].Load() > 0 {
						got = c.statuses.name(i)
					}
				}
			}
			if got != tc.status {
				t.Errorf("counted as status %q, want %q", got, tc.status)
			}
		})
	}
}

// TestDocumentedLabelCaps floods a log with label values the parser does
// not know and checks the caps docs/metrics.md promises, by their
// documented numbers: 16 more statuses, 8 more preauth methods and 8 more
// kadmind operations, then "other".
func TestDocumentedLabelCaps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mixed.log")
	var lines []string
	const kadm = "Nov 30 07:05:41 kdc1 kadmind[5493](Notice): Request: "
	for i := range 40 {
		lines = append(lines,
			asLine(fmt.Sprintf("NEW_STATUS_%c%c", 'A'+i/26, 'A'+i%26), "u@PERF.TEST", ", x"),
			fmt.Sprintf("%spreauth (method_%02d) verify failure: Preauthentication failed", hdr, i),
			fmt.Sprintf("%skadm5_new_op_%02d, x@PERF.TEST, success, client=admin/admin@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1", kadm, i),
		)
	}
	writeLines(t, path, lines...)
	tm := startManager(t, "", src(path))
	waitValue(t, tm.reg, float64(len(lines)), "krb5_kdc_log_lines_read_total", "path", path)
	for _, c := range []struct {
		metric, label, prefix string
		cap                   int
	}{
		{"krb5_kdc_requests_total", "status", "NEW_STATUS_", 16},
		{"krb5_kdc_preauth_verify_failures_total", "method", "method_", 8},
		{"krb5_kadmind_requests_total", "operation", "kadm5_new_op_", 8},
	} {
		mfs, err := tm.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		newValues, other := map[string]bool{}, 0.0
		for _, mf := range mfs {
			if mf.GetName() != c.metric {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					switch {
					case lp.GetName() != c.label:
					case strings.HasPrefix(lp.GetValue(), c.prefix):
						newValues[lp.GetValue()] = true
					case lp.GetValue() == "other":
						other += m.GetCounter().GetValue()
					}
				}
			}
		}
		if len(newValues) != c.cap || other != float64(40-c.cap) {
			t.Errorf("%s: %d new %s values (want %d), %v lines as other (want %d)", c.metric, len(newValues), c.label, c.cap, other, 40-c.cap)
		}
	}
}
