package kdclog

import (
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
