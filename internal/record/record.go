// Package record is what one request of a bench load is: when it started,
// how long it took, its kind and its class. The generator (internal/loadgen)
// writes records, the report (bench/report) keeps and renders them and
// bench/compare reads them back; this package imports nothing of the
// project, so the report and compare do not link the Kerberos engine
// (config's TestRecordsDoNotLinkTheEngine).
package record

import "time"

// Request kinds in records and raw CSVs.
const (
	KindAS  = "as"
	KindTGS = "tgs"
)

// ClassSuccess is the class of a request that succeeded; any other class
// is the engine's error class (krb5.ClassSuccess is this constant).
const ClassSuccess = "success"

// Record is one request: when it started or was due (from the load's
// start), how long it took, its kind and ClassSuccess or its error class.
type Record struct {
	Start   time.Duration
	Latency time.Duration
	Kind    string
	Class   string
}
