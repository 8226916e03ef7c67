package kdclog

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/journal"
	"github.com/krb5-exporter/krb5-exporter/logging"
	"github.com/krb5-exporter/krb5-exporter/tailer"
)

// pathState is everything kept per configured path while it stays
// configured: counters survive reloads that change the source's settings.
type pathState struct {
	path      string
	tail      tailer.Stats
	jour      journal.Stats // a journal source's, instead of tail
	isJournal bool          // fixed for a key: the key of a journal source says so
	parse     sourceStats
	src       atomic.Pointer[source] // swapped on reload; read per line

	cfg    config.LogSource
	tailer *tailer.Tailer // while it runs

	// Whether the source opens (open.go): since is when it was last open
	// (or configured), missing says it has not been for OpenGrace.
	since   time.Time
	warned  bool
	missing atomic.Bool
	why     string                 // kdc.conf's line that named it; "" if the configuration did
	typ     atomic.Pointer[string] // cfg.Type, for the collector (cfg changes under mu)
	cancel  context.CancelFunc
	done    chan struct{}
}

// Manager runs one tailer per configured log file, counts their lines and
// exports the counts. Reloads (ApplyConfig) keep unchanged files running
// and hand a restarted tailer the exact position its predecessor stopped
// at, so no line is lost or counted twice.
type Manager struct {
	logger log.Logger
	store  *tailer.Positions
	counts *counts
	opts   Config

	mu      sync.Mutex
	paths   map[string]*pathState
	ctx     context.Context // set while Run runs
	cancel  context.CancelFunc
	runDone chan struct{}
	ready   chan struct{} // closed once Run's tailers hold their files

	flushes *logging.Changes // whether the position file is failing

	// unresolved are the types of the sources that follow kdc.conf and
	// found nothing to follow (under mu).
	unresolved []string
}

// NewManager locks and loads the position file (none: positions are kept
// in memory only) and registers the collector with reg. Nothing is read
// before Run; Close releases the position file.
func NewManager(logger log.Logger, reg prometheus.Registerer, opts Config) (*Manager, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = time.Second
	}
	store, err := tailer.OpenPositions(opts.PositionFile, logger)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		logger:  logger,
		store:   store,
		counts:  newCounts(),
		opts:    opts,
		paths:   map[string]*pathState{},
		ready:   make(chan struct{}),
		flushes: logging.NewChanges(nil),
	}
	if reg != nil {
		if err := reg.Register(collector{m}); err != nil {
			store.Close()
			return nil, fmt.Errorf("kdclog: registering metrics: %w", err)
		}
	}
	return m, nil
}

