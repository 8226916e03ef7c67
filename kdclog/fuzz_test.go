package kdclog

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// FuzzParse feeds arbitrary lines through the parser and the counting
// code: nothing may panic, and no label set may grow past its bound or
// hold a value that is not short valid UTF-8.
//
//	go test ./kdclog -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.line))
	}
	f.Add([]byte("Nov 09 08:01:02 kdc1 krb5kdc[1234](info): AS_REQ (1 etypes {18}) 10.1.2.3: alice@EXAMPLE.COM from 10.9.9.9: x"))
	f.Add([]byte("Nov 09 08:01:02 kdc1 krb5kdc[1234](info): preauth (a.b) verify failure: Preauthentication failed"))
	c := newCounts()
	src := newSource(config.LogSource{Path: "fuzz", Type: "any", ProbePrincipals: []string{"probe"}}, c, &sourceStats{})
	f.Fuzz(func(t *testing.T, line []byte) {
		var e Event
		ok := Parse(line, &e)
		if ok == (e.Reason != ReasonNone) {
			t.Fatalf("ok=%v with reason %d", ok, e.Reason)
		}
		if ok && e.Kind == KindRequest && len(e.Status) == 0 {
			t.Fatalf("request line without status: %q", line)
		}
		src.handle(line, false)
		for _, b := range []*boundedLabels{c.statuses, c.methods, c.ops} {
			if n := len(b.dynNames); n > b.maxDynamic {
				t.Fatalf("label set grew to %d values", n)
			}
			for i := range b.size() {
				v := b.name(i)
				if len(v) == 0 || len(v) > maxLabelLen || !utf8.ValidString(v) {
					t.Fatalf("bad label value %q", v)
				}
				// A principal, an address or a path is never a label value.
				if strings.ContainsAny(v, "@.:/") {
					t.Fatalf("label value %q from %q", v, line)
				}
			}
		}
	})
}
