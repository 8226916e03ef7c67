//go:build amd64 && !purego

package aesx

import "golang.org/x/sys/cpu"

// useAsm: AES-NI, and SSE4.1/SSSE3 as crypto/aes requires alongside it.
var useAsm = cpu.X86.HasAES && cpu.X86.HasSSE41 && cpu.X86.HasSSSE3

//go:noescape
func expandKey128(key *byte, enc *[15 * 16]byte)

//go:noescape
func expandKey256(key *byte, enc *[15 * 16]byte)

//go:noescape
func invertKeys(nr int, enc, dec *[15 * 16]byte)

//go:noescape
func encryptBlockAsm(nr int, xk *[15 * 16]byte, dst, src *byte)

//go:noescape
func decryptBlockAsm(nr int, xk *[15 * 16]byte, dst, src *byte)

func expandKey(nr int, key []byte, enc, dec *[15 * 16]byte) {
	if nr == 10 {
		expandKey128(&key[0], enc)
	} else {
		expandKey256(&key[0], enc)
	}
	invertKeys(nr, enc, dec)
}

func encryptBlock(nr int, xk *[15 * 16]byte, dst, src []byte) {
	encryptBlockAsm(nr, xk, &dst[0], &src[0])
}

func decryptBlock(nr int, xk *[15 * 16]byte, dst, src []byte) {
	decryptBlockAsm(nr, xk, &dst[0], &src[0])
}
