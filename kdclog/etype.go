package kdclog

import "github.com/krb5-exporter/krb5-exporter/internal/enctype"

// Etype is a Kerberos encryption type number as the KDC logs it: bare before
// MIT 1.18 ("rep=18"), in parentheses after the name since ("rep=aes256-...(18)").
type Etype int32

// EtypeNone marks an absent etype (a TGS failure has no ticket, 1.18+ logs
// "rep=UNSUPPORTED:(0)" there).
const EtypeNone Etype = 0

// The etype label set is the project's enctype table (internal/enctype):
// MIT's canonical names, so both log formats give the same series.

// numEtypeLabels is the size of the etype label set: the table plus "other".
const numEtypeLabels = enctype.Count + 1

const etypeOther = enctype.Count

// etypeLabel returns the label index of e, etypeOther for numbers not in
// the table.
func etypeLabel(e Etype) int {
	if i := enctype.Index(int32(e)); i >= 0 {
		return i
	}
	return etypeOther
}

func etypeName(i int) string {
	if i == etypeOther {
		return "other"
	}
	return enctype.All()[i].Name
}

// IsWeak reports whether e is a single-DES, 3DES or RC4 type.
func (e Etype) IsWeak() bool { return enctype.IsWeak(int32(e)) }
