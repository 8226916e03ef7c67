package bench

import (
	"context"
	"fmt"
)

// System is the KDC under test and what the suite may do to it. Tests that
// need a missing piece are reported as skipped with the reason.
type System struct {
	Realm  string
	KDC    string // host:port, UDP and TCP
	Domain string // of the service principals HTTP/webNNNN.<Domain>

	// UserKeytab holds the keys of Users load-test users named UserName(i),
	// i = 1..Users; Services are named ServiceName(i), i = 1..Services.
	UserKeytab  string
	Users       int
	Services    int
	UserName    func(i int) string
	ServiceName func(i int) string

	// Env is the environment of the MIT tools the suite runs (kadmin,
	// kdb5_util): KRB5_CONFIG, KRB5_KDC_PROFILE.
	Env []string

	// KDCPids lists the krb5kdc processes (supervisor and workers) for the
	// CPU and memory samples; nil when the KDC runs elsewhere.
	KDCPids func() []int
	// KDCLog is the KDC's log file (log bytes per request); optional.
	KDCLog string

	// StopKDC and StartKDC (startup test); StartKDC returns once the KDC
	// serves or fails.
	StopKDC  func() error
	StartKDC func(ctx context.Context) error

	// Kadmin: remote kadmin to kadmind with the admin keytab.
	KadminAddr     string
	AdminPrincipal string
	AdminKeytab    string
	// AllowWrites permits the tests that change the realm (kadmin,
	// startup); an ephemeral realm always allows them.
	AllowWrites bool

	// DumpCommand is kdb5_util with its arguments before "dump FILE"
	// (e.g. ["kdb5_util", "-r", "PERF.TEST"]); nil skips the dump test.
	DumpCommand []string

	// Recorded in the report: what decides the numbers.
	Settings map[string]string
}

func (s *System) validate() error {
	if s.Realm == "" || s.KDC == "" {
		return fmt.Errorf("bench: the system under test needs a realm and a KDC address")
	}
	if s.UserName == nil {
		s.UserName = func(i int) string { return fmt.Sprintf("user%04d", i) }
	}
	if s.ServiceName == nil {
		s.ServiceName = func(i int) string { return fmt.Sprintf("HTTP/web%04d.%s", i, s.Domain) }
	}
	return nil
}
