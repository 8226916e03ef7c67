package kdclog

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/tailer"
)

// Metric descriptors, built once. Names and meanings: docs/metrics.md,
// section "KDC log collector".
// The names of the series other packages read (top), declared once here.
const (
	MetricKadmindRequests     = "krb5_kadmind_requests_total"
	MetricKadmindAuthFailures = "krb5_kadmind_authentication_failures_total"
)

var (
	descRequests = prometheus.NewDesc("krb5_kdc_requests_total",
		"KDC requests by type (as, tgs) and status as logged (ISSUE is success), excluding probe principals.",
		[]string{"request", "status"}, nil)
	descProbe = prometheus.NewDesc("krb5_kdc_log_probe_requests_total",
		"KDC requests of the configured probe principals, by type and status; not in krb5_kdc_requests_total.",
		[]string{"request", "status"}, nil)
	descIssued = prometheus.NewDesc("krb5_kdc_issued_etypes_total",
		"Encryption types of issued tickets (ISSUE lines only), by request type, key (reply, ticket, session) and etype.",
		[]string{"request", "key", "etype"}, nil)
	descWeak = prometheus.NewDesc("krb5_kdc_weak_etype_requests_total",
		"Requests involving DES, 3DES or RC4: offered by the client (offered), offered only (only_weak), used in an issued ticket (issued).",
		[]string{"request", "kind"}, nil)
	descPreauth = prometheus.NewDesc("krb5_kdc_preauth_verify_failures_total",
		"KDC 'preauth (METHOD) verify failure' lines by method and reason.",
		[]string{"method", "reason"}, nil)
	descRecovered = prometheus.NewDesc("krb5_kdc_preauth_failures_recovered_total",
		"AS PREAUTH_FAILED lines followed by an ISSUE for the same client and address (a fallback to another preauth method, e.g. a SPAKE group mismatch, or a retyped password), by the method that failed.",
		[]string{"method"}, nil)
	descRetrans = prometheus.NewDesc("krb5_kdc_retransmits_total",
		"Repeated (retransmitted) requests the KDC answered from its lookaside cache (resent) or dropped while still processing the first (dropped).",
		[]string{"action"}, nil)
	descTooMany = prometheus.NewDesc("krb5_kdc_too_many_connections_total",
		"Times the KDC hit its TCP connection limit and closed the oldest connection.",
		nil, nil)
	descS4U = prometheus.NewDesc("krb5_kdc_s4u_requests_total",
		"TGS requests using S4U2Self (protocol_transition) or S4U2Proxy (constrained_delegation).",
		[]string{"kind"}, nil)
	descKDCLife = prometheus.NewDesc("krb5_kdc_lifecycle_events_total",
		"krb5kdc start, stop and worker process events seen in the log.",
		[]string{"event"}, nil)
	descKadmin = prometheus.NewDesc(MetricKadmindRequests,
		"kadmind operations by RPC name (kadm5_*, chpw, setpw) and result.",
		[]string{"operation", "result"}, nil)
	descKadmAuth = prometheus.NewDesc(MetricKadmindAuthFailures,
		"kadmind 'Authentication attempt failed' lines (GSS-API/RPC authentication of an admin client).",
		nil, nil)
	descKadmLife = prometheus.NewDesc("krb5_kadmind_lifecycle_events_total",
		"kadmind start and stop events seen in the log.",
		[]string{"event"}, nil)

	descLines = prometheus.NewDesc("krb5_kdc_log_lines_read_total",
		"Complete lines read from the log file.", []string{"path"}, nil)
	descParsed = prometheus.NewDesc("krb5_kdc_log_lines_parsed_total",
		"Lines understood (counted, or known to carry nothing to count).", []string{"path"}, nil)
	descUnparsed = prometheus.NewDesc("krb5_kdc_log_lines_unparsed_total",
		"Lines not understood, by reason.", []string{"path", "reason"}, nil)
	descBytes = prometheus.NewDesc("krb5_kdc_log_read_bytes_total",
		"Bytes read from the log file.", []string{"path"}, nil)
	descRotations = prometheus.NewDesc("krb5_kdc_log_rotations_total",
		"Rotations seen while running: the file renamed (rename) or deleted (delete) and replaced, or truncated in place (truncate).",
		[]string{"path", "kind"}, nil)
	descCopies = prometheus.NewDesc("krb5_kdc_log_truncation_copies_read_total",
		"Truncations (copytruncate) whose copy was found and read on from the last position, so no line was lost.",
		[]string{"path"}, nil)
	descMismatch = prometheus.NewDesc("krb5_kdc_log_position_mismatches_total",
		"Saved positions that did not match the file at start: rotated_recovered (old file found and read on), rotated_lost, truncated, rewritten.",
		[]string{"path", "reason"}, nil)
	descDiscovered = prometheus.NewDesc("krb5_kdc_log_files_discovered_total",
		"Rotated files found that had never been open (created and rotated away between two reads, or while the exporter was stopped), read from their start.",
		[]string{"path"}, nil)
	descUnread = prometheus.NewDesc("krb5_kdc_log_files_unread_total",
		"Files whose end had to be read but that were gone: lines written to them after the last read may be uncounted (each case is logged).",
		[]string{"path"}, nil)
	descReadErrors = prometheus.NewDesc("krb5_kdc_log_read_errors_total",
		"Errors opening, checking or reading the log file (other than its absence), or journalctl's output (it is then started again).", []string{"path"}, nil)
	descBehind = prometheus.NewDesc("krb5_kdc_log_bytes_behind",
		"Bytes written to the log (and to rotated files still read) but not yet read, at the last check.",
		[]string{"path"}, nil)
	descOpen = prometheus.NewDesc("krb5_kdc_log_file_open",
		"1 when the configured path names a file being followed, 0 while it does not exist.", []string{"path"}, nil)
	descMissing = prometheus.NewDesc("krb5_kdc_log_source_missing",
		"1 when a configured log source has not been open (a file) or followed (a journalctl running) for a minute, or, with an empty path, when kdc.conf names nothing the exporter can read for that type; a warning with the fix is logged.",
		[]string{"path", "type"}, nil)
	descInotify = prometheus.NewDesc("krb5_kdc_log_inotify",
		"1 when change notification works for the log's directory, 0 when the file is only polled.", []string{"path"}, nil)
	descJCursorLost = prometheus.NewDesc("krb5_kdc_log_journal_cursor_lost_total",
		"Starts at which the journal no longer held the last entry counted (rotated or vacuumed while the exporter was stopped); each is logged.",
		[]string{"path"}, nil)
	descJEntriesLost = prometheus.NewDesc("krb5_kdc_log_journal_entries_lost_total",
		"Journal entries (of every program: an upper bound for the KDC's) between a lost cursor and the oldest entry left, where the journal's sequence numbers tell.",
		[]string{"path"}, nil)
	descJExits = prometheus.NewDesc("krb5_kdc_log_journalctl_exits_total",
		"Times the journalctl that follows the journal exited and was started again (with back-off); its error output is logged.",
		[]string{"path"}, nil)
	descJMalformed = prometheus.NewDesc("krb5_kdc_log_journal_malformed_total",
		"Output lines of journalctl that were not a journal entry.", []string{"path"}, nil)
	descJSuppressed = prometheus.NewDesc("krb5_kdc_log_journal_lines_suppressed_total",
		"Lines of the source's services that journald dropped under its rate limit before anyone read them, from its own 'Suppressed N messages' entries.",
		[]string{"path"}, nil)
	descJOversized = prometheus.NewDesc("krb5_kdc_log_journal_entries_oversized_total",
		"Journal entries skipped because journalctl wrote them longer than 1 MiB; each is logged.",
		[]string{"path"}, nil)
	descJRunning = prometheus.NewDesc("krb5_kdc_log_journalctl_running",
		"1 while a journalctl follows the journal source, 0 while it is being started again.", []string{"path"}, nil)
	descPosWrites = prometheus.NewDesc("krb5_kdc_log_position_file_writes_total",
		"Successful writes of the position file.", nil, nil)
	descPosErrors = prometheus.NewDesc("krb5_kdc_log_position_file_write_errors_total",
		"Failed writes of the position file (restarts may then read lines again or skip them).", nil, nil)
)

