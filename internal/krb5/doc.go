// Package krb5 is the project's Kerberos client engine: the AS exchange (a
// login with a keytab or password, pre-authenticated like a fresh `kinit -k`:
// with SPAKE when the KDC offers it (three round trips, two with the KDC's
// optimistic challenge; package spake), else with encrypted timestamp (two
// round trips, or one with pre-authentication up front)) and the TGS exchange (a fresh service
// ticket, never answered from a cache, like `kvno`), over UDP or TCP, with
// context deadlines, libkrb5's UDP retransmit and RESPONSE_TOO_BIG fallback
// to TCP, KDC clock offset, and errors classified for metrics (Classify).
//
// It is built for measuring KDCs rather than for applications: a warm
// Client allocates nothing per exchange (requests are pre-encoded and
// patched, replies parsed in place, key schedules kept), so the prober and
// load generators cost little next to the KDC they measure. Messages are
// hand-written DER (internal/der); gokrb5 supplies string-to-key, key derivation and
// keytab parsing, and serves as the reference decoder in tests.
//
// What it does not do: FAST, PKINIT, SPAKE second factors and groups other
// than edwards25519 and P-256, cross-realm referrals,
// canonicalisation, ticket caches, AP-REQs to services, or any enctype
// other than the four AES types (internal/enctype lists them). A Client is
// not safe for concurrent use; Credentials are, and may be shared.
package krb5
