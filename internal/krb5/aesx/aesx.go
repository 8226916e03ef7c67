// Package aesx is an AES block cipher whose key can be replaced without
// allocating: crypto/aes allocates a new cipher.Block for every key, and the
// Kerberos engine keys AES afresh on every SPAKE login (K'[0] and K'[1], their
// Ke, and for aes-sha1 the DR derivations and the PRF). On amd64 with AES-NI
// the key schedule and the rounds are this package's own assembly (constant
// time, like crypto/aes there); elsewhere SetKey falls back to crypto/aes and
// allocates.
package aesx

import (
	"crypto/aes"
	"crypto/cipher"
)

// BlockSize is the AES block size in bytes.
const BlockSize = aes.BlockSize

// Block implements cipher.Block; SetKey replaces the key. Like crypto/aes
// blocks it is safe for concurrent Encrypt and Decrypt, not with SetKey.
type Block struct {
	nr       int           // rounds: 10 (AES-128) or 14 (AES-256); 0 when the fallback is used
	enc, dec [15 * 16]byte // round keys, raw bytes; dec in AESDEC order
	fallback cipher.Block  // crypto/aes, without AES-NI or for 192-bit keys
}

// New returns a Block keyed with key (16, 24 or 32 bytes).
func New(key []byte) (*Block, error) {
	b := &Block{}
	if err := b.SetKey(key); err != nil {
		return nil, err
	}
	return b, nil
}

// SetKey replaces the key; with AES-NI and a 16- or 32-byte key it does not
// allocate.
func (b *Block) SetKey(key []byte) error {
	b.Clear()
	if useAsm && (len(key) == 16 || len(key) == 32) {
		b.nr = 10
		if len(key) == 32 {
			b.nr = 14
		}
		expandKey(b.nr, key, &b.enc, &b.dec)
		return nil
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return err
	}
	b.fallback = blk
	return nil
}

// Clear erases the round keys (the Block needs SetKey before further use).
func (b *Block) Clear() {
	clear(b.enc[:])
	clear(b.dec[:])
	b.nr, b.fallback = 0, nil
}

// BlockSize returns the AES block size, 16 bytes.
func (b *Block) BlockSize() int { return BlockSize }

// Encrypt encrypts the first block of src into dst (which may overlap
// entirely).
func (b *Block) Encrypt(dst, src []byte) {
	if len(src) < BlockSize || len(dst) < BlockSize {
		panic("aesx: input not full block")
	}
	if b.fallback != nil {
		b.fallback.Encrypt(dst, src)
		return
	}
	if b.nr == 0 {
		panic("aesx: Encrypt without a key")
	}
	encryptBlock(b.nr, &b.enc, dst, src)
}

// Decrypt decrypts the first block of src into dst.
func (b *Block) Decrypt(dst, src []byte) {
	if len(src) < BlockSize || len(dst) < BlockSize {
		panic("aesx: input not full block")
	}
	if b.fallback != nil {
		b.fallback.Decrypt(dst, src)
		return
	}
	if b.nr == 0 {
		panic("aesx: Decrypt without a key")
	}
	decryptBlock(b.nr, &b.dec, dst, src)
}
