package config

import (
	"errors"
	"fmt"
	"sync"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/logging"
)

// Applier takes a new, valid configuration into use (probe loops, log
// tailers). An error is reported and counts the reload as failed.
type Applier func(*Config) error

// Reloader owns the current configuration. A reload that fails to load or
// validate keeps the old configuration in force and says so in a log line
// and in krb5_exporter_config_last_reload_successful. A module's bad key
// file does not fail a reload (LoadDeferringKeys): it fails that module's
// probes. The log line of a reload is rate-limited (a client posting
// /-/reload in a loop would write a line each), but a changed outcome is
// always logged.
type Reloader struct {
	path     string
	logger   log.Logger
	appliers []Applier

	mu     sync.Mutex // serialises reloads (SIGHUP and /-/reload may race)
	cur    *Config
	loaded bool             // a configuration was applied: a failure keeps it
	logged *logging.Changes // the outcome last logged, repeats through the limiter

	success   prometheus.Gauge
	timestamp prometheus.Gauge
}

// NewReloader registers the reload metrics on reg. An empty path means no
// configuration file: the empty configuration is in force. limit holds
// back repeats of a reload's log line.
func NewReloader(path string, logger log.Logger, limit *logging.Limiter, reg prometheus.Registerer) *Reloader {
	r := &Reloader{
		path:   path,
		logger: logger,
		cur:    &Config{},
		logged: logging.NewChanges(limit),
		success: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "krb5_exporter_config_last_reload_successful",
			Help: "Whether the last configuration reload attempt was successful.",
		}),
		timestamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "krb5_exporter_config_last_reload_success_timestamp_seconds",
			Help: "Timestamp of the last successful configuration reload.",
		}),
	}
	reg.MustRegister(r.success, r.timestamp)
	return r
}

// OnReload adds an applier; call before the first Reload.
func (r *Reloader) OnReload(a Applier) { r.appliers = append(r.appliers, a) }

// Current returns the configuration in force; it is never nil and must
// not be modified.
func (r *Reloader) Current() *Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Reload reads the file again and applies it. On error the previous
// configuration stays in force.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg := &Config{}
	if r.path != "" {
		var err error
		if cfg, err = LoadDeferringKeys(r.path); err != nil {
			r.success.Set(0)
			if !r.loaded {
				r.log(level.Error, "msg", "invalid configuration: not starting", "err", err)
				return &StartError{err}
			}
			r.log(level.Error, "msg", "configuration not reloaded, keeping the previous one", "err", err)
			return err
		}
	}
	var errs []error
	for _, apply := range r.appliers {
		if err := apply(cfg); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.success.Set(0)
		if !r.loaded {
			r.log(level.Error, "msg", "invalid configuration: not starting", "file", r.path, "err", err)
			return &StartError{err}
		}
		r.log(level.Error, "msg", "configuration applied with errors", "file", r.path, "err", err)
		r.cur = cfg
		return err
	}
	r.cur, r.loaded = cfg, true
	r.success.Set(1)
	r.timestamp.SetToCurrentTime()
	r.log(level.Info, "msg", "configuration loaded", "file", r.path, "modules", len(cfg.Modules), "probes", len(cfg.Probes), "logs", len(cfg.Logs))
	return nil
}

// StartError is the first load's failure: there is no previous
// configuration to keep, so the daemon must not start (its exit status
// tells systemd not to restart it: the file needs fixing first).
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// log writes a reload's line when its outcome (the line's values) differs
// from the last one logged, else at most once per the limiter's interval,
// with the count of identical ones held back.
func (r *Reloader) log(lvl func(log.Logger) log.Logger, kv ...any) {
	_, held, ok := r.logged.Note("configuration reload", fmt.Sprint(kv...))
	if !ok {
		return
	}
	lvl(r.logger).Log(append(kv, "earlier_not_logged", held)...)
}
