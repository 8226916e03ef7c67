package prober

import (
	"context"
	"errors"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// The kdc prober's probes: a login alone, or a login and then a service
// ticket when the module names a service of the realm.
var (
	loginProtocol = protocol{run: (*Target).runKDC, exchanges: []string{ExchangeAS}}
	tgsProtocol   = protocol{run: (*Target).runKDC, exchanges: []string{ExchangeAS, ExchangeTGS}}
)

// runKDC is the login (AS exchange, which becomes the TGT), then, when
// the module names a service, a TGS exchange with the newest valid TGT.
func (t *Target) runKDC(ctx context.Context, o *Outcome) {
	if !t.login(ctx, o) {
		if !o.Canceled && t.service != nil { // the proxy's CA did not load
			o.TGSRan = true
			o.TGSErr = noTGT(krb5.PhaseTGSRep, "no valid TGT: the login failed")
		}
		return
	}
	if t.service == nil {
		return
	}
	o.TGSRan = true
	if !t.client.HasTGT() {
		// The login failed and no earlier TGT is still good: trying again
		// inside ServiceTicket would only double the load on a failing KDC.
		o.TGSErr = noTGT(krb5.PhaseTGSRep, "no valid TGT: the login failed")
		return
	}
	tctx, cancel := context.WithTimeout(ctx, t.timeout)
	o.TGS, o.TGSErr = t.client.ServiceTicket(tctx, t.service)
	cancel()
	o.Canceled = canceled(ctx, o.TGSErr)
}

// login is the AS exchange every prober but kadmin starts with, after
// the proxy's CA (proxy.go) over transport https. It reports whether the
// probe goes on: not when the CA did not load (o.ASErr says why) nor
// when ctx was cancelled; a failed login goes on, to say what it denied.
func (t *Target) login(ctx context.Context, o *Outcome) bool {
	if o.ASErr = t.refreshCA(); o.ASErr != nil {
		return false
	}
	actx, cancel := context.WithTimeout(ctx, t.timeout)
	o.AS, o.ASErr = t.client.Login(actx)
	cancel()
	o.Canceled = canceled(ctx, o.ASErr)
	return !o.Canceled
}

// noTGT is the error of an exchange not attempted for want of a ticket.
func noTGT(phase, why string) error {
	return &krb5.Error{Class: ClassNoTGT, Phase: phase, Err: errors.New(why)}
}
