package kdclog

import (
	"bytes"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// kpropd, MIT's replica-side propagation daemon, logs to syslog (ident
// "kpropd", with its pid) and, run with -d, writes the same events and
// more to stderr, bare. ParseKpropd reads either form: a line of a syslog
// file or of `journalctl -o short` ("Dec  1 02:41:27 kdc2 kpropd[812]:
// msg", or with an RFC 3339 time stamp), or a line of kpropd -d output.
// The messages are those of MIT krb5 1.20's src/kprop/kpropd.c; com_err
// lines ("kpropd: ...", or argv[0] as prefix) appear in both forms.

// KpropdEvent is what a kpropd line reports.
type KpropdEvent uint8

// kpropd events; label values in kpropdEventNames. Those marked (-d) are
// written only by kpropd -d.
const (
	KpropdNone               KpropdEvent = iota // nothing to count (a known line)
	KpropdStart                                 // iprop started (-d)
	KpropdPoll                                  // asked the primary for updates (-d)
	KpropdInSync                                // the primary had nothing new (-d)
	KpropdUpdates                               // incremental updates applied
	KpropdFullResyncNeeded                      // the replica asked for a full resync
	KpropdFullResyncGranted                     // the primary accepted to send one
	KpropdFullResyncWaiting                     // still waiting for it (-d)
	KpropdFullPropConnection                    // kprop connected to deliver a full dump
	KpropdFullPropReceived                      // the dump arrived (-d)
	KpropdFullPropLoaded                        // kdb5_util loaded it (-d)
	KpropdBackoff                               // the primary was busy; kpropd backs off (-d)
	KpropdError                                 // see KpropdErr
	numKpropdEvents
)

var kpropdEventNames = [numKpropdEvents]string{"", "start", "poll", "in_sync", "updates", "full_resync_needed",
	"full_resync_granted", "full_resync_waiting", "full_propagation_connection", "full_propagation_received",
	"full_propagation_loaded", "backoff", "error"}

// KpropdErr classifies a kpropd error line.
type KpropdErr uint8

// kpropd errors; label values in kpropdErrNames.
const (
	KpropdErrNone             KpropdErr = iota
	KpropdErrConnect                    // cannot reach or authenticate to the primary's kadmind (retrying)
	KpropdErrRPC                        // an iprop call to the primary failed (reconnecting)
	KpropdErrPermissionDenied           // the primary refused: kiprop/<replica> lacks the p privilege
	KpropdErrPrimary                    // the primary returned an error
	KpropdErrInvalidResult              // the primary returned something kpropd does not understand
	KpropdErrReplay                     // applying received updates failed
	KpropdErrLoad                       // kdb5_util load of a full dump failed
	KpropdErrUnauthorized               // a kprop connection from a principal not in kpropd.acl
	KpropdErrGaveUp                     // iprop stopped (kpropd exits)
	KpropdErrOther                      // any other com_err line
	numKpropdErrs
)

var kpropdErrNames = [numKpropdErrs]string{"", "connect_failed", "rpc_failed", "permission_denied", "primary_error",
	"invalid_result", "replay_failed", "load_failed", "unauthorized", "gave_up", "other"}

// KpropdLine is one parsed kpropd line.
type KpropdLine struct {
	Event KpropdEvent
	Err   KpropdErr
	// Updates and Micros are the count and the time taken of an
	// "Incremental updates: N updates / U us" line.
	Updates, Micros uint64
}

type kpropdMessage struct {
	prefix string
	event  KpropdEvent
	err    KpropdErr
}

// kpropdMessages are matched as prefixes of the message, in order.
var kpropdMessages = []kpropdMessage{
	{"Calling iprop_get_updates_1", KpropdPoll, 0},
	{"Waiting for ", KpropdNone, 0},
	{"KDC is synchronized with primary", KpropdInSync, 0},
	{"Got incremental updates", KpropdNone, 0}, // followed by the counted line
	{"Incremental updates: ", KpropdUpdates, 0},
	{"Incremental propagation enabled", KpropdStart, 0},
	{"Full resync needed", KpropdFullResyncNeeded, 0},
	{"Full resync request granted", KpropdFullResyncGranted, 0},
	{"Still waiting for full resync", KpropdFullResyncWaiting, 0},
	{"Exponential backoff", KpropdBackoff, 0},
	{"get_updates primary busy", KpropdBackoff, 0},
	{"Busy signal received", KpropdNone, 0}, // after the backoff line
	{"Connection from ", KpropdFullPropConnection, 0},
	{"Full propagation transfer finished", KpropdFullPropReceived, 0},
	{"Full propagation transfer started", KpropdNone, 0},
	{"Database load process for full propagation completed", KpropdFullPropLoaded, 0},
	{"get_updates permission denied", KpropdError, KpropdErrPermissionDenied},
	{"get_updates, permission denied", KpropdError, KpropdErrPermissionDenied},
	{"Full resync permission denied", KpropdError, KpropdErrPermissionDenied},
	{"Full resync, permission denied", KpropdError, KpropdErrPermissionDenied},
	{"get_updates error from primary", KpropdError, KpropdErrPrimary},
	{"get_updates, error returned from primary", KpropdError, KpropdErrPrimary},
	{"Full resync error from primary", KpropdError, KpropdErrPrimary},
	{"Full resync, error returned from primary", KpropdError, KpropdErrPrimary},
	{"get_updates invalid result", KpropdError, KpropdErrInvalidResult},
	{"get_updates, invalid return", KpropdError, KpropdErrInvalidResult},
	{"Full resync invalid result", KpropdError, KpropdErrInvalidResult},
	{"Full resync, invalid return", KpropdError, KpropdErrInvalidResult},
	{"ulog_replay failed", KpropdError, KpropdErrReplay},
	{"iprop_get_updates call failed", KpropdError, KpropdErrRPC},
	{"iprop_full_resync call failed", KpropdError, KpropdErrRPC},
	{"Rejected connection from unauthorized principal", KpropdError, KpropdErrUnauthorized},
	// Said next to a counted com_err line, or debug chatter.
	{"ERROR returned by primary", KpropdNone, 0},
	{"Reinitializing iprop", KpropdNone, 0},
	{"Initializing kadm5 as client", KpropdNone, 0},
	{"kadm5 initialization", KpropdNone, 0},
	{"Sleeping ", KpropdNone, 0},
	{"waiting for a kprop connection", KpropdNone, 0},
	{"krb5_recvauth(", KpropdNone, 0},
	{"authenticated client: ", KpropdNone, 0},
	{"calling kdb5_util to load database", KpropdNone, 0},
	{"Load PID is ", KpropdNone, 0},
	{"Killing fullprop child", KpropdNone, 0},
	{"ready", KpropdNone, 0},
}

// kpropdComErr classifies com_err lines ("PROG: <error text> <what>") by
// the text kpropd adds, which ends the line.
var kpropdComErr = []kpropdMessage{
	{"while attempting to connect to primary KDC", KpropdError, KpropdErrConnect},
	{"interface, retrying", KpropdError, KpropdErrConnect},
	{"do_iprop failed", KpropdError, KpropdErrGaveUp},
	{"load terminated", KpropdError, KpropdErrLoad},
	{"returned a bad exit status", KpropdError, KpropdErrLoad},
}

// ParseKpropd reads one line (without its newline). ok is false for a
// line that is not kpropd's (reason ReasonOtherProgram) or a kpropd
// message it does not know (ReasonUnknownMessage, or ReasonMalformed for
// an updates line without its numbers).
func ParseKpropd(line []byte) (l KpropdLine, reason Reason) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	msg, ok := kpropdMsg(line)
	if !ok {
		return l, ReasonOtherProgram
	}
	full := bytes.TrimLeft(msg, " ")
	// syslog(LOG_INFO, "kpropd: Full resync needed.") repeats the ident.
	msg = bytes.TrimPrefix(full, []byte("kpropd: "))
	for _, m := range kpropdMessages {
		if !bytes.HasPrefix(msg, []byte(m.prefix)) {
			continue
		}
		l.Event, l.Err = m.event, m.err
		if m.event == KpropdUpdates {
			// "Incremental updates: %d updates / %lu us"
			rest := msg[len(m.prefix):]
			var ok1, ok2 bool
			l.Updates, rest, ok1 = leadingUint(rest)
			rest, ok := bytes.CutPrefix(rest, []byte(" updates / "))
			l.Micros, rest, ok2 = leadingUint(rest)
			if !ok || !ok1 || !ok2 || !bytes.HasPrefix(rest, []byte(" us")) {
				return KpropdLine{}, ReasonMalformed
			}
		}
		return l, ReasonNone
	}
	if prog, text, ok := bytes.Cut(full, []byte(": ")); ok && comErrProgram(prog) {
		for _, m := range kpropdComErr {
			if bytes.Contains(text, []byte(m.prefix)) {
				l.Event, l.Err = m.event, m.err
				return l, ReasonNone
			}
		}
		l.Event, l.Err = KpropdError, KpropdErrOther
		return l, ReasonNone
	}
	return l, ReasonUnknownMessage
}

