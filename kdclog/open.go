package kdclog

import (
	"strings"
	"time"

	"github.com/go-kit/log/level"
)

// defaultOpenGrace is how long a source may stay unopened (a file that
// does not exist or cannot be read, a journalctl that does not run)
// before the one warning: a KDC creates its file at start, journalctl
// runs within a second.
const defaultOpenGrace = time.Minute

// logChoices says, one line each, which log each source that follows
// kdc.conf follows and why, or why it has none and what fixes it; it
// returns the reasons by source key and records the unresolved (mu held).
func (m *Manager) logChoices(chosen, unresolved []resolved) map[string]string {
	whys := map[string]string{}
	for _, r := range chosen {
		whys[r.src.Key()] = r.why
		level.Info(m.logger).Log("msg", "log source chosen from kdc.conf", "type", r.src.Type, "source", r.src.Key(), "why", r.why)
	}
	m.unresolved = m.unresolved[:0]
	for _, r := range unresolved {
		m.unresolved = append(m.unresolved, r.src.Type)
		level.Warn(m.logger).Log("msg", "no log source for this type: its requests are not counted", "type", r.src.Type, "why", r.why)
	}
	for _, r := range append(chosen, unresolved...) {
		if len(r.bad) > 0 {
			level.Warn(m.logger).Log("msg", "kdc.conf [logging] specs the daemon cannot use either, skipped", "type", r.src.Type, "specs", strings.Join(r.bad, "; "))
		}
	}
	return whys
}

// checkOpen marks the sources that have not been open for the grace
// period, and warns once per such episode with the fix.
func (m *Manager) checkOpen(now time.Time) {
	grace := m.opts.OpenGrace
	if grace <= 0 {
		grace = defaultOpenGrace
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range m.paths {
		open := ps.tail.Open.Load()
		if ps.isJournal {
			open = ps.jour.Running.Load()
		}
		if open {
			ps.since, ps.warned = now, false
			ps.missing.Store(false)
			continue
		}
		if now.Sub(ps.since) < grace {
			continue
		}
		ps.missing.Store(true)
		if ps.warned {
			continue
		}
		ps.warned = true
		kv := []any{"msg", "log source not open: its requests are not counted", "path", ps.path, "type", ps.cfg.Type, "for", now.Sub(ps.since).Round(time.Second)}
		if ps.why != "" {
			kv = append(kv, "chosen_because", ps.why)
		}
		level.Warn(m.logger).Log(append(kv, "fix", openFix(ps))...)
	}
}

// openFix names what makes a source open.
func openFix(ps *pathState) string {
	switch {
	case ps.isJournal:
		return "journalctl does not run (its errors are logged): the service user needs the systemd-journal group, and journalctl must be installed"
	case ps.why != "":
		return "the file kdc.conf names does not exist or cannot be read (an error is logged then): start the KDC, which creates it, and if kdc.conf changed since, restart the KDC and reload krb5-exporter; read access: /usr/libexec/krb5-exporter/grant-access"
	}
	return "the file does not exist or cannot be read (an error is logged then): leave path: out to follow what kdc.conf's [logging] says, or name the file it writes; read access: /usr/libexec/krb5-exporter/grant-access"
}

// unresolvedTypes are the types of the sources kdc.conf gave nothing to
// follow.
func (m *Manager) unresolvedTypes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.unresolved...)
}
