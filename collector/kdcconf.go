package collector

import (
	"os"
	"strings"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
)

// kdcconfCollector reports the settings that decide a KDC's performance:
// from kdc.conf (merged with krb5.conf) and from krb5kdc's command line.
type kdcconfCollector struct {
	scan *procScanner
	conf *confSource
	warn *onceLogger

	info, enctype, backlog, workers, dbSize, dbMtime, parseErrors *prometheus.Desc
}

func newKDCConfCollector(scan *procScanner, conf *confSource, logger log.Logger) *kdcconfCollector {
	return &kdcconfCollector{
		scan: scan,
		conf: conf,
		warn: newOnceLogger(logger),
		info: desc("kdcconf", "info", "Settings of a realm the KDC serves: database module, whether successful and failed logins are written to the database, SPAKE groups offered (empty: no SPAKE).",
			"realm", "db_library", "disable_last_success", "disable_lockout", "spake_groups"),
		enctype: desc("kdcconf", "supported_enctype", "An encryption type in the realm's supported_enctypes (keys made for new principals); weak is true for DES, 3DES and RC4.",
			"realm", "enctype", "weak"),
		backlog: desc("kdcconf", "tcp_listen_backlog", "kdc_tcp_listen_backlog: the listen() queue length the KDC asks for its TCP sockets (MIT default 5; the kernel caps it at net.core.somaxconn)."),
		workers: desc("kdc", "workers_configured", "Worker processes krb5kdc was started with (-w N); 0 for a single process."),
		dbSize:  desc("kdc", "database_size_bytes", "Size of the realm's principal database file (db2 or LMDB).", "realm"),
		dbMtime: desc("kdc", "database_modified_time_seconds", "Modification time of the realm's principal database file, seconds since the Unix epoch.", "realm"),
		parseErrors: prometheus.NewDesc("krb5_exporter_kdcconf_parse_errors_total",
			"Times the KDC profile (kdc.conf and its includes, krb5.conf) failed to parse or held an invalid value; counted once per change of the files.", nil, nil),
	}
}

func (c *kdcconfCollector) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.info, c.enctype, c.backlog, c.workers, c.dbSize, c.dbMtime, c.parseErrors} {
		ch <- d
	}
}

func (c *kdcconfCollector) Update(ch chan<- prometheus.Metric) error {
	snap, err := c.scan.get()
	if err != nil {
		return err
	}
	if snap.program(progKDC).running() {
		ch <- gauge(c.workers, float64(snap.kdcArgs.workers))
	}
	s, err := c.conf.settings(snap.kdcArgs.realms)
	ch <- counter(c.parseErrors, c.conf.parseErrors)
	if err != nil {
		return err
	}
	ch <- gauge(c.backlog, float64(s.tcpListenBacklog))
	spake := strings.Join(s.spakeGroups, ",")
	for _, r := range s.realms {
		ch <- gauge(c.info, 1, r.name, r.dbLibrary, boolLabel(r.disableLastSuccess), boolLabel(r.disableLockout), spake)
		for _, e := range r.enctypes {
			ch <- gauge(c.enctype, 1, r.name, e, enctypeWeakness(e))
		}
		if r.dbFile == "" {
			continue
		}
		fi, err := os.Stat(r.dbFile)
		if err != nil {
			// Typically /var/lib/krb5kdc is root-only (the package's
			// grant-access gives traverse); the settings above are still
			// worth having.
			c.warn.log("db/"+r.dbFile, "msg", "cannot stat the principal database; size and mtime omitted (traverse access to its directory: /usr/libexec/krb5-exporter/grant-access)", "realm", r.name, "err", err)
			continue
		}
		ch <- gauge(c.dbSize, float64(fi.Size()), r.name)
		ch <- gauge(c.dbMtime, float64(fi.ModTime().UnixNano())/1e9, r.name)
	}
	return nil
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
