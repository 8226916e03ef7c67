package collector

import (
	"strings"

	"github.com/krb5-exporter/krb5-exporter/internal/enctype"
)

// enctypeWeakness is the `weak` label of an enctype named in kdc.conf:
// "true" or "false" from the project's enctype table, "unknown" for a name
// MIT does not know.
func enctypeWeakness(name string) string {
	t, ok := enctype.ByName(name)
	switch {
	case !ok:
		return "unknown"
	case t.Weak:
		return "true"
	}
	return "false"
}

// canonicalEnctype returns MIT's canonical name, or the name as written
// (lower case) when it is not one MIT knows.
func canonicalEnctype(name string) string { return enctype.Canonical(name) }

// splitList splits a whitespace- or comma-separated profile list.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t'
	})
}