// ApplyConfig makes the running set of log files match cfg.Logs. Invalid
// input changes nothing. Before Run it only records them. A log without
// probe_principals treats the modules' clients as probes; a log with a
// list that leaves one out is warned about (its logins count as users').
func (m *Manager) ApplyConfig(cfg *config.Config) error {
	for i := range cfg.Logs {
		if err := cfg.Logs[i].Validate(); err != nil {
			return fmt.Errorf("logs[%d]: %w", i, err)
		}
	}
	logs, chosen, unresolved := m.opts.resolveKDCConf(cfg.Logs)
	seen := map[string]bool{}
	srcs := make([]config.LogSource, len(logs))
	for i := range logs {
		// A source kdc.conf named is checked as one written out would be.
		if err := logs[i].Validate(); err != nil {
			return fmt.Errorf("logs (%s, from kdc.conf): %w", logs[i].Key(), err)
		}
		if seen[logs[i].Key()] {
			return fmt.Errorf("log %q listed twice (or named by kdc.conf for an entry without path or journal): its lines would be counted twice", logs[i].Key())
		}
		seen[logs[i].Key()] = true
		srcs[i] = logs[i]
		var missing []string
		srcs[i].ProbePrincipals, missing = cfg.ProbePrincipalsOf(&logs[i])
		if len(missing) > 0 {
			level.Warn(m.logger).Log("msg", "probe_principals of a log leaves out the client of a probe module: its logins count as user traffic", "path", srcs[i].Key(), "missing", strings.Join(missing, ","))
		}
	}
	if err := cfg.AttackSignals.Validate(); err != nil {
		return fmt.Errorf("attack_signals: %w", err)
	}
	m.counts.attack.apply(cfg.AttackSignals)
	if err := cfg.TopTalkers.Validate(); err != nil {
		return fmt.Errorf("top_talkers: %w", err)
	}
	m.counts.talkers.apply(cfg.TopTalkers)
	m.mu.Lock()
	defer m.mu.Unlock()
	whys := m.logChoices(chosen, unresolved)
	want := map[string]config.LogSource{}
	for _, s := range srcs {
		want[s.Key()] = s
	}
	for path, ps := range m.paths {
		cfg, ok := want[path]
		ps.why = whys[path]
		switch {
		case !ok:
			m.stopLocked(ps)
			delete(m.paths, path)
			m.store.Delete(path)
			level.Info(m.logger).Log("msg", "stopped following log", "path", path)
		default:
			// Never restart a tailer: it would close a renamed or deleted
			// log the KDC still writes to, and that file cannot be opened
			// again. New timings are set in place.
			if ps.tailer != nil {
				ps.tailer.SetTimings(cfg.Poll(), cfg.RotationWait())
			}
			if reflect.DeepEqual(ps.cfg, cfg) {
				// Keep the source: a new one would forget the preauth
				// failures awaiting recovery and the parser's caches.
				continue
			}
			// Swap what is counted under the running tailer.
			ps.cfg = cfg
			ps.typ.Store(&cfg.Type)
			ps.src.Store(newSource(cfg, m.counts, &ps.parse))
		}
	}
	for _, s := range srcs {
		if _, ok := m.paths[s.Key()]; ok {
			continue
		}
		ps := &pathState{path: s.Key(), cfg: s, isJournal: s.Journal != nil, since: time.Now(), why: whys[s.Key()]}
		ps.typ.Store(&ps.cfg.Type)
		ps.src.Store(newSource(s, m.counts, &ps.parse))
		m.paths[s.Key()] = ps
		m.startLocked(ps)
	}
	return nil
}

// startLocked starts ps's tailer if the manager runs.
func (m *Manager) startLocked(ps *pathState) {
	if m.ctx == nil || ps.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	ps.cancel, ps.done = cancel, make(chan struct{})
	// The handler counts with the source current at each line; a source
	// swapped out by a reload is flushed when the next line arrives, and
	// the current one after every batch.
	var last *source
	current := func() *source {
		s := ps.src.Load()
		if s != last {
			if last != nil {
				last.flush()
			}
			last = s
		}
		return s
	}
	handle := func(line []byte, truncated bool) {
		current().handle(line, truncated)
	}
	// A read's whole lines at once: one call and one look at the
	// current source a read, not a line.
	lines := func(buf []byte) uint64 {
		return current().handleLines(buf)
	}
	flushLast := func() {
		if last != nil {
			last.flush()
		}
	}
	if ps.isJournal {
		m.startJournalLocked(ctx, ps)
		return
	}
	t := tailer.New(tailer.Options{
		Path:          ps.cfg.Path,
		FromBeginning: ps.cfg.FromBeginning(),
		PollInterval:  ps.cfg.Poll(),
		RotateWait:    ps.cfg.RotationWait(),
		NoInotify:     m.opts.NoInotify,
		Flush:         flushLast,
		Lines:         lines,
	}, m.logger, m.store, &ps.tail, handle)
	ps.tailer = t
	level.Info(m.logger).Log("msg", "following log", "path", ps.cfg.Path, "type", ps.cfg.Type)
	go func(done chan struct{}) {
		defer close(done)
		t.Run(ctx)
	}(ps.done)
}

// startJournalLocked follows a journal source: its entries go through the
// same source (parser, counters) as a file's lines.
func (m *Manager) startJournalLocked(ctx context.Context, ps *pathState) {
	j := ps.cfg.Journal
	var last *source
	handle := func(e *journal.Entry) {
		s := ps.src.Load()
		if s != last {
			if last != nil {
				last.flush()
			}
			last = s
		}
		s.handleEntry(e.Identifier, e.PID, e.Message)
	}
	uids, uerr := ps.cfg.JournalUIDs() // the user may have gone since Validate
	f, err := journal.New(journal.Options{
		Programs:      ps.cfg.JournalPrograms(),
		UIDs:          uids,
		Units:         j.Units,
		Directory:     j.Directory,
		Files:         j.Files,
		FromBeginning: ps.cfg.FromBeginning(),
		Flush: func() {
			if last != nil {
				last.flush()
			}
		},
	}, ps.path, m.logger, m.store, &ps.jour, handle)
	if err == nil {
		err = uerr
	}
	if err != nil { // Validate accepted it: a bug or a user gone, said once
		level.Error(m.logger).Log("msg", "cannot follow the journal", "path", ps.path, "err", err)
		ps.cancel()
		close(ps.done)
		return
	}
	level.Info(m.logger).Log("msg", "following the journal", "path", ps.path, "type", ps.cfg.Type)
	go func(done chan struct{}) {
		defer close(done)
		f.Run(ctx)
	}(ps.done)
}

