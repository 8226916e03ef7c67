package prober

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// The check's exit codes (Nagios plugin API: 0 OK, 1 WARNING, 2 CRITICAL,
// 3 UNKNOWN), its text and its performance data
// (label=value[unit];warn;crit;min), each row's expected line written out
// by hand from the outcome's durations: 12.5 ms is 0.012500 s, a 10 ms
// threshold is 0.01.
func TestNagiosVerdict(t *testing.T) {
	const (
		// RFC 3962 and RFC 8009's enctype numbers and MIT's names.
		sha1   = 18 // aes256-cts-hmac-sha1-96
		sha384 = 20 // aes256-cts-hmac-sha384-192
		login  = "login 12.500ms (spake; preauth_required 3.000ms, spake_challenge 4.250ms, as_rep 5.000ms; " +
			"rep=aes256-cts-hmac-sha384-192 tkt=aes256-cts-hmac-sha384-192 ses=aes256-cts-hmac-sha384-192)"
		asRTTs = "preauth_required=0.003000s spake_challenge=0.004250s as_rep=0.005000s"
		ticket = "(rep=aes256-cts-hmac-sha384-192 tkt=aes256-cts-hmac-sha1-96 ses=aes256-cts-hmac-sha384-192)"
	)
	ok := func() Outcome {
		return Outcome{Prober: config.ProberKDC,
			AS: krb5.ASResult{Duration: 12500 * time.Microsecond, PreauthRequired: 3 * time.Millisecond,
				SPAKEChallenge: 4250 * time.Microsecond, ASRep: 5 * time.Millisecond, Method: krb5.MethodSPAKE,
				Etypes: krb5.Etypes{Reply: sha384, Ticket: sha384, Session: sha384}, HasClockOffset: true, ClockOffset: -1500 * time.Millisecond},
			TGSRan: true, TGS: krb5.TGSResult{Duration: 7250 * time.Microsecond, Etypes: krb5.Etypes{Reply: sha384, Ticket: sha1, Session: sha384}}}
	}
	skew := NagiosThresholds{SkewWarning: time.Minute, SkewCritical: 4 * time.Minute}
	with := func(warn, crit time.Duration) NagiosThresholds {
		th := skew
		th.Warning, th.Critical = warn, crit
		return th
	}
	refused := &krb5.Error{Class: krb5.ClassConnectionRefused, Phase: krb5.PhaseASRep, Err: errors.New("dial udp: refused")}
	unknown := &krb5.Error{Class: "KDC_ERR_S_PRINCIPAL_UNKNOWN", Code: 7, Phase: krb5.PhaseTGSRep}
	for _, tc := range []struct {
		name   string
		o      func() Outcome
		th     NagiosThresholds
		code   int
		status string // the line's state word
		text   string
		perf   string
	}{
		{"ok, no latency thresholds", ok, skew, 0, "OK",
			login + ", service ticket 7.250ms " + ticket,
			"as=0.012500s;;;0 " + asRTTs + " tgs=0.007250s;;;0 clock_offset=-1.500000s;60;240"},
		{"login at or beyond warning", ok, with(10*time.Millisecond, 0), 1, "WARNING",
			login + ", service ticket 7.250ms " + ticket,
			"as=0.012500s;0.01;;0 " + asRTTs + " tgs=0.007250s;0.01;;0 clock_offset=-1.500000s;60;240"},
		{"login exactly at critical", ok, with(5*time.Millisecond, 12500*time.Microsecond), 2, "CRITICAL",
			login + ", service ticket 7.250ms " + ticket,
			"as=0.012500s;0.005;0.0125;0 " + asRTTs + " tgs=0.007250s;0.005;0.0125;0 clock_offset=-1.500000s;60;240"},
		{"a service ticket slower than the login", func() Outcome { o := ok(); o.TGS.Duration = 20 * time.Millisecond; return o },
			with(13*time.Millisecond, 15*time.Millisecond), 2, "CRITICAL",
			login + ", service ticket 20.000ms " + ticket,
			"as=0.012500s;0.013;0.015;0 " + asRTTs + " tgs=0.020000s;0.013;0.015;0 clock_offset=-1.500000s;60;240"},
		{"unknown service", func() Outcome { o := ok(); o.TGS, o.TGSErr = krb5.TGSResult{}, unknown; return o }, skew, 2, "CRITICAL",
			login + ", service ticket failed: KDC_ERR_S_PRINCIPAL_UNKNOWN (tgs_rep: KDC_ERR_S_PRINCIPAL_UNKNOWN)",
			"as=0.012500s;;;0 " + asRTTs + " clock_offset=-1.500000s;60;240"},
		{"KDC down: both fail, no perfdata", func() Outcome {
			o := ok()
			o.AS, o.ASErr = krb5.ASResult{}, refused
			o.TGS, o.TGSErr = krb5.TGSResult{}, noTGT(krb5.PhaseTGSRep, "no valid TGT: the login failed")
			return o
		}, with(time.Second, 2*time.Second), 2, "CRITICAL",
			"login failed: connection_refused (as_rep: connection_refused: dial udp: refused), " +
				"service ticket failed: no_tgt (tgs_rep: no_tgt: no valid TGT: the login failed)", ""},
		{"login only, retransmits and TCP", func() Outcome {
			o := ok()
			o.TGSRan, o.TGS = false, krb5.TGSResult{}
			o.AS.Retransmits, o.AS.TCPFallback = 2, true
			return o
		}, skew, 0, "OK",
			login + ", 2 UDP retransmits, fell back to TCP (RESPONSE_TOO_BIG)",
			"as=0.012500s;;;0 " + asRTTs + " clock_offset=-1.500000s;60;240"},
		{"cross-realm: the trusted realm's KDC refuses", func() Outcome {
			o := ok()
			o.TGSRan, o.TGS = false, krb5.TGSResult{}
			o.CrossRan = true
			o.Referral = krb5.TGSResult{Duration: 2 * time.Millisecond, Etypes: krb5.Etypes{Reply: sha384, Ticket: sha1, Session: sha384}, Retransmits: 1}
			o.RemoteErr = refused
			return o
		}, skew, 2, "CRITICAL",
			login + ", cross-realm TGT 2.000ms " + ticket +
				", service ticket of the trusted realm failed: connection_refused (as_rep: connection_refused: dial udp: refused), 1 UDP retransmits",
			"as=0.012500s;;;0 " + asRTTs + " referral=0.002000s;;;0 clock_offset=-1.500000s;60;240"},
		{"cross-realm: a failed referral, the next hop not blamed", func() Outcome {
			o := ok()
			o.TGSRan, o.TGS = false, krb5.TGSResult{}
			o.CrossRan = true
			o.ReferralErr = unknown
			o.RemoteErr = noTGT(krb5.PhaseRemoteTGS, "no cross-realm TGT: the referral failed")
			return o
		}, skew, 2, "CRITICAL",
			login + ", cross-realm TGT failed: KDC_ERR_S_PRINCIPAL_UNKNOWN (tgs_rep: KDC_ERR_S_PRINCIPAL_UNKNOWN)",
			"as=0.012500s;;;0 " + asRTTs + " clock_offset=-1.500000s;60;240"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o()
			code, text := NagiosVerdict(&o, tc.th)
			if code != tc.code || text != tc.text {
				t.Errorf("verdict %d %q\nwant    %d %q", code, text, tc.code, tc.text)
			}
			if perf := NagiosPerfdata(&o, tc.th); perf != tc.perf {
				t.Errorf("perfdata %q\nwant     %q", perf, tc.perf)
			}
			want := "KRB5 " + tc.status + " - " + tc.text
			if tc.perf != "" {
				want += " | " + tc.perf
			}
			if code, line := NagiosCheck(&o, tc.th); code != tc.code || line != want {
				t.Errorf("check %d %q\nwant  %d %q", code, line, tc.code, want)
			}
		})
	}
}

