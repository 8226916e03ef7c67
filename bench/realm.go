package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// RealmSystem describes a harness realm for the suite.
func RealmSystem(r *realm.Realm) *System {
	o := r.Opts
	settings := map[string]string{
		"database":             "db2",
		"workers":              strconv.Itoa(o.Workers),
		"disable_last_success": strconv.FormatBool(o.DisableLastSuccess),
		"disable_lockout":      "false",
		"spake_preauth_groups": "edwards25519",
		"supported_enctypes":   strings.Join(o.Enctypes, " "),
		"principals":           fmt.Sprintf("%d users, %d services, %d fillers", o.Users, o.Services, o.Fillers),
		"realm_kind":           "ephemeral harness realm",
	}
	if o.NoSPAKE {
		settings["spake_preauth_groups"] = "(none)"
	}
	return &System{
		Realm: r.Realm, KDC: r.KDCAddr, Domain: r.Domain,
		UserKeytab: r.UserKeytab, Users: o.Users, Services: o.Services,
		Env:     r.Env(),
		KDCPids: r.KDCPids, KDCLog: r.KDCLog,
		StopKDC: r.StopKDC, StartKDC: r.StartKDC,
		KadminAddr: r.KadmindAddr, AdminPrincipal: r.AdminPrincipal, AdminKeytab: r.AdminKeytab,
		AllowWrites: true,
		DumpCommand: []string{"kdb5_util", "-r", r.Realm},
		Settings:    settings,
	}
}
