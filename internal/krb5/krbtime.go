package krb5

import (
	"fmt"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// KerberosTime is GeneralizedTime "YYYYMMDDHHMMSSZ" in UTC (RFC 4120 5.2.3):
// always 15 octets, so it can be formatted into a fixed array and patched into
// pre-encoded requests in place.

// formatKrbTime writes t as KerberosTime into dst without allocating.
func formatKrbTime(dst *[15]byte, t time.Time) {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	put := func(i, v, width int) {
		for j := i + width - 1; j >= i; j-- {
			dst[j] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, y, 4)
	put(4, int(mo), 2)
	put(6, d, 2)
	put(8, h, 2)
	put(10, mi, 2)
	put(12, s, 2)
	dst[14] = 'Z'
}

// krbTimeCache keeps the last second formatted: a load formats the same
// second thousands of times (each request's till and timestamp), and
// KerberosTime has no finer part.
type krbTimeCache struct {
	sec int64
	ok  bool
	b   [15]byte
}

// format writes t as KerberosTime into dst (formatKrbTime).
func (c *krbTimeCache) format(dst *[15]byte, t time.Time) {
	if s := t.Unix(); !c.ok || s != c.sec {
		formatKrbTime(&c.b, t)
		c.sec, c.ok = s, true
	}
	*dst = c.b
}

// parseKrbTime parses a KerberosTime element (tag included).
func parseKrbTime(b []byte) (time.Time, error) {
	body, rest, err := der.Expect(b, der.TagGeneralizedTime)
	if err != nil {
		return time.Time{}, err
	}
	if len(rest) != 0 || len(body) != 15 || body[14] != 'Z' {
		return time.Time{}, fmt.Errorf("%w: KerberosTime %q", der.ErrMalformed, body)
	}
	var v [6]int
	widths := [6]int{4, 2, 2, 2, 2, 2}
	p := 0
	for i, w := range widths {
		for _, c := range body[p : p+w] {
			if c < '0' || c > '9' {
				return time.Time{}, fmt.Errorf("%w: KerberosTime %q", der.ErrMalformed, body)
			}
			v[i] = v[i]*10 + int(c-'0')
		}
		p += w
	}
	if v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60 {
		return time.Time{}, fmt.Errorf("%w: KerberosTime %q", der.ErrMalformed, body)
	}
	return time.Date(v[0], time.Month(v[1]), v[2], v[3], v[4], v[5], 0, time.UTC), nil
}
