// Package alerts holds krb5-exporter's Prometheus rule files
// (<topic>.rules.yml), their promtool unit tests (tests/<topic>_test.yml)
// and the runbook the alerts link to (runbook.md). Its tests check the
// rules with promtool, keep the runbook and the rules in step, and run the
// rules in a real Prometheus against a real exporter and KDC; its one
// variable is the runbook, which the landing page serves.
package alerts

import _ "embed"

// Runbook is runbook.md: one section per alert (its heading the alert's
// name), what it means, how to confirm it, what to do.
//
//go:embed runbook.md
var Runbook []byte
