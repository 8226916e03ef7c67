// Package loadgen makes Kerberos load against a KDC with the project's
// own client engine (internal/krb5), logging in as kinit does: the as and
// tgs loads and sessions (a login, then tickets with its TGT) on raw UDP
// sockets with many requests in flight, batched system calls and one
// request cycle (udp.go); the tcp load on one epoll goroutine with a
// socket per login in flight, reconnected for each round trip (tcp.go);
// and the same loads on the engine's blocking client, a goroutine per
// client (load.go, blocking.go).
//
// Its inputs are plain (a Config: the KDC's address, a client and
// service factory, a timeout; depth, duration or count, rate) and so are
// its outputs (a Result: a record per request, the generator's waits,
// the first text of each error class, logins by pre-authentication
// method). It knows nothing of the bench's tests, targets, samplers or
// reports: package bench runs it, with Config.Measure taking the CPU
// readings around the part it measures.
package loadgen
