package config

import (
	"errors"
	"sync"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
)

// Applier takes a new, valid configuration into use (probe loops, log
// tailers). An error is reported and counts the reload as failed.
type Applier func(*Config) error

// Reloader owns the current configuration. A reload that fails to load or
// validate keeps the old configuration in force and says so in a log line
// and in krb5_exporter_config_last_reload_successful. A module's bad key
// file does not fail a reload (LoadDeferringKeys): it fails that module's
// probes.
type Reloader struct {
	path     string
	logger   log.Logger
	appliers []Applier

	mu  sync.Mutex // serialises reloads (SIGHUP and /-/reload may race)
	cur *Config

	success   prometheus.Gauge
	timestamp prometheus.Gauge
}

// NewReloader registers the reload metrics on reg. An empty path means no
// configuration file: the empty configuration is in force.
func NewReloader(path string, logger log.Logger, reg prometheus.Registerer) *Reloader {
	r := &Reloader{
		path:   path,
		logger: logger,
		cur:    &Config{},
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
			level.Error(r.logger).Log("msg", "configuration not reloaded, keeping the previous one", "err", err)
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
		level.Error(r.logger).Log("msg", "configuration applied with errors", "file", r.path, "err", err)
		r.cur = cfg
		return err
	}
	r.cur = cfg
	r.success.Set(1)
	r.timestamp.SetToCurrentTime()
	level.Info(r.logger).Log("msg", "configuration loaded", "file", r.path, "modules", len(cfg.Modules), "probes", len(cfg.Probes), "logs", len(cfg.Logs))
	return nil
}
