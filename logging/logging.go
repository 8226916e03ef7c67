// Package logging builds the project's go-kit logger from the
// --log.level and --log.format flags, and bridges it to log/slog for
// libraries (exporter-toolkit) that take a *slog.Logger, so there is one
// logging setup and one output format.
package logging

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/krb5-exporter/krb5-exporter/internal/cli"
	sloggokit "github.com/tjhop/slog-gokit"
)

// Config holds the values of the logging flags.
type Config struct {
	Level  string
	Format string
}

// AddFlags registers --log.level and --log.format on app (no global state).
func AddFlags(app cli.FlagGroup) *Config {
	c := &Config{}
	app.Flag("log.level", "Only log messages with the given severity or above. One of: [debug, info, warn, error]").
		Default("info").EnumVar(&c.Level, "debug", "info", "warn", "error")
	app.Flag("log.format", "Output format of log messages. One of: [logfmt, json]").
		Default("logfmt").EnumVar(&c.Format, "logfmt", "json")
	return c
}

// New returns a go-kit logger writing to w with a timestamp and caller on
// every line, filtered by level, and a slog logger for libraries that
// take one, writing to the same filtered output (slog adds its own time
// and source).
func New(c *Config, w io.Writer) (log.Logger, *slog.Logger, error) {
	var l log.Logger
	switch c.Format {
	case "", "logfmt":
		l = log.NewLogfmtLogger(log.NewSyncWriter(w))
	case "json":
		l = log.NewJSONLogger(log.NewSyncWriter(w))
	default:
		return nil, nil, fmt.Errorf("unknown log format %q", c.Format)
	}
	lvl, err := parseLevel(c.Level)
	if err != nil {
		return nil, nil, err
	}
	l = level.NewFilter(l, lvl)
	sl := slog.New(sloggokit.NewGoKitHandler(l, slog.LevelDebug))
	return log.With(l, "ts", log.DefaultTimestampUTC, "caller", log.DefaultCaller), sl, nil
}

func parseLevel(s string) (level.Option, error) {
	switch s {
	case "debug":
		return level.AllowDebug(), nil
	case "", "info":
		return level.AllowInfo(), nil
	case "warn":
		return level.AllowWarn(), nil
	case "error":
		return level.AllowError(), nil
	}
	return nil, fmt.Errorf("unknown log level %q", s)
}
