package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcaddr"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/prober"
)

// probeCmd is `krb5-exporter probe`: one login and one service ticket
// against one KDC, printed Nagios style. It replaces check_kerberos-style
// shell-outs to kinit and kvno.
type probeCmd struct {
	cmd *kingpin.CmdClause

	kdc        string
	moduleName string
	moduleFile string
	module     config.ProbeModule
	set        map[string]*bool // module flags given on the command line
	thresholds prober.NagiosThresholds
	verbose    bool
}

// addProbeCommand registers `probe` on app. main runs it with
// p.run(stdout, stderr) when p.cmd.FullCommand() was chosen.
func addProbeCommand(app *kingpin.Application) *probeCmd {
	p := &probeCmd{set: map[string]*bool{}}
	p.cmd = app.Command("probe", "Probe a KDC once: a login (AS exchange like kinit -k: SPAKE in three round trips when the KDC offers it, else encrypted timestamp in two) and a service ticket (TGS exchange, like kvno); print the phases and exit 0/1/2/3 like a Nagios check (OK, WARNING, CRITICAL, UNKNOWN).")
	c := p.cmd
	c.Flag("kdc", "KDC address: host:port, [v6]:port or a host (port 88); with --transport https the KDC proxy's URL (https://host/KdcProxy). Required.").StringVar(&p.kdc)
	c.Flag("module", "Take the probe settings from this module of --config.file; flags below override its fields.").StringVar(&p.moduleName)
	c.Flag("config.file", "Exporter configuration file holding --module (the daemon's --config.file).").StringVar(&p.moduleFile)
	// The flag's first name, kept so that existing checks keep working.
	c.Flag("module.config-file", "Old name of --config.file.").Hidden().StringVar(&p.moduleFile)
	m := &p.module
	p.flag(c, "realm", "Realm of the client and the service.").StringVar(&m.Realm)
	p.flag(c, "client", "Client principal, name or name@REALM.").StringVar(&m.Client)
	p.flag(c, "keytab", "Keytab with the client's keys.").StringVar(&m.Keytab)
	p.flag(c, "password-file", "File whose first line is the client's password (instead of --keytab).").StringVar(&m.PasswordFile)
	p.flag(c, "service", "Service principal for the TGS exchange; empty: login only.").StringVar(&m.Service)
	p.flag(c, "transport", "udp, tcp or https (through the KDC proxy at --kdc, [MS-KKDCP]).").Default("udp").EnumVar(&m.Transport, "udp", "tcp", "https")
	p.flag(c, "proxy-ca-file", "With --transport https: PEM file of the CAs that may sign the proxy's certificate (default: the system's roots).").StringVar(&m.ProxyCAFile)
	p.flag(c, "proxy-server-name", "With --transport https: the name the proxy's certificate must carry (default: the URL's host).").StringVar(&m.ProxyServerName)
	p.flag(c, "timeout", "Time limit of each exchange.").Default(config.DefaultProbeTimeout.String()).DurationVar(&m.Timeout)
	p.flag(c, "preauth", "Pre-authentication: auto (SPAKE when the KDC offers it, as kinit), spake or encrypted_timestamp.").Default("auto").EnumVar(&m.Preauth, "auto", "spake", "encrypted_timestamp")
	p.flag(c, "preauth-upfront", "Send pre-authentication in the first AS-REQ (one round trip, as a client that remembers).").BoolVar(&m.PreauthUpfront)
	p.flag(c, "enctype", "Enctype to offer, repeatable, in order (default: the four RHEL 9 AES types).").StringsVar(&m.Enctypes)
	p.flag(c, "allow-readable-keys", "Accept a keytab or password file that users other than its owner may read.").BoolVar(&m.AllowReadableKeys)
	p.flag(c, "udp-retransmit", "Resend an unanswered UDP request after this long, doubling (libkrb5: 1s); 0 never.").Default("0s").DurationVar(&m.UDPRetransmit)
	c.Flag("warning", "WARNING when an exchange takes at least this long; 0 disables.").Default("0s").DurationVar(&p.thresholds.Warning)
	c.Flag("critical", "CRITICAL when an exchange takes at least this long; 0 disables.").Default("0s").DurationVar(&p.thresholds.Critical)
	c.Flag("clock-skew-warning", "WARNING when the KDC's clock is off by at least this much; 0 disables.").Default("60s").DurationVar(&p.thresholds.SkewWarning)
	c.Flag("clock-skew-critical", "CRITICAL when the KDC's clock is off by at least this much (the KDC rejects logins beyond 5m by default); 0 disables.").Default("240s").DurationVar(&p.thresholds.SkewCritical)
	c.Flag("verbose", "Print every step of the exchanges on stderr.").Short('v').BoolVar(&p.verbose)
	return p
}

