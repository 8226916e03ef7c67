package realm

import "github.com/krb5-exporter/krb5-exporter/internal/cli"

// RegisterFlags registers the options of the harness's seed realm that
// `realm up` and `bench` (its ephemeral realm) share on app, each name
// after prefix ("" or "realm.").
func RegisterFlags(app cli.FlagGroup, prefix string, o *Options) {
	app.Flag(prefix+"users", "Number of user principals userNNNN (keys in users.keytab); -1 for none.").Default("1000").IntVar(&o.Users)
	app.Flag(prefix+"services", "Number of service principals HTTP/webNNNN.<domain>; -1 for none.").Default("100").IntVar(&o.Services)
	app.Flag(prefix+"fillers", "Number of filler principals that are never used; -1 for none.").Default("10000").IntVar(&o.Fillers)
	app.Flag(prefix+"workers", "Start krb5kdc -w N (N worker processes); 0 for a single process.").Default("0").IntVar(&o.Workers)
	app.Flag(prefix+"disable-last-success", "Set disable_last_success (no database write per login).").BoolVar(&o.DisableLastSuccess)
	app.Flag(prefix+"no-spake", "Do not offer SPAKE pre-authentication (encrypted timestamp only).").BoolVar(&o.NoSPAKE)
}