// stopLocked stops ps's tailer and waits until it saved its position.
func (m *Manager) stopLocked(ps *pathState) {
	if ps.cancel == nil {
		return
	}
	ps.cancel()
	<-ps.done
	ps.cancel, ps.done, ps.tailer = nil, nil, nil
}

// Run follows the configured files until ctx ends or Stop is called, then
// stops every tailer and writes the final positions.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.ctx != nil {
		m.mu.Unlock()
		return fmt.Errorf("kdclog: manager already running")
	}
	ctx, cancel := context.WithCancel(ctx)
	m.ctx, m.cancel, m.runDone = ctx, cancel, make(chan struct{})
	if m.store.Path() == "" && len(m.paths) > 0 {
		level.Warn(m.logger).Log("msg", "no position file: after a restart each log starts again at its start_at, so lines may be lost or counted twice")
	}
	var started []<-chan struct{}
	for _, ps := range m.paths {
		m.startLocked(ps)
		if ps.tailer != nil {
			started = append(started, ps.tailer.Ready())
		}
	}
	done := m.runDone
	m.mu.Unlock()
	go func() {
		for _, r := range started {
			select {
			case <-r:
			case <-ctx.Done():
			}
		}
		close(m.ready)
	}()
	defer close(done)

	tick := time.NewTicker(m.opts.SyncInterval)
	defer tick.Stop()
	for {
		select {
		case now := <-tick.C:
			m.flush()
			m.checkOpen(now)
		case <-ctx.Done():
			m.mu.Lock()
			for _, ps := range m.paths {
				m.stopLocked(ps)
			}
			m.ctx, m.cancel = nil, nil
			m.mu.Unlock()
			m.flush()
			return nil
		}
	}
}

// Ready is closed once Run has started following the logs configured
// when it began: each file open at its saved position and watched. Serve
// metrics only then: a client that takes an answer for "the exporter is
// up" may rotate the log next, and a file deleted before it was opened
// again after a restart is lost.
func (m *Manager) Ready() <-chan struct{} { return m.ready }

// Stop ends Run (if it runs) and waits until positions are written.
func (m *Manager) Stop() {
	m.mu.Lock()
	cancel, done := m.cancel, m.runDone
	m.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Close releases the position file's lock; call it after Run returned.
func (m *Manager) Close() error { return m.store.Close() }

// flush writes the position file; a lasting failure is logged once (and
// its recovery), every failure is counted. The outcome is "failing", not
// the error, whose text names a temporary file new at every try.
func (m *Manager) flush() {
	err := m.store.Flush()
	outcome := ""
	if err != nil {
		outcome = "failing"
	}
	if _, _, changed := m.flushes.Note("position file", outcome); !changed {
		return
	}
	if err != nil {
		level.Error(m.logger).Log("msg", "cannot write the position file; a restart would count lines again or skip them", "err", err)
	} else {
		level.Info(m.logger).Log("msg", "position file written again")
	}
}

// snapshot returns the configured paths (sorted, for stable output) and
// whether any source counts krb5kdc or kadmind lines.
func (m *Manager) snapshot() (srcs []*pathState, kdc, kadmind bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range m.paths {
		srcs = append(srcs, ps)
		kdc = kdc || ps.cfg.Type == "kdc" || ps.cfg.Type == "any"
		kadmind = kadmind || ps.cfg.Type == "kadmind" || ps.cfg.Type == "any"
	}
	sort.Slice(srcs, func(i, j int) bool { return srcs[i].path < srcs[j].path })
	return srcs, kdc, kadmind
}
