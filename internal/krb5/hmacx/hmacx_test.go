package hmacx

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"testing"
)

// The MAC equals crypto/hmac's for keys shorter and longer than the block,
// after re-keying and Reset.
func TestMatchesCryptoHMAC(t *testing.T) {
	for _, h := range []func() hash.Hash{sha1.New, sha256.New, sha512.New384} {
		m := New(h)
		for _, n := range []int{0, 16, 24, 32, 64, 100, 200} {
			key := bytes.Repeat([]byte{byte(n + 1)}, n)
			msg := bytes.Repeat([]byte("message"), n+1)
			m.SetKey(key)
			m.Write(msg[:3])
			m.Reset()
			m.Write(msg)
			want := hmac.New(h, key)
			want.Write(msg)
			if got := m.Sum(nil); !bytes.Equal(got, want.Sum(nil)) {
				t.Fatalf("size %d key %d: %x, want %x", m.Size(), n, got, want.Sum(nil))
			}
		}
	}
}

func TestSetKeyDoesNotAllocate(t *testing.T) {
	m := New(sha512.New384)
	key := make([]byte, 32)
	var out [64]byte
	if n := testing.AllocsPerRun(100, func() {
		m.SetKey(key)
		m.Write(key)
		m.Sum(out[:0])
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
