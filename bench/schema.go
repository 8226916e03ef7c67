package bench

import "github.com/krb5-exporter/krb5-exporter/bench/report"

// The report's schema is package report's; the suite fills it in.
type (
	Report      = report.Report
	Machine     = report.Machine
	SystemInfo  = report.SystemInfo
	Metric      = report.Metric
	TestResult  = report.TestResult
	Settings    = report.Settings
	Targets     = report.Targets
	Startup     = report.Startup
	Memory      = report.Memory
	Concurrency = report.Concurrency
	TCP         = report.TCP
	Kadmin      = report.Kadmin
	KadminBatch = report.KadminBatch
	Dump        = report.Dump
	Degradation = report.Degradation
	Load        = report.Load
	OpenLoop    = report.OpenLoop
	Latency     = report.Latency
	Sample      = report.Sample
	CPUUse      = report.CPUUse
	record      = report.Record
)

// Verdicts of a metric and of a report.
const (
	Pass = report.Pass
	Fail = report.Fail
)
