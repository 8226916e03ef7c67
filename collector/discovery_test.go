package collector

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseKDCArgs(t *testing.T) {
	for cmd, want := range map[string]kdcArgs{
		"/usr/sbin/krb5kdc":                             {},
		"/usr/sbin/krb5kdc -r PERF.TEST -P /run/p -w 2": {workers: 2, realms: []string{"PERF.TEST"}},
		"krb5kdc -nw4 -rA.TEST -r B.TEST":               {workers: 4, realms: []string{"A.TEST", "B.TEST"}},
		"krb5kdc -P -w -w 3":                            {workers: 3}, // "-w" is -P's argument
		"krb5kdc -x db2arg -d /db -- -w 9":              {},
	} {
		if got := parseKDCArgs(strings.Fields(cmd)); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v, want %+v", cmd, got, want)
		}
	}
}
