package prober

import (
	"context"

	"github.com/krb5-exporter/krb5-exporter/internal/kadmrpc"
)

// kadminProtocol is the kadmin prober: one unauthenticated call to
// kadmind's admin RPC (internal/kadmrpc), no login.
var kadminProtocol = protocol{run: (*Target).runKadmin, exchanges: []string{ExchangeKadminRPC}}

// runKadmin is the RPC call to kadmind, bounded by the module's timeout.
func (t *Target) runKadmin(ctx context.Context, o *Outcome) {
	o.RPCRan = true
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	o.RPC, o.RPCErr = kadmrpc.Ping(rctx, &t.dialer, t.admin)
	cancel()
	o.Canceled = canceled(ctx, o.RPCErr)
}