// kpropdMsg strips a syslog header and returns the message, or the
// line itself when it has no header (kpropd -d output). A header of
// another program makes ok false.
func kpropdMsg(line []byte) (msg []byte, ok bool) {
	// "<PRI>", as syslog(3) sends it and some relays keep it.
	if len(line) > 2 && line[0] == '<' {
		if end := bytes.IndexByte(line[:min(len(line), 5)], '>'); end > 1 {
			if _, rest, ok := leadingUint(line[1:end]); ok && len(rest) == 0 {
				line = line[end+1:]
			}
		}
	}
	// A syslog header ends at the first ": " after "<tag>[pid]" or "<tag>";
	// kpropd -d lines have no time stamp, so a line starting with one is
	// a syslog line.
	if !syslogTime(line) {
		return line, true
	}
	// "<time> <host> <tag>[<pid>]: msg": the tag is the third field of a
	// traditional time stamp's tail ("Dec  1 02:41:27" has spaces in it).
	rest := line
	if isDigit(line[0]) { // RFC 3339: one field
		_, rest, _ = bytes.Cut(line, []byte(" "))
	} else if len(line) > 16 {
		rest = line[16:]
	}
	_, rest, _ = bytes.Cut(rest, []byte(" ")) // the host
	tag, msg, found := bytes.Cut(rest, []byte(": "))
	if !found {
		return nil, false
	}
	if i := bytes.IndexByte(tag, '['); i >= 0 {
		tag = tag[:i]
	}
	return msg, string(tag) == "kpropd"
}

