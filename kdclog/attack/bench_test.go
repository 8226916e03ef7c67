package attack

import (
	"fmt"
	"hash/maphash"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// BenchmarkObserveFailures is the detector's cost of one failed login
// line: a wrong password (decided when the pending table is full) or an
// unknown principal, from one of addrs addresses for one of 5,000
// principals, a window's worth (its tables grown to what addrs needs).
//
//	taskset -c 1 go test ./kdclog/attack -run '^$' -bench ObserveFailures -count 5
func BenchmarkObserveFailures(b *testing.B) {
	for _, addrs := range []int{100, 100000} {
		b.Run(fmt.Sprintf("addrs=%d", addrs), func(b *testing.B) {
			d := New(config.AttackSignals{Window: time.Hour})
			now := t0
			d.Tick(now)
			reqs := make([]Request, 8192)
			for i := range reqs {
				client := []byte(user(i * 7919 % 5000))
				reqs[i] = Request{Outcome: OutcomeWrongKey, Client: client, Hash: maphash.Bytes(d.Seed(), client), Addr: []byte(fmt.Sprintf("10.%d.%d.%d", i*31%addrs>>16, i*31%addrs>>8&255, i*31%addrs&255))}
				if i%2 == 1 {
					reqs[i].Outcome = OutcomeUnknownClient
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if i%4096 == 0 {
					now = now.Add(time.Millisecond)
					d.Tick(now)
				}
				d.Observe(&reqs[i%len(reqs)])
			}
		})
	}
}
