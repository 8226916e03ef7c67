package prober

import (
	"context"
	"errors"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// kpasswdProtocol is the kpasswd prober: a login for kadmin/changepw at
// the module's KDC, then a password-change request to kadmind (the
// target) that kadmind must refuse without changing anything.
var kpasswdProtocol = protocol{run: (*Target).runKpasswd, exchanges: []string{ExchangeKpasswdAS, ExchangeKpasswd}}

// kpasswdService is the service the kpasswd prober logs in for.
var kpasswdService = krb5.Principal{Components: []string{"kadmin", "changepw"}}

// runKpasswd is the login, then the kpasswd exchange with its ticket.
func (t *Target) runKpasswd(ctx context.Context, o *Outcome) {
	if !t.login(ctx, o) {
		return
	}
	o.KpasswdRan = true
	if o.ASErr != nil {
		o.KpasswdErr = &krb5.Error{Class: ClassNoTicket, Phase: krb5.PhaseKpasswd, Err: errors.New("no kadmin/changepw ticket: the login failed")}
		return
	}
	kctx, cancel := context.WithTimeout(ctx, t.timeout)
	o.Kpasswd, o.KpasswdErr = t.client.Kpasswd(kctx, t.admin, t.client.Transport())
	cancel()
	o.Canceled = canceled(ctx, o.KpasswdErr)
}