// collector exports the counts and every source's self metrics.
type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descRequests, descProbe, descIssued, descWeak, descPreauth, descRecovered, descRetrans,
		descTooMany, descS4U, descEtypeRefused, descKDCLife, descKadmin, descKadmAuth, descKadmLife, descWorkerRequests,
		descLines, descParsed, descUnparsed, descBytes, descRotations, descCopies, descMismatch,
		descDiscovered, descUnread, descReadErrors, descBehind, descOpen, descMissing, descInotify, descPosWrites, descPosErrors,
		descJCursorLost, descJEntriesLost, descJExits, descJMalformed, descJRunning, descJSuppressed, descJOversized,
	} {
		ch <- d
	}
	describeKpropd(ch)
	describeAttack(ch)
	describeTalkers(ch)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	srcs, kdc, kadmind := c.m.snapshot()
	k := c.m.counts
	if k.kpropd.configured.Load() {
		k.kpropd.collect(ch)
	}
	core := map[[2]int]bool{}
	if kdc {
		for _, cs := range coreStatuses {
			core[[2]int{int(cs.req), k.statuses.known[cs.status]}] = true
		}
	}
	for r := range numRequests {
		req := requestNames[r]
		for i := range k.requests[r] {
			if v := k.requests[r][i].Load(); v > 0 || core[[2]int{int(r), i}] {
				counter(ch, descRequests, v, req, k.statuses.name(i))
			}
			if v := k.probe[r][i].Load(); v > 0 {
				counter(ch, descProbe, v, req, k.statuses.name(i))
			}
		}
		for p := range numParts {
			for e := range numEtypeLabels {
				if v := k.issued[r][p][e].Load(); v > 0 {
					counter(ch, descIssued, v, req, partNames[p], etypeName(e))
				}
			}
		}
		if kdc {
			for w := range numWeakKinds {
				counter(ch, descWeak, k.weak[r][w].Load(), req, weakKindNames[w])
			}
		}
	}
	k.workers.collect(ch, k.statuses)
	if kdc {
		k.attack.collect(ch)
		k.talkers.collect(ch)
	}
	for m := range k.preauth {
		for r := range numPreauthReasons {
			if v := k.preauth[m][r].Load(); v > 0 {
				counter(ch, descPreauth, v, k.methods.name(m), preauthReasonNames[r])
			}
		}
		if v := k.recovered[m].Load(); v > 0 {
			counter(ch, descRecovered, v, k.methods.name(m))
		}
	}
	if kdc {
		for a := range numRetransmits {
			counter(ch, descRetrans, k.retrans[a].Load(), retransmitNames[a])
		}
		counter(ch, descTooMany, k.tooMany[0].Load())
		gauge(ch, descEtypeRefused, float64(k.refused.count(time.Now())))
		for l := range numLifecycle {
			counter(ch, descKDCLife, k.kdcLife[l].Load(), lifecycleNames[l])
		}
	}
	for s := range numS4U {
		if v := k.s4u[s].Load(); v > 0 {
			counter(ch, descS4U, v, s4uNames[s])
		}
	}
	for o := range k.kadmin {
		for r := range numKadminResults {
			if v := k.kadmin[o][r].Load(); v > 0 {
				counter(ch, descKadmin, v, k.ops.name(o), kadminResultNames[r])
			}
		}
	}
	if kadmind {
		counter(ch, descKadmAuth, k.kadmAuth[0].Load())
		for _, l := range []Lifecycle{LifecycleStarted, LifecycleStopping} {
			counter(ch, descKadmLife, k.kadmLife[l].Load(), lifecycleNames[l])
		}
	}

	for _, s := range srcs {
		p, t, ps := s.path, &s.tail, &s.parse
		lines := t.Lines.Load()
		if s.isJournal {
			lines = s.jour.Entries.Load()
		}
		counter(ch, descLines, lines, p)
		gauge(ch, descMissing, b2f(s.missing.Load()), p, *s.typ.Load())
		counter(ch, descParsed, ps.parsed.Load(), p)
		for r := ReasonNoHeader; r < numReasons; r++ {
			counter(ch, descUnparsed, ps.unparsed[r].Load(), p, reasonNames[r])
		}
		if j := &s.jour; s.isJournal {
			counter(ch, descJCursorLost, j.CursorLost.Load(), p)
			counter(ch, descJEntriesLost, j.LostEntries.Load(), p)
			counter(ch, descJExits, j.Exits.Load(), p)
			counter(ch, descJMalformed, j.Malformed.Load(), p)
			counter(ch, descJSuppressed, j.Suppressed.Load(), p)
			counter(ch, descJOversized, j.Oversized.Load(), p)
			counter(ch, descReadErrors, j.ReadErrors.Load(), p)
			gauge(ch, descJRunning, b2f(j.Running.Load()), p)
			continue // the rest describes files
		}
		counter(ch, descBytes, t.Bytes.Load(), p)
		for r := range tailer.NumRotationKinds {
			counter(ch, descRotations, t.Rotations[r].Load(), p, tailer.RotationNames[r])
		}
		counter(ch, descCopies, t.CopyFound.Load(), p)
		for r := range tailer.NumMismatchKinds {
			counter(ch, descMismatch, t.Mismatches[r].Load(), p, tailer.MismatchNames[r])
		}
		counter(ch, descDiscovered, t.Discovered.Load(), p)
		counter(ch, descUnread, t.Unread.Load(), p)
		counter(ch, descReadErrors, t.ReadErrors.Load(), p)
		gauge(ch, descBehind, float64(t.BytesBehind.Load()), p)
		gauge(ch, descOpen, b2f(t.Open.Load()), p)
		gauge(ch, descInotify, b2f(t.Inotify.Load()), p)
	}
	for _, typ := range c.m.unresolvedTypes() {
		gauge(ch, descMissing, 1, "", typ)
	}
	counter(ch, descPosWrites, c.m.store.Writes.Load())
	counter(ch, descPosErrors, c.m.store.WriteErrors.Load())
}
