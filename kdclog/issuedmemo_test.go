package kdclog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// TestIssuedEtypesChangingOnePart: a run of ISSUE lines whose reply,
// ticket and session etypes change one part at a time (the source keeps
// the last line's three), counted by part and etype and as weak, against
// the counts of the sequence the test wrote.
func TestIssuedEtypesChangingOnePart(t *testing.T) {
	names := map[int]string{17: "aes128-cts-hmac-sha1-96", 18: "aes256-cts-hmac-sha1-96", 20: "aes256-cts-hmac-sha384-192", 23: "arcfour-hmac"}
	seq := [][3]int{{20, 20, 20}, {20, 23, 20}, {20, 23, 20}, {20, 20, 20}, {20, 20, 18}, {18, 20, 18}, {18, 20, 18}, {20, 20, 20}, {20, 20, 23}, {17, 17, 17}, {17, 17, 17}}
	var sb strings.Builder
	want := map[[2]int]uint64{} // part, etype
	weak := uint64(0)
	for i, s := range seq {
		for p, e := range s {
			want[[2]int{p, e}]++
		}
		if s[0] == 23 || s[1] == 23 || s[2] == 23 {
			weak++
		}
		fmt.Fprintf(&sb, "Nov 30 07:05:40 kdc1 krb5kdc[5491](info): TGS_REQ (4 etypes {aes256-cts-hmac-sha384-192(20), aes128-cts-hmac-sha256-128(19), aes256-cts-hmac-sha1-96(18), aes128-cts-hmac-sha1-96(17)}) 127.0.0.1: ISSUE: authtime 1796022340, etypes {rep=%s(%d), tkt=%s(%d), ses=%s(%d)}, user%04d@PERF.TEST for HTTP/web0001.perf.test@PERF.TEST\n",
			names[s[0]], s[0], names[s[1]], s[1], names[s[2]], s[2], i)
	}
	c := newCounts()
	src := newSource(config.LogSource{Path: "test", Type: "kdc"}, c, &sourceStats{})
	if n := src.handleLines([]byte(sb.String())); n != uint64(len(seq)) {
		t.Fatalf("%d lines handled, want %d", n, len(seq))
	}
	src.flush()
	for p := range numParts {
		for e := range names {
			if got := c.issued[RequestTGS][p][etypeLabel(Etype(e))].Load(); got != want[[2]int{p, e}] {
				t.Errorf("%s %s: %d, want %d", partNames[p], names[e], got, want[[2]int{p, e}])
			}
		}
	}
	if got := c.weak[RequestTGS][weakIssued].Load(); got != weak {
		t.Errorf("issued weak: %d, want %d", got, weak)
	}
}
