package prober

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/logging"
)

// Manager runs the continuous probes of the configuration: one goroutine per
// target probing AS (and TGS) every interval, independent of scrapes.
type Manager struct {
	logger  log.Logger
	metrics *probeMetrics
	creds   *credCache // for /probe

	mu      sync.Mutex
	loops   map[string]*loop
	stopped bool
}

// NewManager registers the probe metrics on reg. Nothing runs until
// ApplyConfig.
func NewManager(logger log.Logger, reg prometheus.Registerer) *Manager {
	return &Manager{
		logger:  logger,
		metrics: newProbeMetrics(reg),
		creds:   newCredCache(),
		loops:   map[string]*loop{},
	}
}

// loop is the goroutine probing one target.
type loop struct {
	cfg    config.ProbeTarget
	module config.ProbeModule
	creds  *krb5.Credentials
	target *Target
	cancel context.CancelFunc
	done   chan struct{}

	// The probe's debug log (written by the run goroutine only) and the
	// last probes, for Status.
	dlog    *probeLog
	dlogger log.Logger
	history history
}

// ApplyConfig starts, restarts and stops probe loops to match cfg. Targets
// whose settings did not change keep running undisturbed (schedule, TGT,
// counters). A target whose keytab or password file does not load runs
// anyway, failing with result="keytab" until the file loads. A target that
// cannot be set up otherwise is an error; if it was running before, its
// previous version keeps probing. The other targets are applied regardless.
func (m *Manager) ApplyConfig(cfg *config.Config) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return errors.New("probe manager stopped")
	}
	var errs []error
	next := make(map[string]*loop, len(cfg.Probes))
	for _, t := range cfg.Probes {
		mod, ok := cfg.Modules[t.Module]
		if !ok {
			errs = append(errs, fmt.Errorf("probe %q: unknown module %q", t.Name, t.Module))
			continue
		}
		old := m.loops[t.Name]
		if old != nil && reflect.DeepEqual(old.cfg, t) && reflect.DeepEqual(old.module, mod) {
			next[t.Name] = old
			continue
		}
		l, err := m.newLoop(t, mod, cfg.KeyFileError(t.Module))
		if err != nil {
			errs = append(errs, fmt.Errorf("probe %q: %w", t.Name, err))
			if old != nil {
				next[t.Name] = old
			}
			continue
		}
		next[t.Name] = l
	}
	for name, old := range m.loops {
		if next[name] != old {
			old.stop()
			m.metrics.deleteTarget(name)
		}
	}
	for name, l := range next {
		if m.loops[name] != l {
			m.start(l)
		}
	}
	m.loops = next
	return errors.Join(errs...)
}

// newLoop sets up a target; keyErr is the configuration's finding on the
// module's key file (config.KeyFileError), which names the configuration
// file and line where the key file's path must not be logged.
func (m *Manager) newLoop(t config.ProbeTarget, mod config.ProbeModule, keyErr error) (*loop, error) {
	if mod.EffectiveProber() == config.ProberKadmin {
		// No keys: the RPC call is unauthenticated.
		dlog := &probeLog{}
		dlogger := newProbeLogger(dlog)
		target, err := NewTarget(t.Address, &mod, nil, dlogger)
		if err != nil {
			return nil, err
		}
		return &loop{cfg: t, module: mod, target: target, dlog: dlog, dlogger: dlogger}, nil
	}
	creds, err := ModuleCredentials(&mod)
	if err != nil {
		if keyErr != nil {
			err = keyErr
		}
		p, perr := krb5.ParsePrincipal(mod.Client, mod.Realm)
		if perr != nil {
			return nil, perr
		}
		// The target still runs: each probe tries the file again and is
		// recorded as result="keytab" until it loads, rather than the
		// target vanishing from the metrics.
		level.Warn(m.logger).Log("msg", "probe keys not loaded; the probe fails with result=keytab and retries the file on every probe", "probe", t.Name, "module", t.Module, "err", err)
		creds = PendingModuleCredentials(&mod, p)
	}
	dlog := &probeLog{}
	dlogger := newProbeLogger(dlog)
	target, err := NewTarget(t.Address, &mod, creds, dlogger)
	if err != nil {
		return nil, err
	}
	return &loop{cfg: t, module: mod, creds: creds, target: target, dlog: dlog, dlogger: dlogger}, nil
}

