package collector

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/krb5-exporter/krb5-exporter/internal/cli"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5profile"
)

// Config selects and configures the collectors. RegisterFlags fills one
// from the command line; DefaultConfig is the same without flags.
type Config struct {
	// ProcFS is the procfs mount point (--path.procfs).
	ProcFS string

	// Enabled collectors (--collector.NAME / --no-collector.NAME).
	Process, Network, KDCConf, Replication bool
	// TCPConnections counts the connections on the KDC's TCP ports by
	// state; it costs the kernel a walk of its whole connection table
	// (milliseconds per scrape, whatever the KDC does), so it is opt-in.
	TCPConnections bool
	// KDCService times each request of krb5kdc in the kernel (eBPF);
	// opt-in: it needs CAP_BPF and CAP_PERFMON.
	KDCService bool

	// Pid files of the daemons; empty finds the processes by name.
	KDCPidFile, KadmindPidFile, KpropdPidFile string
	// Identity tells the daemons from processes that only share their
	// name (kdcproc.Identity; --collector.process.{user,exe,unit}).
	Identity kdcproc.Identity

	// DumpFile is the full-propagation dump (kprop -f, kadmind -F) whose
	// .dump_ok and .<replica>.last_prop markers the replication collector
	// reads. Empty picks the Debian or RHEL default that exists.
	DumpFile string

	// KDCConfPath is the KDC profile: one path or a colon-separated list,
	// like KRB5_KDC_PROFILE. Empty picks whichever of the Debian and RHEL
	// locations exists.
	KDCConfPath string
	// Krb5ConfPath is merged after kdc.conf (the KDC reads both): one path
	// or a colon-separated list, like KRB5_CONFIG; missing files are
	// skipped, as libkrb5 does. Empty means /etc/krb5.conf.
	Krb5ConfPath string

	// Workers keeps the stable worker indexes; the daemon shares it with
	// the log's per-worker counter. Nil: the process collector keeps its
	// own.
	Workers *kdcproc.Workers
}

const defaultKrb5Conf = krb5profile.DefaultKrb5Conf

// MIT's KPROP_DEFAULT_FILE as Debian and RHEL build it.
var dumpFileCandidates = []string{"/var/lib/krb5kdc/replica_datatrans", "/var/kerberos/krb5kdc/replica_datatrans"}

// DefaultConfig enables the collectors that are on by default and reads
// /proc; the TCP connection count is off, as on the command line.
func DefaultConfig() Config {
	cfg := Config{ProcFS: "/proc"}
	for _, c := range collectors {
		*c.enabled(&cfg) = c.byDefault
	}
	return cfg
}

// RegisterFlags adds the collector flags to app. The returned Config is
// filled in when the command line is parsed.
func RegisterFlags(app cli.FlagGroup) *Config {
	cfg := &Config{}
	ProcFSFlag(app, &cfg.ProcFS)

	for _, c := range collectors {
		app.Flag("collector."+c.name, c.help).Default(strconv.FormatBool(c.byDefault)).BoolVar(c.enabled(cfg))
	}
	app.Flag("collector.replication.dump-file", "Full-propagation dump file (kprop -f, kadmind -F) next to which kdb5_util and kprop leave their .dump_ok and .<replica>.last_prop markers. Default: whichever of "+
		dumpFileCandidates[0]+" and "+dumpFileCandidates[1]+" has its directory.").
		PlaceHolder("PATH").StringVar(&cfg.DumpFile)
	app.Flag("collector.network.tcp-connections", "Count the TCP connections on the KDC's ports by state (krb5_kdc_tcp_connections; off by default). The kernel walks its whole connection table for it on every scrape: about 3 ms of CPU with 262,144 buckets whatever the KDC does, more with many sockets in TIME_WAIT (see docs/metrics.md). The listen queue and overflows do not need it.").
		Default("false").BoolVar(&cfg.TCPConnections)
	KDCPidFileFlag(app, &cfg.KDCPidFile)
	app.Flag("collector.process.kadmind-pidfile", "Pid file of kadmind; without it kadmind is found by process name.").
		PlaceHolder("PATH").StringVar(&cfg.KadmindPidFile)
	app.Flag("collector.process.kpropd-pidfile", "Pid file of kpropd; without it kpropd is found by process name.").
		PlaceHolder("PATH").StringVar(&cfg.KpropdPidFile)
	IdentityFlags(app, &cfg.Identity)

	app.Flag("collector.kdcconf.path", "KDC profile (colon-separated list allowed). Default: whichever of "+
		krb5profile.KDCConfCandidates[0]+" and "+krb5profile.KDCConfCandidates[1]+" exists.").
		Envar("KRB5_KDC_PROFILE").PlaceHolder("PATH").StringVar(&cfg.KDCConfPath)
	app.Flag("collector.kdcconf.krb5-config", "krb5.conf merged after kdc.conf, as the KDC does (for spake_preauth_groups, default_realm); missing files are skipped. Default: "+defaultKrb5Conf+".").
		Envar("KRB5_CONFIG").PlaceHolder("PATH").StringVar(&cfg.Krb5ConfPath)
	return cfg
}

