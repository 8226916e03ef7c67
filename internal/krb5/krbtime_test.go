package krb5

import (
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

func TestKrbTime(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2025, 11, 30, 6, 12, 59, 999, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2037, 12, 31, 23, 59, 59, 0, time.FixedZone("X", 3600)),
	} {
		var b [15]byte
		formatKrbTime(&b, tm)
		if want := tm.UTC().Format("20060102150405Z"); string(b[:]) != want {
			t.Errorf("format %v = %s, want %s", tm, b[:], want)
		}
		var w derWriter
		w.Reset()
		w.Primitive(der.TagGeneralizedTime, b[:])
		got, err := parseKrbTime(w.Bytes())
		if err != nil || !got.Equal(tm.Truncate(time.Second)) {
			t.Errorf("parse %s = %v, %v", b[:], got, err)
		}
	}
	for _, bad := range []string{"2025113006125Z", "20251130061259+", "2025113a061259Z", "20251330061259Z", "20251130241259Z"} {
		var w derWriter
		w.Reset()
		w.Primitive(der.TagGeneralizedTime, []byte(bad))
		if _, err := parseKrbTime(w.Bytes()); err == nil {
			t.Errorf("parse %q accepted", bad)
		}
	}
}

// TestKrbTimeCache: the cache formats every time as formatKrbTime does,
// across second, minute, day and year boundaries, back and forth.
func TestKrbTimeCache(t *testing.T) {
	var c krbTimeCache
	base := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	for i, d := range []time.Duration{0, 999 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second, 2*time.Second + 1, -time.Second, 36 * time.Hour, 2 * time.Second} {
		tm := base.Add(d)
		var got, want [15]byte
		c.format(&got, tm)
		formatKrbTime(&want, tm)
		if got != want {
			t.Errorf("%d: %v formatted %s, want %s", i, tm, got[:], want[:])
		}
	}
}
