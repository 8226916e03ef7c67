package load

import (
	"net/netip"
	"testing"
)

// nthAddr hands the n-th user the n-th address of the --source prefix,
// wrapping inside it, so that no request leaves the prefix the operator
// named.
func TestNthAddr(t *testing.T) {
	p := netip.MustParsePrefix("127.0.1.4/30")
	want := []string{"127.0.1.4", "127.0.1.5", "127.0.1.6", "127.0.1.7", "127.0.1.4", "127.0.1.5"}
	for n, w := range want {
		if a := nthAddr(p, n); a.String() != w {
			t.Errorf("nthAddr(%s, %d) = %s, want %s", p, n, a, w)
		}
	}
	one := netip.MustParsePrefix("127.0.0.2/32")
	if a := nthAddr(one, 7); a.String() != "127.0.0.2" {
		t.Errorf("nthAddr(%s, 7) = %s, want the address itself", one, a)
	}
	if a := nthAddr(netip.Prefix{}, 3); a.IsValid() {
		t.Errorf("no source: %s, want the kernel's choice (no address)", a)
	}
}
