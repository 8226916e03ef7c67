// Package spake implements the client side of SPAKE pre-authentication for
// Kerberos (draft-ietf-kitten-krb-spake-preauth, as MIT krb5 1.17+ does it in
// src/plugins/preauth/spake/): the edwards25519 group with MIT's M and N
// constants (and P-256, as MIT's OpenSSL backend has it, for KDCs without
// edwards25519), the multiplier w drawn from the initial reply key with the
// enctype's PRF+, the transcript hash, the K'[n] key derivation and the DER
// forms of the PA-SPAKE (padata type 151) messages with the SF-NONE second
// factor, which is what MIT's client sends for keytab and password logins.
//
// It knows the four AES enctypes (RFC 3962, RFC 8009) and provides their
// RFC 3961/8009 PRF, PRF+ and KRB-FX-CF2, which gokrb5 lacks or only offers
// in allocating form. Encryption of the factor with K'[1] and decryption of
// the AS-REP with K'[0] are left to the caller's enctype code.
//
// The protocol, client view (T from the KDC, S from us):
//
//	w      = PRF+(ikey, "SPAKEsecret" || group) reduced mod l     (per key)
//	S      = y·G + w·N,  K = y·(T − w·M)                           (y random, multiple of 8)
//	thash  = H(H(0 || support || challenge) || S)                  (H = SHA-256)
//	K'[n]  = KRB-FX-CF2(ikey, "SPAKE", random-to-key(H("SPAKEkey" || group ||
//	         etype || wbytes || K || thash || req-body || n || 1)), "keyderiv")
//
// K'[0] replaces the reply key of the AS-REP; K'[1] encrypts the
// SPAKESecondFactor in the SPAKEResponse with key usage 65.
package spake