// The clock-skew thresholds rate the KDC's clock offset as the README
// says: at or beyond SkewCritical (--clock-skew-critical) CRITICAL, else
// at or beyond SkewWarning (--clock-skew-warning) WARNING, either sign,
// 0 disables, and the worse of latency and skew wins.
func TestNagiosVerdictClockSkew(t *testing.T) {
	for _, tc := range []struct {
		name               string
		offset             time.Duration
		has                bool
		warn, crit, slower time.Duration
		want               int
		text               string
	}{
		{"in sync", 2 * time.Second, true, time.Minute, 4 * time.Minute, 0, NagiosOK, ""},
		{"no offset known", time.Hour, false, time.Minute, 4 * time.Minute, 0, NagiosOK, ""},
		{"at warning", time.Minute, true, time.Minute, 4 * time.Minute, 0, NagiosWarning, "KDC clock off by 1m0s"},
		{"behind, warning", -90 * time.Second, true, time.Minute, 4 * time.Minute, 0, NagiosWarning, "KDC clock off by -1m30s"},
		{"at critical", 4 * time.Minute, true, time.Minute, 4 * time.Minute, 0, NagiosCritical, "KDC clock off by 4m0s"},
		{"behind, critical", -5 * time.Minute, true, time.Minute, 4 * time.Minute, 0, NagiosCritical, "KDC clock off by -5m0s"},
		{"warning disabled", 3 * time.Minute, true, 0, 4 * time.Minute, 0, NagiosOK, ""},
		{"both disabled", time.Hour, true, 0, 0, 0, NagiosOK, ""},
		{"critical skew beats a latency warning", 5 * time.Minute, true, time.Minute, 4 * time.Minute, time.Nanosecond, NagiosCritical, "KDC clock off by 5m0s"},
		{"latency warning with a skew in bounds", time.Second, true, time.Minute, 4 * time.Minute, time.Nanosecond, NagiosWarning, "login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := NagiosThresholds{SkewWarning: tc.warn, SkewCritical: tc.crit, Warning: tc.slower}
			o := Outcome{AS: krb5.ASResult{Duration: time.Millisecond, ClockOffset: tc.offset, HasClockOffset: tc.has}}
			code, text := NagiosVerdict(&o, th)
			if code != tc.want || !strings.Contains(text, tc.text) {
				t.Errorf("exit %d %q, want %d with %q", code, text, tc.want, tc.text)
			}
			if tc.want == NagiosOK && strings.Contains(text, "clock") {
				t.Errorf("OK verdict mentions the clock: %q", text)
			}
			perf := NagiosPerfdata(&o, th)
			if tc.has && !strings.Contains(perf, "clock_offset=") {
				t.Errorf("perfdata lacks clock_offset: %q", perf)
			}
		})
	}
}
