package prober

import (
	"context"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// crossProtocol is a kdc module whose service is of another realm
// (realm_kdcs): the login, then the walk of the trust.
var crossProtocol = protocol{run: (*Target).runCross, exchanges: []string{ExchangeAS, ExchangeReferral, ExchangeRemoteTGS}}

// runCross walks the trust after the login: the referral with the TGT,
// then the service ticket at each KDC of the service's realm in turn
// until one answers (a KDC that is down or unreachable is skipped, as
// libkrb5 does), each exchange bounded by the module's timeout.
func (t *Target) runCross(ctx context.Context, o *Outcome) {
	if !t.login(ctx, o) {
		return
	}
	o.CrossRan = true
	if !t.client.HasTGT() {
		o.ReferralErr = noTGT(krb5.PhaseReferral, "no valid TGT: the login failed")
		o.RemoteErr = noTGT(krb5.PhaseRemoteTGS, "no cross-realm TGT: the login failed")
		return
	}
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	o.Referral, o.ReferralErr = t.client.Referral(rctx, t.cross)
	cancel()
	if canceled(ctx, o.ReferralErr) {
		o.Canceled = true
		return
	}
	if o.ReferralErr != nil {
		o.RemoteErr = noTGT(krb5.PhaseRemoteTGS, "no cross-realm TGT: the referral failed")
		return
	}
	for _, kdc := range t.remoteKDCs {
		o.RemoteKDC = kdc
		hctx, cancel := context.WithTimeout(ctx, t.timeout)
		o.Remote, o.RemoteErr = t.client.RemoteServiceTicket(hctx, t.cross, kdc)
		cancel()
		if canceled(ctx, o.RemoteErr) {
			o.Canceled = true
			return
		}
		switch krb5.Classify(o.RemoteErr) {
		case krb5.ClassTimeout, krb5.ClassConnectionRefused, krb5.ClassNetwork:
			continue // the next KDC of the realm
		}
		return
	}
}
