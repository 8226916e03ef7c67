package aesx

import (
	"bytes"
	"crypto/aes"
	"crypto/rand"
	"encoding/hex"
	"testing"
)

// TestFIPS197 checks the FIPS-197 appendix C vectors.
func TestFIPS197(t *testing.T) {
	for _, v := range []struct{ key, pt, ct string }{
		{"000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff", "69c4e0d86a7b0430d8cdb78070b4c55a"},
		{"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "00112233445566778899aabbccddeeff", "8ea2b7ca516745bfeafc49904b496089"},
	} {
		key, _ := hex.DecodeString(v.key)
		pt, _ := hex.DecodeString(v.pt)
		b, err := New(key)
		if err != nil {
			t.Fatal(err)
		}
		ct := make([]byte, 16)
		b.Encrypt(ct, pt)
		if got := hex.EncodeToString(ct); got != v.ct {
			t.Errorf("AES-%d: %s, want %s", len(key)*8, got, v.ct)
		}
		b.Decrypt(ct, ct)
		if !bytes.Equal(ct, pt) {
			t.Errorf("AES-%d: decrypt %x, want %x", len(key)*8, ct, pt)
		}
	}
}

// TestMatchesCryptoAES re-keys one Block many times and compares it with a
// fresh crypto/aes cipher for each key, in place and not.
func TestMatchesCryptoAES(t *testing.T) {
	var b Block
	for i := 0; i < 500; i++ {
		key := make([]byte, []int{16, 24, 32}[i%3])
		in := make([]byte, 16)
		rand.Read(key)
		rand.Read(in)
		ref, _ := aes.NewCipher(key)
		if err := b.SetKey(key); err != nil {
			t.Fatal(err)
		}
		want, got := make([]byte, 16), make([]byte, 16)
		ref.Encrypt(want, in)
		b.Encrypt(got, in)
		if !bytes.Equal(got, want) {
			t.Fatalf("key %x: encrypt %x, want %x", key, got, want)
		}
		ref.Decrypt(want, in)
		copy(got, in)
		b.Decrypt(got, got)
		if !bytes.Equal(got, want) {
			t.Fatalf("key %x: decrypt %x, want %x", key, got, want)
		}
	}
	if _, err := New(make([]byte, 15)); err == nil {
		t.Error("15-byte key accepted")
	}
}

// TestRekeyDoesNotAllocate: SetKey, Encrypt and Decrypt allocate nothing
// for AES-128 and AES-256 where the assembly runs.
func TestRekeyDoesNotAllocate(t *testing.T) {
	if !useAsm {
		t.Skip("no AES-NI: crypto/aes is used and allocates")
	}
	b, _ := New(make([]byte, 16))
	k16, k32, buf := make([]byte, 16), make([]byte, 32), make([]byte, 16)
	n := testing.AllocsPerRun(100, func() {
		k16[0]++
		_ = b.SetKey(k16)
		b.Encrypt(buf, buf)
		_ = b.SetKey(k32)
		b.Decrypt(buf, buf)
	})
	if n != 0 {
		t.Errorf("%v allocations per re-key, want 0", n)
	}
}

func BenchmarkSetKey(b *testing.B) {
	key := make([]byte, 32)
	b.Run("aesx", func(b *testing.B) {
		var blk Block
		for b.Loop() {
			_ = blk.SetKey(key)
		}
	})
	b.Run("crypto-aes", func(b *testing.B) {
		for b.Loop() {
			_, _ = aes.NewCipher(key)
		}
	})
}