func (m *Manager) start(l *loop) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	m.metrics.initTarget(l.cfg.Name, l.target.Exchanges(), l.module.Realm, l.module.ServiceRealm(), l.target.Transport())
	if worldReadable(l.creds) {
		level.Warn(m.logger).Log("msg", "keytab or password file is readable by every local user", "probe", l.cfg.Name)
	}
	go m.run(ctx, l)
}

func (l *loop) stop() {
	l.cancel()
	<-l.done
}

// Run returns when ctx ends, after stopping every probe loop: the life
// cycle kdclog.Manager has too (NewManager, ApplyConfig, Run). Probes
// start on ApplyConfig, also before Run.
func (m *Manager) Run(ctx context.Context) error {
	<-ctx.Done()
	m.Stop()
	return nil
}

// Stop ends every probe loop and waits for them. ApplyConfig fails after.
func (m *Manager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.loops {
		l.stop()
	}
	m.loops = map[string]*loop{}
	m.stopped = true
}

func (m *Manager) run(ctx context.Context, l *loop) {
	defer close(l.done)
	defer l.target.Close()
	name := l.cfg.Name
	logger := log.With(m.logger, "probe", name, "kdc", l.cfg.Address)
	tick := time.NewTicker(l.cfg.EffectiveInterval())
	defer tick.Stop()
	failures := logging.NewChanges(nil) // per exchange: the class logged last
	readable := logging.NewChanges(nil) // whether the key file is world-readable
	if worldReadable(l.creds) {
		readable.Note("", "world-readable") // start has said so
	}
	for {
		if l.creds != nil {
			level.Debug(l.dlogger).Log("msg", "probing", "kdc", l.cfg.Address, "transport", l.target.Transport(), "client", l.creds.Principal())
		} else {
			level.Debug(l.dlogger).Log("msg", "probing", "kadmind", l.cfg.Address, "prober", l.target.Prober())
		}
		o := l.target.Run(ctx)
		if o.Canceled {
			return
		}
		// The gauge first: whoever sees this probe's result sees the state
		// of the file it used.
		v, state := 0.0, ""
		if worldReadable(l.creds) {
			v, state = 1, "world-readable"
		}
		if _, _, changed := readable.Note("", state); changed && v == 1 {
			level.Warn(logger).Log("msg", "keytab or password file became readable by every local user")
		} else if changed {
			level.Info(logger).Log("msg", "keytab or password file is no longer readable by every local user")
		}
		if l.creds != nil {
			m.metrics.worldReadable.WithLabelValues(name).Set(v)
		}
		m.metrics.record(name, l.target.Transport(), &o)
		l.history.add(recordOf(&o, l.dlogger, l.dlog))
		for _, ex := range o.Exchanges(l.target.Transport()) {
			logChange(logger, failures, ex.Name, ex.Err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// worldReadable reports whether the key file of creds (nil: a module
// without keys) is readable by every local user.
func worldReadable(creds *krb5.Credentials) bool { return creds != nil && creds.WorldReadable() }

// logChange logs a failure when an exchange starts failing or fails
// differently, and its recovery: a dead KDC says so once, not every interval.
func logChange(logger log.Logger, failures *logging.Changes, ex string, err error) {
	var class string // "" for a success, as Changes takes it
	if err != nil {
		class = krb5.Classify(err)
	}
	prev, _, changed := failures.Note(ex, class)
	switch {
	case !changed:
	case err != nil:
		level.Warn(logger).Log("msg", "probe failed", "exchange", ex, "result", class, "err", err)
	default:
		level.Info(logger).Log("msg", "probe recovered", "exchange", ex, "after", prev)
	}
}
