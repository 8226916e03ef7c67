package main

import (
	"fmt"
	"io"

	"github.com/alecthomas/kingpin/v2"

	"github.com/krb5-exporter/krb5-exporter/realm/probeprincipal"
)

// probePrincipalCmd is `krb5-exporter realm probe-principal`: on a KDC host
// (kadmin.local) or anywhere with an admin keytab (kadmin), it creates the
// exporter's own client principal with a random key, exports the key to a
// keytab readable by the service user alone, and prints the configuration
// that probes with it (realm/probeprincipal). The key is never printed.
type probePrincipalCmd struct {
	cmd  *kingpin.CmdClause
	opts probeprincipal.Options
}

func addProbePrincipalCommand(parent *kingpin.CmdClause) *probePrincipalCmd {
	p := &probePrincipalCmd{}
	o := &p.opts
	c := parent.Command("probe-principal", "Create the exporter's probe principal with a random key (kadmin.local on the KDC host, or kadmin with --admin-keytab), export its keytab (mode 0600, owned by --owner) and print the configuration that uses it.")
	p.cmd = c
	c.Flag("principal", "Probe principal: name or name@REALM.").Default("krb5-exporter-probe").StringVar(&o.Principal)
	c.Flag("realm", "Realm; empty: the principal's, else the default realm of krb5.conf.").StringVar(&o.Realm)
	c.Flag("keytab", "Keytab to write (replaced atomically).").Default("/etc/krb5-exporter/probe.keytab").StringVar(&o.Keytab)
	c.Flag("owner", "User that owns the keytab (the service user); empty: the user running this command.").Default("krb5-exporter").StringVar(&o.Owner)
	c.Flag("rotate", "If the principal exists, give it a new random key (keytabs holding the old key stop working).").BoolVar(&o.Rotate)
	c.Flag("admin-principal", "With --admin-keytab: the admin principal for kadmin.").Default("").StringVar(&o.AdminPrincipal)
	c.Flag("admin-keytab", "Use kadmin (over the network) with this admin keytab instead of kadmin.local.").StringVar(&o.AdminKeytab)
	c.Flag("admin-server", "With --admin-keytab: kadmind host[:port]; empty: admin_server of krb5.conf.").StringVar(&o.AdminServer)
	c.Flag("kdc", "KDC address written into the printed configuration.").Default("127.0.0.1:88").StringVar(&o.KDC)
	c.Flag("kdc-log", "KDC log file written into the printed configuration; empty: none, the exporter follows what kdc.conf's [logging] says (a file, or the journal).").Default("").StringVar(&o.KDCLog)
	return p
}

func (p *probePrincipalCmd) run(stdout, stderr io.Writer) int {
	if err := probeprincipal.Create(p.opts, stdout); err != nil {
		fmt.Fprintf(stderr, "krb5-exporter: realm probe-principal: %v\n", err)
		return 1
	}
	return 0
}
