package kdclog

import (
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/cli"
)

// Config is the log collector's command-line configuration; the logs
// themselves come from the configuration file (ApplyConfig).
type Config struct {
	// PositionFile keeps the read positions across restarts; empty: in
	// memory only (still used across reloads).
	PositionFile string
	// SyncInterval is how often the position file is written (default
	// 1s). A crash replays at most this much; a clean stop replays nothing.
	SyncInterval time.Duration
	// NoInotify makes every tailer poll (for file systems where inotify
	// misses changes, such as some network file systems).
	NoInotify bool

	// KDCProfile and Krb5Profile are kdc.conf and the krb5.conf read
	// after it (colon-separated lists, as the collectors' flags): a log
	// source with neither path nor journal follows their [logging].
	// Empty: the distribution's kdc.conf that exists, /etc/krb5.conf.
	KDCProfile, Krb5Profile string
	// HostJournal is the journal a daemon's syslog messages reach. Nil:
	// the system journal where systemd runs (/run/systemd/system), none
	// elsewhere; tests name a journal directory.
	HostJournal *config.JournalSource
	// OpenGrace is how long a source may stay unopened before the one
	// warning and krb5_kdc_log_source_missing (default a minute).
	OpenGrace time.Duration
}

// RegisterFlags adds the log collector's flags to app. The returned
// Config is filled in when the command line is parsed.
func RegisterFlags(app cli.FlagGroup) *Config {
	c := &Config{}
	app.Flag("kdclog.position-file",
		"File keeping the read position of every log in the config's logs: section, so a restart neither loses nor recounts lines; one exporter per file (it is locked). Empty: positions are not kept across restarts.").
		Default("").StringVar(&c.PositionFile)
	app.Flag("kdclog.position-sync-interval",
		"How often the position file is written; after a crash at most this much of the logs is counted again.").
		Default("1s").DurationVar(&c.SyncInterval)
	app.Flag("kdclog.no-inotify",
		"Poll the log files only (for file systems where inotify misses changes).").
		Default("false").BoolVar(&c.NoInotify)
	return c
}