// syslogTime reports a leading "Mmm dd hh:mm:ss " or RFC 3339 time stamp.
func syslogTime(line []byte) bool {
	switch {
	case len(line) > 16 && line[3] == ' ' && line[6] == ' ' && line[9] == ':' && line[12] == ':' && line[15] == ' ' &&
		line[0] >= 'A' && line[0] <= 'Z':
		return true
	case len(line) > 20 && isDigit(line[0]) && line[4] == '-' && line[7] == '-' && line[10] == 'T':
		return true
	}
	return false
}

// comErrProgram is kpropd's com_err prefix: its argv[0] ("kpropd",
// "/usr/sbin/kpropd").
func comErrProgram(p []byte) bool {
	return bytes.Equal(p, []byte("kpropd")) || bytes.HasSuffix(p, []byte("/kpropd"))
}

// leadingUint parses the decimal number at the start of b.
func leadingUint(b []byte) (uint64, []byte, bool) {
	var n uint64
	i := 0
	for ; i < len(b) && i < 19 && isDigit(b[i]); i++ {
		n = n*10 + uint64(b[i]-'0')
	}
	return n, b[i:], i > 0
}

// kpropdCounts are the counters of kpropd log sources. kpropd writes a
// few lines a poll interval: atomics per line cost nothing here.
type kpropdCounts struct {
	configured atomic.Bool // a kpropd source exists: its series are exported
	events     [numKpropdEvents]atomic.Uint64
	errors     [numKpropdErrs]atomic.Uint64
	updates    atomic.Uint64
	micros     atomic.Uint64
}

// handleKpropd counts one line of a kpropd log; false with the reason if
// it was not understood.
func (k *kpropdCounts) handle(line []byte) (Reason, bool) {
	l, reason := ParseKpropd(line)
	if reason != ReasonNone {
		return reason, false
	}
	if l.Event != KpropdNone {
		k.events[l.Event].Add(1)
	}
	if l.Err != KpropdErrNone {
		k.errors[l.Err].Add(1)
	}
	if l.Event == KpropdUpdates {
		k.updates.Add(l.Updates)
		k.micros.Add(l.Micros)
	}
	return ReasonNone, true
}

var (
	descKpropdEvents = prometheus.NewDesc("krb5_kpropd_events_total",
		"kpropd log lines by event: start, poll, in_sync, updates, full_resync_needed, full_resync_granted, full_resync_waiting, full_propagation_connection, full_propagation_received, full_propagation_loaded, backoff, error (some only with kpropd -d).",
		[]string{"event"}, nil)
	descKpropdErrors = prometheus.NewDesc("krb5_kpropd_errors_total",
		"kpropd error lines by kind: connect_failed, rpc_failed, permission_denied, primary_error, invalid_result, replay_failed, load_failed, unauthorized, gave_up, other.",
		[]string{"error"}, nil)
	descKpropdUpdates = prometheus.NewDesc("krb5_kpropd_updates_total",
		"Incremental updates kpropd applied (the N of its 'Incremental updates: N updates / U us' lines).", nil, nil)
	descKpropdApply = prometheus.NewDesc("krb5_kpropd_update_seconds_total",
		"Time kpropd took to fetch and apply incremental updates (the U of those lines).", nil, nil)
)

func describeKpropd(ch chan<- *prometheus.Desc) {
	ch <- descKpropdEvents
	ch <- descKpropdErrors
	ch <- descKpropdUpdates
	ch <- descKpropdApply
}

func (k *kpropdCounts) collect(ch chan<- prometheus.Metric) {
	for e := KpropdStart; e < numKpropdEvents; e++ {
		ch <- prometheus.MustNewConstMetric(descKpropdEvents, prometheus.CounterValue, float64(k.events[e].Load()), kpropdEventNames[e])
	}
	for e := KpropdErrConnect; e < numKpropdErrs; e++ {
		ch <- prometheus.MustNewConstMetric(descKpropdErrors, prometheus.CounterValue, float64(k.errors[e].Load()), kpropdErrNames[e])
	}
	ch <- prometheus.MustNewConstMetric(descKpropdUpdates, prometheus.CounterValue, float64(k.updates.Load()))
	ch <- prometheus.MustNewConstMetric(descKpropdApply, prometheus.CounterValue, float64(k.micros.Load())/1e6)
}
