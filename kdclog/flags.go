package kdclog

import (
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
)

// Flags are the command-line settings of the log collector.
type Flags struct {
	PositionFile *string
	SyncInterval *time.Duration
	NoInotify    *bool
}

// FlagRegisterer is a *kingpin.Application or a *kingpin.CmdClause.
type FlagRegisterer interface {
	Flag(name, help string) *kingpin.FlagClause
}

// RegisterFlags adds the log collector's flags to app (or a command).
func RegisterFlags(app FlagRegisterer) *Flags {
	return &Flags{
		PositionFile: app.Flag("kdclog.position-file",
			"File keeping the read position of every log in the config's logs: section, so a restart neither loses nor recounts lines. Empty: positions are not kept across restarts.").
			Default("").String(),
		SyncInterval: app.Flag("kdclog.position-sync-interval",
			"How often the position file is written; after a crash at most this much of the logs is counted again.").
			Default("1s").Duration(),
		NoInotify: app.Flag("kdclog.no-inotify",
			"Poll the log files only (for file systems where inotify misses changes).").
			Default("false").Bool(),
	}
}

// NewManager builds a Manager from the flags.
func (f *Flags) NewManager(logger log.Logger, reg prometheus.Registerer) (*Manager, error) {
	return NewManagerWithOptions(logger, reg, *f.PositionFile, Options{SyncInterval: *f.SyncInterval, NoInotify: *f.NoInotify})
}
