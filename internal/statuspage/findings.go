package statuspage

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/collector"
	"github.com/krb5-exporter/krb5-exporter/internal/probestatus"
	"github.com/krb5-exporter/krb5-exporter/kdclog"
	"github.com/krb5-exporter/krb5-exporter/kdclog/talkers"
)

// Severity orders the findings: what stops logins first.
type Severity int

const (
	Critical Severity = iota // logins fail
	Warning                  // logins work, something needs a look
)

func (s Severity) String() string {
	if s == Critical {
		return "critical"
	}
	return "warning"
}

// Finding is one thing the page leads with: what is wrong, since when,
// what it means and what to do, and the runbook section (an alert's name)
// that says more.
type Finding struct {
	Severity Severity
	Title    string
	// Since is when it began, as far as the exporter knows (zero: not
	// known), and SinceLabel how the page says it: "since", "since at
	// least" (it began no later: the exporter saw it first then), "last
	// seen running" (it began after).
	Since      time.Time
	SinceLabel string
	Meaning    string
	Next       string
	Runbook    string // the alert's name: its runbook anchor
}

// The seed's latency targets the probes are held to (alerts/probe.rules.yml
// holds the same over 30 minutes; the page over the last probes).
const (
	loginTarget  = 20 * time.Millisecond
	ticketTarget = 10 * time.Millisecond
)

// Storms, as alerts/talkers.rules.yml's KDCClientStorm: one address or
// client sending more than stormRate requests a second (a login one),
// whatever else the KDC serves (its share is shown, not judged: adding
// other traffic must not hide a storm).
const stormRate = talkers.StormRate

// findings derives the page's verdicts from what the daemon's views say,
// most severe first (the critical ones, a stopped KDC and failing probes,
// are taken first), then in the order an on-call engineer would look: the
// KDC itself, its answers, its load, its watchers.
func findings(now time.Time, probes []probestatus.Target, logs []kdclog.SourceStatus, host *collector.Status, snap *talkers.Snapshot) []Finding {
	var out []Finding
	kdcDown := false
	if host != nil {
		for _, p := range host.Programs {
			if p.Name != "krb5kdc" || p.Running {
				continue
			}
			kdcDown = true
			f := Finding{Severity: Critical, Title: "krb5kdc is not running", SinceLabel: "last seen running",
				Meaning: "No process of the KDC runs on this host: every login and service ticket sent to it fails.",
				Next:    "Start it (systemctl start krb5-kdc, RHEL: krb5kdc) and read why it stopped: journalctl -u krb5-kdc, or its log file.",
				Runbook: "KDCDown"}
			f.Since = p.LastSeen
			if p.LastSeen.IsZero() {
				f.Title += " (not seen since the exporter started)"
			}
			out = append(out, f)
		}
	}
	failing, slow := probeFindings(probes, kdcDown)
	// A storm before the slow probes it causes: the cause leads.
	out = append(out, failing...)
	out = append(out, stormFindings(now, snap)...)
	out = append(out, slow...)
	for _, s := range logs {
		switch {
		case !s.Open && s.Journal:
			out = append(out, Finding{Severity: Warning, Title: "log " + s.Path + ": journalctl is not running",
				Meaning: "The KDC's requests are not counted: the request rates, errors, attack signals and top talkers stand still.",
				Next:    "Check that the service user may read the journal (group systemd-journal) and that journalctl runs; the exporter's own log says why.",
				Runbook: "Krb5ExporterLogMissing"})
		case !s.Open:
			out = append(out, Finding{Severity: Warning, Title: "log " + s.Path + ": no such file",
				Meaning: "The KDC's requests are not counted from this log: the request rates, errors, attack signals and top talkers stand still.",
				Next:    "Compare the path with kdc.conf's [logging] kdc = FILE:...; a KDC without [logging] logs to the journal (journal: {} in the configuration).",
				Runbook: "Krb5ExporterLogMissing"})
		case s.BytesBehind > behindWarn:
			out = append(out, Finding{Severity: Warning, Title: "log " + s.Path + ": " + byteSize(s.BytesBehind) + " behind",
				Meaning: "The exporter reads the log more slowly than the KDC writes it: the counters lag behind.",
				Next:    "Look at the exporter's CPU and the disk; the runbook says what else slows it.",
				Runbook: "Krb5ExporterLogBehind"})
		}
	}
	if host != nil {
		for _, c := range host.Failing {
			f := Finding{Severity: Warning, Title: "collector " + c.Name + " failing: " + c.Err,
				Meaning: "Its metrics are missing from the scrapes until it works again.",
				Next:    "The exporter's log has one line saying why.",
				Runbook: "Krb5ExporterCollectorFailing"}
			if c.Name == "kdcservice" {
				f.Meaning = "The KDC's service time is not traced: its series stand still."
				f.Next = "The eBPF collector needs CAP_BPF and CAP_PERFMON (the package's kdcservice.conf drop-in) and a kernel with BTF."
				f.Runbook = "KDCServiceTracingDown"
			}
			out = append(out, f)
		}
	}
	return out
}

