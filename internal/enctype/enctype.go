// Package enctype is the one table of Kerberos encryption types in this
// project: number, the name MIT krb5 prints, the aliases krb5.conf and
// kdc.conf accept, and whether the type is weak (and why). The config
// checker, the client engine, the kdc.conf collector, the log parser and the
// realm harness all read it, so "weak" and "aes256-sha2" mean the same thing
// everywhere.
package enctype

import (
	"fmt"
	"strconv"
	"strings"
)

// Type is one encryption type.
type Type struct {
	// ID is the number on the wire (RFC 3961/3962/8009/6803/4757, MIT krb5.h).
	ID int32
	// Name is the canonical name as MIT's krb5_enctype_to_name prints it
	// (and as 1.18+ logs it in `etypes {...}`).
	Name string
	// Aliases are the other names MIT accepts in profiles (lower case).
	Aliases []string
	// Weak marks types deprecated for security; WeakReason says why.
	Weak       bool
	WeakReason string
	// Client marks the types the project's Kerberos engine implements.
	Client bool
	// KeyLen is the length of a key in bytes (RFC 3961 key-generation
	// seed length), as a keytab holds it; 0 where the project never reads
	// such keys.
	KeyLen int
}

const (
	whyDES  = "single DES: 56-bit key (RFC 6649); removed in MIT 1.18"
	whyDES3 = "triple DES: 64-bit block, SHA-1 key derivation (RFC 8429)"
	whyRC4  = "RC4 with MD5 (RFC 8429); the key is the unsalted NT hash"
)

// table is ordered by number. Names and aliases from MIT krb5 1.20
// lib/crypto/krb/etypes.c and enctype_util.c.
var table = [...]Type{
	{ID: 1, Name: "des-cbc-crc", Weak: true, WeakReason: whyDES},
	{ID: 2, Name: "des-cbc-md4", Weak: true, WeakReason: whyDES},
	{ID: 3, Name: "des-cbc-md5", Aliases: []string{"des"}, Weak: true, WeakReason: whyDES},
	{ID: 4, Name: "des-cbc-raw", Weak: true, WeakReason: whyDES},
	{ID: 5, Name: "des3-cbc-md5", Weak: true, WeakReason: whyDES3},
	{ID: 6, Name: "des3-cbc-raw", Weak: true, WeakReason: whyDES3},
	{ID: 8, Name: "des-hmac-sha1", Weak: true, WeakReason: whyDES},
	{ID: 16, Name: "des3-cbc-sha1", Aliases: []string{"des3-hmac-sha1", "des3-cbc-sha1-kd"}, Weak: true, WeakReason: whyDES3},
	{ID: 17, Name: "aes128-cts-hmac-sha1-96", Aliases: []string{"aes128-cts", "aes128-sha1"}, Client: true, KeyLen: 16},
	{ID: 18, Name: "aes256-cts-hmac-sha1-96", Aliases: []string{"aes256-cts", "aes256-sha1"}, Client: true, KeyLen: 32},
	{ID: 19, Name: "aes128-cts-hmac-sha256-128", Aliases: []string{"aes128-sha2"}, Client: true, KeyLen: 16},
	{ID: 20, Name: "aes256-cts-hmac-sha384-192", Aliases: []string{"aes256-sha2"}, Client: true, KeyLen: 32},
	{ID: 23, Name: "arcfour-hmac", Aliases: []string{"rc4-hmac", "arcfour-hmac-md5"}, Weak: true, WeakReason: whyRC4},
	{ID: 24, Name: "arcfour-hmac-exp", Aliases: []string{"rc4-hmac-exp", "arcfour-hmac-md5-exp"}, Weak: true, WeakReason: whyRC4 + ", 40-bit export key"},
	{ID: 25, Name: "camellia128-cts-cmac", Aliases: []string{"camellia128-cts"}},
	{ID: 26, Name: "camellia256-cts-cmac", Aliases: []string{"camellia256-cts"}},
}

// Count is the number of types in the table (a constant, for arrays indexed
// by Index).
const Count = len(table)

// RHEL9 are the types a RHEL 9 (and Debian 12) KDC gives principals and a
// client offers, in MIT's order of preference: 20, 19, 18, 17.
var RHEL9 = []int32{20, 19, 18, 17}

var byName = func() map[string]int {
	m := make(map[string]int, 2*len(table))
	for i, t := range table {
		m[t.Name] = i
		for _, a := range t.Aliases {
			m[a] = i
		}
	}
	return m
}()

// byID indexes the small numbers directly: the log parser looks a number up
// per line, and an array needs no hashing.
var byID = func() (a [32]int8) {
	for i := range a {
		a[i] = -1
	}
	for i, t := range table {
		a[t.ID] = int8(i)
	}
	return a
}()

// All returns the table, ordered by number. Callers must not modify it.
func All() []Type { return table[:] }

// Index returns the position of id in All(), or -1.
func Index(id int32) int {
	if id >= 0 && int(id) < len(byID) {
		return int(byID[id])
	}
	return -1
}

// ByID returns the type with number id.
func ByID(id int32) (Type, bool) {
	if i := Index(id); i >= 0 {
		return table[i], true
	}
	return Type{}, false
}

// ByName resolves a name as a profile spells it: canonical or alias, any
// case, surrounding space ignored.
func ByName(name string) (Type, bool) {
	i, ok := byName[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return Type{}, false
	}
	return table[i], true
}

// Canonical returns MIT's canonical name for name, or name in lower case
// when MIT does not know it.
func Canonical(name string) string {
	if t, ok := ByName(name); ok {
		return t.Name
	}
	return strings.ToLower(strings.TrimSpace(name))
}

// Name returns the canonical name of id, or "etype-N" for numbers not in
// the table.
func Name(id int32) string {
	if t, ok := ByID(id); ok {
		return t.Name
	}
	return "etype-" + strconv.Itoa(int(id))
}

// IsWeak reports whether id is a single-DES, triple-DES or RC4 type,
// including Microsoft's private negative RC4/DES variants (-128 .. -141).
func IsWeak(id int32) bool {
	// Not ByID: it copies the whole Type, and this runs for every
	// etype of every ISSUE line the log collector reads.
	if i := Index(id); i >= 0 {
		return table[i].Weak
	}
	return id <= -128 && id >= -141
}

// ParseClient resolves an enctype name as krb5.conf writes it (MIT's
// aliases included), accepting only the types the engine implements.
func ParseClient(name string) (int32, error) {
	if t, ok := ByName(name); ok && t.Client {
		return t.ID, nil
	}
	names := make([]string, 0, len(RHEL9))
	for _, t := range Client() {
		names = append(names, t.Name)
	}
	return 0, fmt.Errorf("unsupported enctype %q (want %s)", name, strings.Join(names, ", "))
}

// MaxS2KIterations is the highest cap on the PBKDF2 iteration count of the
// AES types' string-to-key that a client may be configured with.
const MaxS2KIterations = 1 << 24

// Client returns the types the engine implements, in RHEL 9 order.
func Client() []Type {
	out := make([]Type, 0, len(RHEL9))
	for _, id := range RHEL9 {
		t, _ := ByID(id)
		out = append(out, t)
	}
	return out
}
