// Package dashboards builds krb5-exporter's Grafana dashboards as code with
// the Grafana Foundation SDK. The JSON they render to is committed next to
// this file (one .json per dashboard) for import into Grafana; `go run
// ./dashboards/gen` writes it again, and a test fails while the committed
// files differ from what the code renders.
package dashboards
