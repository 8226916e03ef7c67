// Package logging builds the project's go-kit logger from the
// --log.level and --log.format flags, and bridges it to log/slog for
// libraries (exporter-toolkit) that take a *slog.Logger, so there is one
// logging setup and one stream: every line, ours or a library's, has the
// keys level, ts, caller and msg in that order (logfmt) and the same key
// names (json). What repeats is said once: Limiter holds back a repeated
// line per interval, Changes logs a state when it changes (the first
// failure, a changed one, the recovery).
package logging

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/krb5-exporter/krb5-exporter/internal/cli"
)

// Config holds the values of the logging flags.
type Config struct {
	Level  string
	Format string
}

// RegisterFlags registers --log.level and --log.format on app (no global state).
func RegisterFlags(app cli.FlagGroup) *Config {
	c := &Config{}
	app.Flag("log.level", "Only log messages with the given severity or above. One of: [debug, info, warn, error]").
		Default("info").EnumVar(&c.Level, "debug", "info", "warn", "error")
	app.Flag("log.format", "Output format of log messages. One of: [logfmt, json]").
		Default("logfmt").EnumVar(&c.Format, "logfmt", "json")
	return c
}

// New returns a go-kit logger writing to w with a timestamp and caller on
// every line, filtered by level, and a slog logger for libraries that
// take one, writing to the same filtered output with the same keys.
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
	sl := slog.New(&slogHandler{logger: l, min: slogLevel(c.Level)})
	return log.With(l, tsKey, log.DefaultTimestampUTC, callerKey, log.DefaultCaller), sl, nil
}

// The keys every line starts with, after level.Key().
const (
	tsKey     = "ts"
	callerKey = "caller"
	msgKey    = "msg"
)

// slogLevel is the least slog level --log.level lets through.
func slogLevel(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
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
