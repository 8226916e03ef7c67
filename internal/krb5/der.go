package krb5

import "github.com/krb5-exporter/krb5-exporter/internal/der"

// derWriter is der's back-to-front Writer with the engine's own structures
// (principalName, padata, kdcReq, encryptedData) as methods. Parsing goes
// through der's reader, which slices the input (no copies, no reflection) and
// keeps reply handling allocation-free; gokrb5's reflection-based asn1 is used
// only off the hot path and in tests as the reference implementation.
type derWriter struct{ der.Writer }
