package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// realmCmd is one of `realm up`, `realm down`, `realm env`.
type realmCmd struct {
	cmd            *kingpin.CmdClause
	opts           realm.Options
	exporterConfig string
	replicaOf      string
	ipropPoll      time.Duration
	run            func(stdout, stderr io.Writer) int
}

func addRealmCommands(app *kingpin.Application) (up, down, env, relay *realmCmd, pp *probePrincipalCmd, load *realmLoadCmd) {
	parent := app.Command("realm", "Create, start and remove a throwaway MIT Kerberos realm on loopback (for tests, demos and the bench).")

	up = &realmCmd{cmd: parent.Command("up", "Create a realm in --dir, start krb5kdc and kadmind, print how to use it.")}
	o := &up.opts
	up.cmd.Flag("dir", "Directory for the realm; must be absent or empty. Everything the realm writes stays inside.").Required().StringVar(&o.Dir)
	up.cmd.Flag("realm", "Realm name.").Default("PERF.TEST").StringVar(&o.Realm)
	up.cmd.Flag("domain", "DNS domain of the service principals HTTP/webNNNN.<domain>.").Default("perf.test").StringVar(&o.Domain)
	realm.RegisterFlags(up.cmd, "", o)
	up.cmd.Flag("kdc-port", "KDC port (UDP and TCP) on 127.0.0.1; 0 picks a free one.").Default("0").IntVar(&o.KDCPort)
	up.cmd.Flag("kadmind-port", "kadmind port on 127.0.0.1; 0 picks a free one.").Default("0").IntVar(&o.KadmindPort)
	up.cmd.Flag("no-kadmind", "Do not start kadmind.").BoolVar(&o.NoKadmind)
	up.cmd.Flag("replica-of", "Make this realm a replica of the running realm in this directory: same realm and master key, its own krb5kdc and database, and a kpropd that pulls the primary's changes from its kadmind by iprop (turning iprop on there and restarting its kadmind). The principal-count flags are ignored.").
		PlaceHolder("DIR").StringVar(&up.replicaOf)
	up.cmd.Flag("iprop-poll", "With --replica-of: how often kpropd asks the primary for updates (iprop_replica_poll; MIT's default is 2m).").
		Default(realm.DefaultPoll.String()).DurationVar(&up.ipropPoll)
	up.cmd.Flag("log-to-syslog", "Run the KDC the Debian way: kdc.conf without a [logging] section, so krb5kdc, kadmind and kpropd log through syslog; they run in a private mount namespace whose /dev/log a relay process serves, writing each message into a real journal in DIR/journal (systemd-journal-remote). Needs unshare(1) and mount namespaces.").BoolVar(&o.LogToSyslog)
	up.cmd.Flag("trust", "Also create a second realm NAME in DIR/trust with a two-way trust to this one (krbtgt/NAME@REALM and krbtgt/REALM@NAME with the same keys in both databases, [capaths] and [domain_realm] in both krb5.conf): its own KDC on loopback, the probe principal and one service HTTP/web0001.<name in lower case>.").
		PlaceHolder("NAME").StringVar(&o.Trust)
	up.cmd.Flag("kdc-proxy", "Also serve the KDC through a KDC proxy ([MS-KKDCP], Kerberos over HTTPS): Debian's python3-kdcproxy under gunicorn over TLS on 127.0.0.1, its certificate from a throwaway CA made in --dir; --exporter-config gets a module of transport https for it.").BoolVar(&o.KDCProxy)
	up.cmd.Flag("kdc-proxy-port", "With --kdc-proxy: the proxy's port on 127.0.0.1; 0 picks a free one.").Default("0").IntVar(&o.KDCProxyPort)
	up.cmd.Flag("exporter-config", "Also write a krb5-exporter configuration file for this realm (probes and logs) to this path.").StringVar(&up.exporterConfig)
	up.run = up.up

	down = &realmCmd{cmd: parent.Command("down", "Stop the realm in --dir and remove everything it wrote.")}
	down.cmd.Flag("dir", "Directory of the realm.").Required().StringVar(&down.opts.Dir)
	down.run = down.down

	relay = &realmCmd{cmd: parent.Command(realm.RelayCommand, "Serve the syslog socket of a realm started with --log-to-syslog (started by realm up, stopped by realm down).").Hidden()}
	relay.cmd.Flag("dir", "Directory of the realm.").Required().StringVar(&relay.opts.Dir)
	relay.run = relay.relay

	env = &realmCmd{cmd: parent.Command("env", "Print the shell variables that point kinit/kvno/kadmin at the realm in --dir.")}
	env.cmd.Flag("dir", "Directory of the realm.").Required().StringVar(&env.opts.Dir)
	env.run = env.env
	return up, down, env, relay, addProbePrincipalCommand(parent), addRealmLoadCommand(parent)
}

