package prober

import (
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// Exchange is one exchange a probe made, as every consumer of an outcome
// reads it: the metrics, the one-shot /probe registry, the log of failures
// and recoveries, the status page's records and the Nagios check.
type Exchange struct {
	Name string // its exchange label: as, kpasswd_as, tgs, kpasswd, kadmin_rpc, referral, remote_tgs
	// Transport is the one it finished on (tcp after a UDP answer that
	// was too big).
	Transport   string
	Duration    time.Duration
	End         time.Time // when it finished
	Err         error
	Etypes      *krb5.Etypes // the reply's; nil for kpasswd and kadmin_rpc
	Retransmits int          // UDP resends
	Fallback    bool         // retried over TCP (RESPONSE_TOO_BIG)
}

// Exchanges lists what the probe exchanged, in the order it did: the
// kadmin RPC call, or the login and then the kpasswd exchange, the
// service ticket, the cross-realm TGT and the service ticket of the
// trusted realm, each that ran. tr is the module's transport.
func (o *Outcome) Exchanges(tr krb5.Transport) []Exchange {
	var out []Exchange
	on := func(fallback bool) string {
		if fallback {
			return krb5.TCP.String()
		}
		return tr.String()
	}
	if o.RPCRan {
		out = append(out, Exchange{Name: ExchangeKadminRPC, Transport: krb5.TCP.String(), Duration: o.RPC.Duration,
			End: o.Start.Add(o.RPC.Duration), Err: o.RPCErr})
	}
	if !o.HasAS() {
		return out
	}
	end := o.Start.Add(o.AS.Duration)
	out = append(out, Exchange{Name: o.ASExchange(), Transport: on(o.AS.TCPFallback), Duration: o.AS.Duration, End: end,
		Err: o.ASErr, Etypes: &o.AS.Etypes, Retransmits: o.AS.Retransmits, Fallback: o.AS.TCPFallback})
	if o.KpasswdRan {
		end = end.Add(o.Kpasswd.Duration)
		out = append(out, Exchange{Name: ExchangeKpasswd, Transport: tr.String(), Duration: o.Kpasswd.Duration, End: end, Err: o.KpasswdErr})
	}
	if o.CrossRan {
		end = end.Add(o.Referral.Duration)
		out = append(out, Exchange{Name: ExchangeReferral, Transport: on(o.Referral.TCPFallback), Duration: o.Referral.Duration, End: end,
			Err: o.ReferralErr, Etypes: &o.Referral.Etypes, Retransmits: o.Referral.Retransmits, Fallback: o.Referral.TCPFallback})
		end = end.Add(o.Remote.Duration)
		out = append(out, Exchange{Name: ExchangeRemoteTGS, Transport: on(o.Remote.TCPFallback), Duration: o.Remote.Duration, End: end,
			Err: o.RemoteErr, Etypes: &o.Remote.Etypes, Retransmits: o.Remote.Retransmits, Fallback: o.Remote.TCPFallback})
	}
	if o.TGSRan {
		end = end.Add(o.TGS.Duration)
		out = append(out, Exchange{Name: ExchangeTGS, Transport: on(o.TGS.TCPFallback), Duration: o.TGS.Duration, End: end,
			Err: o.TGSErr, Etypes: &o.TGS.Etypes, Retransmits: o.TGS.Retransmits, Fallback: o.TGS.TCPFallback})
	}
	return out
}