// flag registers a module flag and remembers whether the user set it.
func (p *probeCmd) flag(c *kingpin.CmdClause, name, help string) *kingpin.FlagClause {
	set := new(bool)
	p.set[name] = set
	return c.Flag(name, help).IsSetByUser(set)
}

// resolveModule merges --module from the file with the flags the user set.
func (p *probeCmd) resolveModule() (config.ProbeModule, error) {
	if p.moduleName == "" {
		if p.moduleFile != "" {
			return config.ProbeModule{}, fmt.Errorf("--config.file needs --module")
		}
		return p.module, nil
	}
	if p.moduleFile == "" {
		return config.ProbeModule{}, fmt.Errorf("--module needs --config.file")
	}
	cfg, err := config.Load(p.moduleFile)
	if err != nil {
		return config.ProbeModule{}, err
	}
	mod, ok := cfg.Modules[p.moduleName]
	if !ok {
		return config.ProbeModule{}, fmt.Errorf("%s: no module %q", p.moduleFile, p.moduleName)
	}
	f := p.module
	over := func(name string, apply func()) {
		if *p.set[name] {
			apply()
		}
	}
	over("realm", func() { mod.Realm = f.Realm })
	over("client", func() { mod.Client = f.Client })
	over("keytab", func() { mod.Keytab, mod.PasswordFile = f.Keytab, "" })
	over("password-file", func() { mod.PasswordFile, mod.Keytab = f.PasswordFile, "" })
	over("service", func() { mod.Service = f.Service })
	over("transport", func() { mod.Transport = f.Transport })
	over("proxy-ca-file", func() { mod.ProxyCAFile = f.ProxyCAFile })
	over("proxy-server-name", func() { mod.ProxyServerName = f.ProxyServerName })
	over("timeout", func() { mod.Timeout = f.Timeout })
	over("preauth", func() { mod.Preauth = f.Preauth })
	over("preauth-upfront", func() { mod.PreauthUpfront = f.PreauthUpfront })
	over("enctype", func() { mod.Enctypes = f.Enctypes })
	over("udp-retransmit", func() { mod.UDPRetransmit = f.UDPRetransmit })
	over("allow-readable-keys", func() { mod.AllowReadableKeys = f.AllowReadableKeys })
	return mod, nil
}

func (p *probeCmd) run(stdout, stderr io.Writer) int {
	mod, err := p.resolveModule()
	if err == nil {
		err = mod.Validate()
	}
	if err == nil && mod.EffectiveProber() != config.ProberKDC {
		// The check's verdict and perfdata are a KDC's; kadmind's probers
		// run in the daemon (probes:, /probe).
		err = fmt.Errorf("module %q is a prober %s module: use it under probes: or at /probe", p.moduleName, mod.Prober)
	}
	if err == nil {
		err = mod.CheckKeyFile()
	}
	if err == nil {
		// Checked here rather than by kingpin so that a missing address
		// exits UNKNOWN (3), as a monitoring check must.
		if mod.Transport == "https" {
			_, err = kdcaddr.ParseProxyURL(p.kdc)
		} else {
			err = kdcaddr.Check(p.kdc)
		}
	}
	if err != nil {
		return probeUnknown(stdout, err.Error())
	}
	logger := log.NewNopLogger()
	if p.verbose {
		logger = log.NewLogfmtLogger(log.NewSyncWriter(stderr))
	}
	creds, err := prober.ModuleCredentials(&mod)
	if err != nil {
		return probeUnknown(stdout, err.Error())
	}
	if creds.WorldReadable() {
		level.Warn(log.NewLogfmtLogger(stderr)).Log("msg", "keytab or password file is readable by every local user")
	}
	t, err := prober.NewTarget(p.kdc, &mod, creds, logger)
	if err != nil {
		return probeUnknown(stdout, err.Error())
	}
	defer t.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := t.Run(ctx)
	if o.Canceled {
		return probeUnknown(stdout, "interrupted")
	}
	code, line := prober.NagiosCheck(&o, p.thresholds)
	fmt.Fprintln(stdout, line)
	return code
}

// probeUnknown prints the check's UNKNOWN line, the one line a monitoring
// system shows, and returns its exit code.
func probeUnknown(stdout io.Writer, text string) int {
	fmt.Fprintln(stdout, prober.NagiosLine(prober.NagiosUnknown, text))
	return prober.NagiosUnknown
}