func (c *realmCmd) up(stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var r *realm.Realm
	var err error
	if c.opts.LogToSyslog {
		// The relay outlives this command: this program, in a process of
		// its own, for the realm's absolute directory.
		exe, eerr := os.Executable()
		dir, derr := filepath.Abs(c.opts.Dir)
		if err = errors.Join(eerr, derr); err != nil {
			fmt.Fprintf(stderr, "krb5-exporter: %v\n", err)
			return 1
		}
		c.opts.SyslogRelay = []string{exe, "realm", realm.RelayCommand, "--dir", dir}
	}
	if c.replicaOf != "" {
		var p *realm.Realm
		if p, err = realm.Load(c.replicaOf); err == nil {
			r, err = realm.UpReplica(ctx, p, c.opts, c.ipropPoll)
		}
	} else {
		r, err = realm.Up(ctx, c.opts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter: %v\n", err)
		return 1
	}
	if c.exporterConfig != "" {
		if err := writeRealmConfig(r, c.exporterConfig); err != nil {
			r.Down()
			fmt.Fprintf(stderr, "krb5-exporter: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "# realm %s is up in %s (database and keytabs created in %.1fs)\n", r.Realm, r.Dir, r.Created.Seconds())
	if rep := r.Replica; rep != nil {
		fmt.Fprintf(stdout, "# replica of %s: KDC %s (UDP and TCP), kpropd (pid file %s, log %s) polls the primary's kadmind %s every %s\n",
			rep.PrimaryDir, r.KDCAddr, rep.PidFile, rep.Log, r.KadmindAddr, rep.Poll)
		fmt.Fprintf(stdout, "# update log %s (kproplog -h with KRB5_KDC_PROFILE=%s)\n", r.IpropLog, r.KDCConf)
	} else {
		fmt.Fprintf(stdout, "# KDC %s (UDP and TCP), kadmind %s\n", r.KDCAddr, r.KadmindAddr)
	}
	if p := r.KDCProxy; p != nil {
		fmt.Fprintf(stdout, "# KDC proxy %s (gunicorn pid file %s, log %s), certificate for 127.0.0.1 and %s from the CA %s\n", p.URL, p.PidFile, p.Log, p.ServerName, p.CA)
		fmt.Fprintf(stdout, "# kinit through it: a krb5.conf with kdc = %s and http_anchors = FILE:%s in [realms] %s\n", p.URL, p.CA, r.Realm)
	}
	if r.JournalDir != "" {
		fmt.Fprintf(stdout, "# the daemons log through syslog (no [logging] in kdc.conf) into the journal in %s: journalctl --directory %s -f\n", r.JournalDir, r.JournalDir)
	}
	if b := r.Trusted; b != nil {
		fmt.Fprintf(stdout, "# trusted realm %s in %s: KDC %s (UDP and TCP), two-way trust with %s\n", b.Realm, b.Dir, b.KDCAddr, r.Realm)
		fmt.Fprintf(stdout, "# cross-realm: kinit -k -t %s %s && kvno %s\n", r.ProbeKeytab, r.ProbePrincipal, b.Service(1))
	}
	printEnv(stdout, r)
	fmt.Fprintf(stdout, "# try:   kinit -k -t %s %s && kvno %s && klist\n", r.UserKeytab, r.User(1), r.Service(1))
	fmt.Fprintf(stdout, "# admin: kadmin -k -t %s -p %s\n", r.AdminKeytab, r.AdminPrincipal)
	fmt.Fprintf(stdout, "# stop:  krb5-exporter realm down --dir %s\n", r.Dir)
	return 0
}

func (c *realmCmd) down(stdout, stderr io.Writer) int {
	r, err := realm.Load(c.opts.Dir)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter: %v\n", err)
		return 1
	}
	if err := r.Down(); err != nil {
		fmt.Fprintf(stderr, "krb5-exporter: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "realm %s in %s stopped and removed\n", r.Realm, r.Dir)
	return 0
}

// relay serves the syslog socket of a realm until SIGTERM.
func (c *realmCmd) relay(stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := realm.Load(c.opts.Dir)
	if err == nil {
		err = r.ServeSyslog(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter: %v\n", err)
		return 1
	}
	return 0
}

func (c *realmCmd) env(stdout, stderr io.Writer) int {
	r, err := realm.Load(c.opts.Dir)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter: %v\n", err)
		return 1
	}
	printEnv(stdout, r)
	return 0
}

// printEnv prints export lines a shell can eval.
func printEnv(w io.Writer, r *realm.Realm) {
	for _, kv := range r.Env() {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(w, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
}
