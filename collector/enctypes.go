package collector

import "strings"

// enctypeNames maps every name MIT krb5 accepts for an encryption type
// (lower case; MIT compares case-insensitively) to its canonical name.
var enctypeNames = map[string]string{
	"aes256-cts-hmac-sha384-192": "aes256-cts-hmac-sha384-192",
	"aes256-sha2":                "aes256-cts-hmac-sha384-192",
	"aes128-cts-hmac-sha256-128": "aes128-cts-hmac-sha256-128",
	"aes128-sha2":                "aes128-cts-hmac-sha256-128",
	"aes256-cts-hmac-sha1-96":    "aes256-cts-hmac-sha1-96",
	"aes256-cts":                 "aes256-cts-hmac-sha1-96",
	"aes256-sha1":                "aes256-cts-hmac-sha1-96",
	"aes128-cts-hmac-sha1-96":    "aes128-cts-hmac-sha1-96",
	"aes128-cts":                 "aes128-cts-hmac-sha1-96",
	"aes128-sha1":                "aes128-cts-hmac-sha1-96",
	"camellia256-cts-cmac":       "camellia256-cts-cmac",
	"camellia256-cts":            "camellia256-cts-cmac",
	"camellia128-cts-cmac":       "camellia128-cts-cmac",
	"camellia128-cts":            "camellia128-cts-cmac",
	"arcfour-hmac":               "arcfour-hmac",
	"rc4-hmac":                   "arcfour-hmac",
	"arcfour-hmac-md5":           "arcfour-hmac",
	"arcfour-hmac-exp":           "arcfour-hmac-exp",
	"rc4-hmac-exp":               "arcfour-hmac-exp",
	"arcfour-hmac-md5-exp":       "arcfour-hmac-exp",
	"des3-cbc-sha1":              "des3-cbc-sha1",
	"des3-hmac-sha1":             "des3-cbc-sha1",
	"des3-cbc-sha1-kd":           "des3-cbc-sha1",
	"des3-cbc-raw":               "des3-cbc-raw",
	"des-cbc-crc":                "des-cbc-crc",
	"des-cbc-md4":                "des-cbc-md4",
	"des-cbc-md5":                "des-cbc-md5",
	"des":                        "des-cbc-md5",
	"des-cbc-raw":                "des-cbc-raw",
	"des-hmac-sha1":              "des-hmac-sha1",
}

// enctypeWeakness classifies a canonical name: RC4 and DES (single and
// triple) are deprecated by RFC 8429 and RFC 6649; MIT 1.18+ has no single
// DES at all and logs RC4/3DES as DEPRECATED.
func enctypeWeakness(canonical string) string {
	switch {
	case strings.HasPrefix(canonical, "arcfour"), strings.HasPrefix(canonical, "des"):
		return "true"
	case strings.HasPrefix(canonical, "aes"), strings.HasPrefix(canonical, "camellia"):
		return "false"
	}
	return "unknown"
}

// canonicalEnctype returns MIT's canonical name, or the name as written
// (lower case) when it is not one MIT knows.
func canonicalEnctype(name string) string {
	n := strings.ToLower(name)
	if c, ok := enctypeNames[n]; ok {
		return c
	}
	return n
}

// splitList splits a whitespace- or comma-separated profile list.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t'
	})
}
