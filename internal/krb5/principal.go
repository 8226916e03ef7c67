package krb5

import (
	"fmt"
	"strings"

	"github.com/jcmturner/gokrb5/v8/iana/nametype"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// Principal is a parsed Kerberos principal name.
type Principal struct {
	Components []string
	Realm      string
}

// ParsePrincipal parses "name[/instance...][@REALM]"; defaultRealm applies
// when no realm is given. Escapes are not supported: names in a probe
// configuration are plain.
func ParsePrincipal(s, defaultRealm string) (Principal, error) {
	name, realm := s, defaultRealm
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		name, realm = s[:i], s[i+1:]
	}
	if name == "" || strings.ContainsAny(name, "\\@") {
		return Principal{}, fmt.Errorf("invalid principal name %q", s)
	}
	if realm == "" {
		return Principal{}, fmt.Errorf("principal %q has no realm", s)
	}
	comps := strings.Split(name, "/")
	for _, c := range comps {
		if c == "" {
			return Principal{}, fmt.Errorf("invalid principal name %q: empty component", s)
		}
	}
	return Principal{Components: comps, Realm: realm}, nil
}

// String returns the principal as "a/b@REALM".
func (p Principal) String() string {
	return strings.Join(p.Components, "/") + "@" + p.Realm
}

// nameType is the name type krb5_parse_name gives, as kinit and kvno send it:
// KRB_NT_SRV_INST for krbtgt, KRB_NT_PRINCIPAL for everything else.
func (p Principal) nameType() int32 {
	if len(p.Components) == 2 && p.Components[0] == "krbtgt" {
		return nametype.KRB_NT_SRV_INST
	}
	return nametype.KRB_NT_PRINCIPAL
}

// salt is the default salt: the realm followed by the name components.
func (p Principal) salt() string { return p.Realm + strings.Join(p.Components, "") }

// principalName prepends a PrincipalName SEQUENCE.
func (w *derWriter) principalName(p Principal) {
	m := w.Len()
	seq := w.Len()
	for i := len(p.Components) - 1; i >= 0; i-- {
		c := w.Len()
		w.RawString(p.Components[i])
		w.Close(der.TagGeneralString, c)
	}
	w.Close(der.TagSequence, seq)
	w.Close(der.Ctx(1), seq)
	w.ExplicitInt(0, int64(p.nameType()))
	w.Close(der.TagSequence, m)
}

// krbtgt returns krbtgt/REALM@REALM.
func krbtgt(realm string) Principal {
	return Principal{Components: []string{"krbtgt", realm}, Realm: realm}
}
