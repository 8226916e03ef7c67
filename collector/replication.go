package collector

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/ulog"
	"github.com/krb5-exporter/krb5-exporter/logging"
)

// Reasons an update log cannot be used: the values of the reason label of
// krb5_iprop_ulog_error.
var ulogErrorReasons = []string{"missing", "unreadable", "short", "bad_magic"}

// ulogStates are the values of the state label of krb5_iprop_ulog_state.
var ulogStates = []string{ulog.StateStable.String(), ulog.StateUnstable.String(), ulog.StateCorrupt.String(), "unknown"}

// maxReplicas bounds the replica label: kprop leaves one .last_prop file
// per replica next to its dump, but a directory full of strays must not
// explode the series count.
const maxReplicas = 64

// replicationCollector reports replication health on a KDC host, from
// files only: the header of each iprop realm's update log (on a primary
// kadmind's, on a replica kpropd's), and on a primary the markers full
// propagation leaves next to its dump (kdb5_util dump's .dump_ok, kprop's
// .<replica>.last_prop). Lag is a question across hosts, for PromQL.
type replicationCollector struct {
	scan     *procScanner
	conf     *confSource
	logger   log.Logger
	dumpFile string

	status *logging.Changes // realm -> the update log's last problem, for one log line per change
	marks  markerList       // the dump directory's .last_prop files, listed again when it changes

	enabled, up, errReason, state, lastSerial, firstSerial, entries, lastTime, firstTime,
	blockSize, version, dumpTime, lastProp *prometheus.Desc
}

func newReplicationCollector(scan *procScanner, conf *confSource, dumpFile string, logger log.Logger) *replicationCollector {
	realm := []string{"realm"}
	return &replicationCollector{
		scan:     scan,
		conf:     conf,
		logger:   logger,
		dumpFile: dumpFile,
		status:   logging.NewChanges(nil),
		enabled:  desc("iprop", "enabled", "1 if iprop_enable is true for the realm in kdc.conf, else 0.", realm...),
		up:       desc("iprop", "ulog_up", "1 if the realm's iprop update log (iprop_logfile) was read and has a valid header, else 0 (see krb5_iprop_ulog_error).", realm...),
		errReason: desc("iprop", "ulog_error", "1 for the reason the update log could not be used (missing, unreadable, short, bad_magic), 0 for the others.",
			"realm", "reason"),
		state:       desc("iprop", "ulog_state", "1 for the state in the update log's header (stable, unstable: an update is being written or was interrupted, corrupt, unknown), 0 for the others.", "realm", "state"),
		lastSerial:  desc("iprop", "ulog_last_serial", "Serial number of the last update in the log (kdb_last_sno). A replica's equals the primary's when it is current.", realm...),
		firstSerial: desc("iprop", "ulog_first_serial", "Serial number of the oldest update still in the log (kdb_first_sno).", realm...),
		entries:     desc("iprop", "ulog_entries", "Updates held in the log (kdb_num; at most iprop_ulogsize).", realm...),
		lastTime:    desc("iprop", "ulog_last_update_time_seconds", "When the last update in the log was made on the primary, seconds since the Unix epoch (absent while the log is empty).", realm...),
		firstTime:   desc("iprop", "ulog_first_update_time_seconds", "When the oldest update in the log was made on the primary, seconds since the Unix epoch (absent while the log is empty).", realm...),
		blockSize:   desc("iprop", "ulog_block_size_bytes", "Size of one entry slot of the log (kdb_block).", realm...),
		version:     desc("iprop", "ulog_version", "Format version in the log's header (db_version_num; 1 in MIT krb5 1.x).", realm...),
		dumpTime:    desc("kprop", "dump_time_seconds", "Modification time of the full-propagation dump's .dump_ok marker (kdb5_util dump), seconds since the Unix epoch."),
		lastProp:    desc("kprop", "last_success_time_seconds", "Time of the last successful full propagation to the replica (kprop's .<replica>.last_prop marker), seconds since the Unix epoch.", "replica"),
	}
}

func (c *replicationCollector) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.enabled, c.up, c.errReason, c.state, c.lastSerial, c.firstSerial, c.entries,
		c.lastTime, c.firstTime, c.blockSize, c.version, c.dumpTime, c.lastProp} {
		ch <- d
	}
}

func (c *replicationCollector) Update(ch chan<- prometheus.Metric) error {
	snap, err := c.scan.get()
	if err != nil {
		return err
	}
	c.updateMarkers(ch)
	s, err := c.conf.settings(snap.kdcArgs.realms)
	if err != nil {
		return err
	}
	for _, r := range s.realms {
		ch <- gauge(c.enabled, boolFloat(r.ipropEnable), r.name)
		if r.ipropEnable {
			c.updateLog(ch, r.name, r.ipropLog)
		}
	}
	return nil
}

