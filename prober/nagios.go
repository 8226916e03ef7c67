package prober

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// Exit codes of a Nagios/Icinga check (`krb5-exporter probe`).
const (
	NagiosOK       = 0
	NagiosWarning  = 1
	NagiosCritical = 2
	NagiosUnknown  = 3
)

// NagiosThresholds are the limits a check rates a kdc prober's outcome
// against; 0 disables one.
type NagiosThresholds struct {
	Warning, Critical         time.Duration // an exchange's duration
	SkewWarning, SkewCritical time.Duration // the KDC's clock offset, either sign
}

// NagiosLine is the check's one line of output, "KRB5 STATE - text".
func NagiosLine(code int, text string) string {
	return fmt.Sprintf("KRB5 %s - %s", [...]string{"OK", "WARNING", "CRITICAL", "UNKNOWN"}[code], text)
}

// NagiosCheck is the check's exit code and its line: the verdict, then
// the performance data after a "|" when there are any.
func NagiosCheck(o *Outcome, th NagiosThresholds) (int, string) {
	code, text := NagiosVerdict(o, th)
	if perf := NagiosPerfdata(o, th); perf != "" {
		text += " | " + perf
	}
	return code, NagiosLine(code, text)
}

// NagiosVerdict rates the outcome against the thresholds: the exit code,
// and what each exchange took or why it failed.
func NagiosVerdict(o *Outcome, th NagiosThresholds) (int, string) {
	code := NagiosOK
	raise := func(c int) {
		if c > code {
			code = c
		}
	}
	rate := func(d time.Duration) {
		switch {
		case th.Critical > 0 && d >= th.Critical:
			raise(NagiosCritical)
		case th.Warning > 0 && d >= th.Warning:
			raise(NagiosWarning)
		}
	}
	var parts []string
	if o.ASErr != nil {
		raise(NagiosCritical)
		parts = append(parts, fmt.Sprintf("login failed: %s (%v)", krb5.Classify(o.ASErr), o.ASErr))
	} else {
		rate(o.AS.Duration)
		phases := fmt.Sprintf("as_rep %s", millis(o.AS.ASRep))
		if o.AS.SPAKEChallenge > 0 {
			phases = fmt.Sprintf("spake_challenge %s, %s", millis(o.AS.SPAKEChallenge), phases)
		}
		if o.AS.PreauthRequired > 0 {
			phases = fmt.Sprintf("preauth_required %s, %s", millis(o.AS.PreauthRequired), phases)
		}
		parts = append(parts, fmt.Sprintf("login %s (%s; %s; %s)", millis(o.AS.Duration), o.AS.Method, phases, etypeNames(o.AS.Etypes)))
	}
	// The exchanges after the login, by what a user calls them; a hop
	// after a failed one is not said to fail too.
	what := map[string]string{ExchangeTGS: "service ticket", ExchangeReferral: "cross-realm TGT",
		ExchangeRemoteTGS: "service ticket of the trusted realm"}
	retrans, fallback, failed := 0, false, false
	for _, ex := range o.Exchanges(krb5.UDP) {
		retrans += ex.Retransmits
		fallback = fallback || ex.Fallback
		name, ok := what[ex.Name]
		switch {
		case !ok || failed:
		case ex.Err != nil:
			raise(NagiosCritical)
			parts = append(parts, fmt.Sprintf("%s failed: %s (%v)", name, krb5.Classify(ex.Err), ex.Err))
			failed = true
		default:
			rate(ex.Duration)
			parts = append(parts, fmt.Sprintf("%s %s (%s)", name, millis(ex.Duration), etypeNames(*ex.Etypes)))
		}
	}
	if o.AS.HasClockOffset {
		skew := o.AS.ClockOffset.Abs()
		switch {
		case th.SkewCritical > 0 && skew >= th.SkewCritical:
			raise(NagiosCritical)
			parts = append(parts, fmt.Sprintf("KDC clock off by %s", o.AS.ClockOffset.Round(time.Millisecond)))
		case th.SkewWarning > 0 && skew >= th.SkewWarning:
			raise(NagiosWarning)
			parts = append(parts, fmt.Sprintf("KDC clock off by %s", o.AS.ClockOffset.Round(time.Millisecond)))
		}
	}
	if retrans > 0 {
		parts = append(parts, fmt.Sprintf("%d UDP retransmits", retrans))
	}
	if fallback {
		parts = append(parts, "fell back to TCP (RESPONSE_TOO_BIG)")
	}
	return code, strings.Join(parts, ", ")
}

// NagiosPerfdata is the Nagios performance data of the exchanges that
// succeeded, the login's round trips and the clock offset:
// label=value[unit];warn;crit[;min].
func NagiosPerfdata(o *Outcome, th NagiosThresholds) string {
	limit := func(d time.Duration) string {
		if d <= 0 {
			return ""
		}
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	}
	var f []string
	add := func(label string, d time.Duration, thresholds bool) {
		s := fmt.Sprintf("%s=%.6fs", label, d.Seconds())
		if thresholds {
			s += ";" + limit(th.Warning) + ";" + limit(th.Critical) + ";0"
		}
		f = append(f, s)
	}
	for _, ex := range o.Exchanges(krb5.UDP) {
		if ex.Err != nil {
			continue
		}
		add(ex.Name, ex.Duration, true)
		if ex.Name == ExchangeAS { // the login's round trips
			if o.AS.PreauthRequired > 0 {
				add("preauth_required", o.AS.PreauthRequired, false)
			}
			if o.AS.SPAKEChallenge > 0 {
				add("spake_challenge", o.AS.SPAKEChallenge, false)
			}
			add("as_rep", o.AS.ASRep, false)
		}
	}
	if o.AS.HasClockOffset {
		f = append(f, fmt.Sprintf("clock_offset=%.6fs;%s;%s", o.AS.ClockOffset.Seconds(), limit(th.SkewWarning), limit(th.SkewCritical)))
	}
	return strings.Join(f, " ")
}

func millis(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
}

func etypeNames(e krb5.Etypes) string {
	return fmt.Sprintf("rep=%s tkt=%s ses=%s", krb5.EtypeName(e.Reply), krb5.EtypeName(e.Ticket), krb5.EtypeName(e.Session))
}