// ProcFSFlag adds --path.procfs, whose value goes to v. RegisterFlags adds
// it; a command that reads /proc without the collectors (top) adds it
// alone, so that its help is the daemon's.
func ProcFSFlag(app cli.FlagGroup, v *string) {
	app.Flag("path.procfs", "procfs mount point.").Default("/proc").StringVar(v)
}

// KDCPidFileFlag adds --collector.process.krb5kdc-pidfile, whose value goes
// to v; like ProcFSFlag, for RegisterFlags and top.
func KDCPidFileFlag(app cli.FlagGroup, v *string) {
	app.Flag("collector.process.krb5kdc-pidfile", "Pid file of krb5kdc (its -P argument); without it krb5kdc is found by process name.").
		PlaceHolder("PATH").StringVar(v)
}

// IdentityFlags adds the flags of what makes a process named krb5kdc,
// kadmind or kpropd that daemon (docs/security.md); like ProcFSFlag, for
// RegisterFlags and top.
func IdentityFlags(app cli.FlagGroup, id *kdcproc.Identity) {
	app.Flag("collector.process.user", "A user the daemons may run as besides root and the exporter's own (repeatable; name or uid). A process named like a daemon that runs as anyone else is not counted.").
		PlaceHolder("USER").StringsVar(&id.Users)
	app.Flag("collector.process.exe", "An executable of a daemon besides /usr/sbin/NAME and /usr/local/sbin/NAME (repeatable; its base name is the daemon). Checked where /proc/PID/exe is readable (root or CAP_SYS_PTRACE).").
		PlaceHolder("PATH").StringsVar(&id.Executables)
	app.Flag("collector.process.unit", "A systemd unit the daemons may run in besides the distributions' (krb5-kdc, krb5-admin-server, krb5-kpropd, krb5kdc, kadmin, kprop .service; repeatable). On a systemd host, where /proc/PID/exe is unreadable, a process outside these units is not counted.").
		PlaceHolder("UNIT").StringsVar(&id.Units)
}

func (c Config) pidFiles() map[string]string {
	m := map[string]string{}
	for prog, path := range map[string]string{progKDC: c.KDCPidFile, progKadmind: c.KadmindPidFile, progKpropd: c.KpropdPidFile} {
		if path != "" {
			m[prog] = path
		}
	}
	return m
}

// KDCProfile returns the KDC's profile files: kdc.conf (--collector.kdcconf.path
// or the distribution's that exists) and the krb5.conf read after it.
func (c Config) KDCProfile() (kdc, krb5 string) { return c.kdcConfPaths(), c.krb5ConfPaths() }

func (c Config) kdcConfPaths() string {
	if c.KDCConfPath != "" {
		return c.KDCConfPath
	}
	return krb5profile.DefaultKDCConf()
}

func (c Config) krb5ConfPaths() string {
	if c.Krb5ConfPath != "" {
		return c.Krb5ConfPath
	}
	return defaultKrb5Conf
}

func (c Config) dumpFile() string {
	if c.DumpFile != "" {
		return c.DumpFile
	}
	for _, p := range dumpFileCandidates {
		if _, err := os.Stat(filepath.Dir(p)); err == nil {
			return p
		}
	}
	return dumpFileCandidates[0]
}
