// Package prober runs synthetic Kerberos probes with the internal/krb5
// engine: continuously, for each target of the configuration file (Manager:
// latency histograms, results by error class, clock offset, in
// krb5_probe_* metrics), and on demand at /probe in the manner of
// blackbox_exporter (a fresh registry per request, probe_* metrics, the
// module and target from the URL, the scrape timeout from Prometheus's
// header). A probe is one login (AS exchange) and, when the module names a
// service, one fresh service ticket (TGS exchange). A module's prober may
// instead probe kadmind: kpasswd (a login for kadmin/changepw, then a
// password-change request kadmind must refuse without changing anything)
// or kadmin (one unauthenticated call to its admin RPC, internal/kadmrpc).
// Each protocol's probe is a file of its own (kdc.go, crossrealm.go,
// kpasswd.go, kadmin.go; proxy.go for transport https); nagios.go rates
// one probe as a Nagios/Icinga check (`krb5-exporter probe`).
package prober
