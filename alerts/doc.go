// Package alerts holds krb5-exporter's Prometheus rule files
// (<topic>.rules.yml), their promtool unit tests (tests/<topic>_test.yml)
// and the runbook the alerts link to (runbook.md). It has no code: its tests
// check the rules with promtool, keep the runbook and the rules in step,
// and run the rules in a real Prometheus against a real exporter and KDC.
package alerts
