// Package probestatus is what the landing page and top read of the
// continuous probes: plain records of results and error classes as
// strings. It imports nothing of the project, so that the pages that
// show probe results do not link the Kerberos engine (prober fills these
// records; TestLayering holds the rule).
package probestatus

import "time"

// The names of the probe series other packages read (top's view of a
// running daemon): prober declares its series with them.
const (
	MetricSuccess  = "krb5_probe_success"
	MetricDuration = "krb5_probe_duration_seconds"
	// MetricTotal counts the exchanges by result: their failures' class.
	MetricTotal = "krb5_probe_total"
)

// Exchanges, as label values.
const (
	ExchangeAS  = "as"
	ExchangeTGS = "tgs"
	// The kpasswd prober's login for kadmin/changepw, then its
	// password-change exchange with kadmind; the kadmin prober's RPC call.
	ExchangeKpasswdAS = "kpasswd_as"
	ExchangeKpasswd   = "kpasswd"
	ExchangeKadminRPC = "kadmin_rpc"
	// The cross-realm hops of a module whose service is of another realm:
	// the cross-realm TGT from the target KDC, the service ticket from the
	// service realm's KDC with it.
	ExchangeReferral  = "referral"
	ExchangeRemoteTGS = "remote_tgs"
)

// ClassSuccess is the result class of an exchange that succeeded (the
// engine's krb5.ClassSuccess; prober's tests keep the two equal).
const ClassSuccess = "success"

// Record is one finished probe of a continuous target.
type Record struct {
	Start    time.Time
	Duration time.Duration // both exchanges
	Success  bool
	// Login and Ticket are the AS and TGS exchanges' own durations, when
	// they succeeded (zero otherwise): the latencies the targets are for.
	Login, Ticket time.Duration
	// AS and TGS are the exchanges' results: "success" or the error
	// class; TGS is empty when the module names no service, AS for the
	// kadmin prober (no login).
	AS, TGS string
	// Kadmind is the result of the kpasswd or kadmin prober's exchange
	// with kadmind (kpasswd, kadmin_rpc); empty for the kdc prober.
	Kadmind string
	// Referral and Remote are the cross-realm exchanges' results, empty
	// when the module's service is of the client's realm.
	Referral, Remote string
	// Err is the first failure's text ("" on success).
	Err string
	// Log is the probe's debug log (logfmt), cut at the prober's limit.
	Log string
}

// Failure names the exchange that failed and its class ("login
// connection_refused"), for a record that did not succeed.
func (r *Record) Failure() string {
	switch {
	case r.AS != "" && r.AS != ClassSuccess:
		return "login " + r.AS
	case r.TGS != "" && r.TGS != ClassSuccess:
		return "service ticket " + r.TGS
	case r.Referral != "" && r.Referral != ClassSuccess:
		return "cross-realm TGT " + r.Referral
	case r.Remote != "" && r.Remote != ClassSuccess:
		return "service ticket of the trusted realm " + r.Remote
	case r.Kadmind != "" && r.Kadmind != ClassSuccess:
		return "kadmind " + r.Kadmind
	}
	return "service ticket " + r.TGS
}

// Target is one continuous target with its last probes.
type Target struct {
	Name, Address, Module string
	// Transport is the module's: udp, tcp or https (a KDC proxy).
	Transport string
	// Prober is the module's prober: kdc, kpasswd or kadmin.
	Prober   string
	Interval time.Duration
	// Recent holds the last probes, newest first (none before the first).
	Recent []Record
	// FailingSince is the start of the first of the probes that have
	// failed since the last success (zero while the last one succeeded),
	// however many of them Recent still holds.
	FailingSince time.Time
}