// probeFindings: failing probes (with the first failure's reason and
// since when), then probes answering slower than the seed's targets. With
// the KDC down, its probes' failures are its consequence, said once.
func probeFindings(probes []probestatus.Target, kdcDown bool) (failingProbes, slow []Finding) {
	var failing []string
	var since time.Time
	for _, t := range probes {
		if len(t.Recent) == 0 {
			continue
		}
		last := &t.Recent[0]
		if !last.Success {
			failing = append(failing, t.Name+": "+last.Failure())
			if s := t.FailingSince; !s.IsZero() && (since.IsZero() || s.Before(since)) {
				since = s
			}
			continue
		}
		if f, ok := slowProbe(t); ok {
			slow = append(slow, f)
		}
	}
	if len(failing) > 0 {
		f := Finding{Severity: Critical, Since: since, SinceLabel: "since",
			Meaning: "Logins or service tickets as a client sends them fail.",
			Next:    "The reason is the error class: connection_refused or timeout, the KDC or the network; a KDC_ERR_ class, the KDC's answer (see the probe's debug log).",
			Runbook: "KDCProbeFailing"}
		if len(failing) == 1 {
			f.Title = "probe " + failing[0]
		} else {
			f.Title = fmt.Sprintf("%d probes failing: %s", len(failing), strings.Join(failing, "; "))
		}
		if kdcDown {
			f.Meaning = "The probes fail because krb5kdc is not running."
			f.Next = "Start the KDC; the probes recover at their next run."
			f.Runbook = "KDCDown"
		}
		failingProbes = append(failingProbes, f)
	}
	return failingProbes, slow
}

// slowProbe: the median of a target's recent successful logins (tickets)
// above the seed's p95 target. A median of a few probes, not a p95 over
// 30 minutes (the alerts' job): one slow probe does not make it.
func slowProbe(t probestatus.Target) (Finding, bool) {
	var logins, tickets []time.Duration
	for _, r := range t.Recent {
		if r.Login > 0 {
			logins = append(logins, r.Login)
		}
		if r.Ticket > 0 {
			tickets = append(tickets, r.Ticket)
		}
	}
	for _, c := range []struct {
		what    string
		d       []time.Duration
		target  time.Duration
		runbook string
	}{{"logins", logins, loginTarget, "KDCLoginLatencyP95High"}, {"service tickets", tickets, ticketTarget, "KDCTicketLatencyP95High"}} {
		if len(c.d) < 3 {
			continue
		}
		if m := median(c.d); m > c.target {
			return Finding{Severity: Warning,
				Title: fmt.Sprintf("probe %s: %s take %s (median of the last %d), over the %s target", t.Name, c.what, ms(m), len(c.d), ms(c.target)),
				Since: t.Recent[len(t.Recent)-1].Start, SinceLabel: "since at least",
				Meaning: "The KDC answers, slowly: clients wait, and time out when it gets worse.",
				Next:    "Look at the KDC's CPU, its workers, its disk (last-success writes) and the network; the runbook lists the usual causes.",
				Runbook: c.runbook}, true
		}
	}
	return Finding{}, false
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// stormFindings: an address or client sending the KDC more than a
// person would, by its rate over the last complete window.
func stormFindings(now time.Time, snap *talkers.Snapshot) []Finding {
	if !current(now, snap) {
		return nil
	}
	total := float64(snap.Requests[0] + snap.Requests[1])
	secs := snap.Window.Seconds()
	var out []Finding
	for _, k := range talkers.Kinds[:2] { // requests by address, by client
		for _, tk := range snap.Merged(1, k.Lists...) {
			rate := float64(tk.Count) / secs
			share := 0.0
			if total > 0 {
				share = float64(tk.Count) / total
			}
			if rate <= stormRate {
				continue
			}
			what := strings.ToLower(strings.TrimPrefix(k.Title, "Requests by "))
			out = append(out, Finding{Severity: Warning,
				Title: fmt.Sprintf("storm: %s %s sends %.1f requests/s, %.0f %% of the KDC's", what, tk.Name, rate, 100*share),
				Since: snap.Start, SinceLabel: "since at least",
				Meaning: "One " + what + " loads the KDC far beyond what a person does: a job logging in per task, a loop, a service retrying a stale keytab.",
				Next:    "Find its owner; what it asks and how it fails: the top talkers below and krb5_kdc_top_failures.",
				Runbook: "KDCClientStorm"})
		}
	}
	return out
}

// clock is a time of day as the page shows it.
func clock(t time.Time) string { return t.UTC().Format("15:04:05 UTC") }

// current says whether snap is the window before the current one: the
// last complete window stays until the next request line ends the
// current one, and a KDC that logs nothing more (stopped, or idle) would
// keep showing its last storm.
func current(now time.Time, snap *talkers.Snapshot) bool {
	return snap != nil && !snap.Start.IsZero() && snap.Window > 0 && now.Before(snap.Start.Add(2*snap.Window))
}
