//go:build !amd64 || purego

package aesx

// Without the assembly every key goes to crypto/aes.
const useAsm = false

func expandKey(int, []byte, *[15 * 16]byte, *[15 * 16]byte) { panic("aesx: no assembly") }

func encryptBlock(int, *[15 * 16]byte, []byte, []byte) { panic("aesx: no assembly") }

func decryptBlock(int, *[15 * 16]byte, []byte, []byte) { panic("aesx: no assembly") }
