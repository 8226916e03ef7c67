package kdclog

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The etype refusals' spread (docs/metrics.md; alerts/runbook.md, "What
// the SLI counts"): one client offering only types the realm refuses is
// that client's choice, the same refusal to many clients at once is the
// realm's configuration. The rules tell the two apart by this gauge.
const (
	// refusedClientsCap bounds the distinct clients tracked: the gauge is
	// exact up to it and reads refusedClientsCap beyond, whatever number
	// of names an attacker sends.
	refusedClientsCap = 64
	// refusedClientsWindow is how long a refused client counts.
	refusedClientsWindow = 5 * time.Minute
)

var descEtypeRefused = prometheus.NewDesc("krb5_kdc_etype_refused_clients",
	"Distinct client principals answered BAD_ENCRYPTION_TYPE in the last 5 minutes (probe principals excluded), exact up to 64, then 64.",
	nil, nil)

// refusedClients is the set of the clients refused an etype lately: their
// hashed names and when each was last refused. It keeps the
// refusedClientsCap most recently refused, which is all a count capped at
// refusedClientsCap needs: any of them refused again, or a newer one,
// replaces the oldest.
type refusedClients struct {
	mu   sync.Mutex
	seed maphash.Seed
	n    int
	hash [refusedClientsCap]uint64
	last [refusedClientsCap]time.Time
}

func newRefusedClients() *refusedClients {
	return &refusedClients{seed: maphash.MakeSeed()}
}

// observe records that client was refused an etype at now.
func (r *refusedClients) observe(client []byte, now time.Time) {
	h := maphash.Bytes(r.seed, client)
	r.mu.Lock()
	defer r.mu.Unlock()
	oldest := 0
	for i := range r.n {
		if r.hash[i] == h {
			r.last[i] = now
			return
		}
		if r.last[i].Before(r.last[oldest]) {
			oldest = i
		}
	}
	if r.n < refusedClientsCap {
		oldest = r.n
		r.n++
	}
	r.hash[oldest], r.last[oldest] = h, now
}

// count is the number of distinct clients refused within the window
// before now, at most refusedClientsCap.
func (r *refusedClients) count(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := 0
	for i := range r.n {
		if now.Sub(r.last[i]) < refusedClientsWindow {
			c++
		}
	}
	return c
}
