// Package bench is the KDC test suite of the seed document
// (000_kdc-performance-metrics.md) in Go: startup, as, tgs, latency,
// concurrency, tcp, kadmin, dump, cpu, memory and degradation, each with a
// target and a PASS/FAIL verdict, against a System (an ephemeral harness
// realm or an existing one), producing a Report that package report
// (bench/report, which imports nothing of bench) writes out as report.md,
// report.json, raw CSVs, report.html and a node_exporter textfile.
//
// The load comes from package loadgen (internal/loadgen, which imports
// nothing of bench): the project's own Kerberos client engine, logging in
// as kinit does (SPAKE when the KDC offers it); for as, tgs and the
// concurrency levels one goroutine per 64 requests in flight (at most one
// per CPU) with many requests in flight per raw socket, batched system
// calls and a wake-up per half its requests; the latency and degradation
// sessions (a login, then tickets with its TGT) on the same UDP request
// cycle on one goroutine and one socket (the open loop without batching
// waits); tcp on one goroutine with a socket per login in flight,
// reconnected for each round trip. The suite gives it the system's users
// and services, samples the KDC around each load, and the report
// puts the generator's CPU per request next to the KDC's so a reader can
// see when the generator, not the KDC, was the limit.
package bench