// updateLog reports one realm's update log. A log that cannot be used is
// a metric and one log line when that starts (and one when it ends), not
// a failed scrape: the other realms and markers are still good.
func (c *replicationCollector) updateLog(ch chan<- prometheus.Metric, realm, path string) {
	h, err := ulog.ReadFile(path)
	reason := ""
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		reason = "missing"
	case errors.Is(err, ulog.ErrShort):
		reason = "short"
	case errors.Is(err, ulog.ErrBadMagic):
		reason = "bad_magic"
	default:
		reason = "unreadable"
	}
	c.noteStatus(realm, path, reason, err)
	ch <- gauge(c.up, boolFloat(reason == ""), realm)
	for _, r := range ulogErrorReasons {
		ch <- gauge(c.errReason, boolFloat(r == reason), realm, r)
	}
	if reason != "" {
		return
	}
	for _, st := range ulogStates {
		ch <- gauge(c.state, boolFloat(st == h.State.String()), realm, st)
	}
	ch <- gauge(c.lastSerial, float64(h.LastSerial), realm)
	ch <- gauge(c.firstSerial, float64(h.FirstSerial), realm)
	ch <- gauge(c.entries, float64(h.Entries), realm)
	ch <- gauge(c.blockSize, float64(h.BlockSize), realm)
	ch <- gauge(c.version, float64(h.Version), realm)
	if !h.LastTime.IsZero() {
		ch <- gauge(c.lastTime, float64(h.LastTime.UnixMicro())/1e6, realm)
	}
	if !h.FirstTime.IsZero() {
		ch <- gauge(c.firstTime, float64(h.FirstTime.UnixMicro())/1e6, realm)
	}
}

// noteStatus logs when a realm's update log becomes unusable, changes
// reason, or recovers: one line per change, not one per scrape.
func (c *replicationCollector) noteStatus(realm, path, reason string, err error) {
	_, _, changed := c.status.Note(realm, reason)
	switch {
	case !changed:
	case reason != "":
		level.Error(c.logger).Log("msg", "iprop update log unusable; krb5_iprop_ulog_up is 0", "realm", realm, "path", path, "reason", reason, "err", err)
	default:
		level.Info(c.logger).Log("msg", "iprop update log readable again", "realm", realm, "path", path)
	}
}

// updateMarkers reports the full-propagation markers next to the dump
// file; none exist on a replica or where kprop never ran.
func (c *replicationCollector) updateMarkers(ch chan<- prometheus.Metric) {
	if c.dumpFile == "" {
		return
	}
	if fi, err := os.Stat(c.dumpFile + ".dump_ok"); err == nil {
		ch <- gauge(c.dumpTime, float64(fi.ModTime().UnixNano())/1e9)
	}
	dir, base := filepath.Split(c.dumpFile)
	if dir == "" {
		dir = "."
	}
	names, ok := c.marks.list(dir, base)
	if !ok {
		return
	}
	n := 0
	for _, m := range names {
		fi, err := os.Lstat(filepath.Join(dir, m.file))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if n++; n > maxReplicas {
			break
		}
		ch <- gauge(c.lastProp, float64(fi.ModTime().UnixNano())/1e9, m.replica)
	}
}

// markerList keeps the names of the dump directory's BASE.REPLICA.last_prop
// files: listing the directory (open, getdents, sort, close) was most of
// the replication collector's cost per scrape, and the names change only
// with the directory, whose stat (device, inode, mtime, ctime) says so.
// A listing is kept only once the directory's mtime is a few seconds
// old, so that two changes within one timestamp tick cannot hide the
// second.
type markerList struct {
	dir, base string
	stamp     unix.Stat_t
	names     []marker
	ok        bool
}

type marker struct{ file, replica string }

// markerListFresh is how old a directory's mtime must be for its
// listing to be kept.
const markerListFresh = 2 * time.Second

func (l *markerList) list(dir, base string) ([]marker, bool) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		l.ok = false
		return nil, false
	}
	if l.ok && l.dir == dir && l.base == base && st.Dev == l.stamp.Dev && st.Ino == l.stamp.Ino &&
		st.Mtim == l.stamp.Mtim && st.Ctim == l.stamp.Ctim {
		return l.names, true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		l.ok = false
		return nil, false
	}
	l.names = l.names[:0]
	for _, e := range entries {
		replica, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok {
			continue
		}
		if replica, ok = strings.CutSuffix(replica, ".last_prop"); !ok || !hostName(replica) {
			continue
		}
		if len(l.names) == 16*maxReplicas {
			break // bounded whatever the directory holds
		}
		l.names = append(l.names, marker{e.Name(), replica})
	}
	l.dir, l.base, l.stamp = dir, base, st
	l.ok = time.Since(time.Unix(st.Mtim.Unix())) > markerListFresh
	return l.names, true
}

// hostName accepts what kprop can have been given as a replica: a host
// name or address (letters, digits, '.', '-', '_', ':'), at most 253
// bytes. Anything else in the dump's directory is not a label value.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':') {
			return false
		}
	}
	return true
}
