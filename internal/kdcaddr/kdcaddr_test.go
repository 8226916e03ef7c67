package kdcaddr

import "testing"

func TestCheck(t *testing.T) {
	for _, ok := range []string{"kdc", "kdc.example.com", "kdc:88", "10.0.0.1", "10.0.0.1:750", "::1", "[::1]", "[::1]:88", "fe80::1%eth0"} {
		if err := Check(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ":88", "k:", "a b", "k:0x", "k:0", "[::1]:0", "kdc/88", "..", "k:88:88"} {
		if err := Check(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
