package attack

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// TestSpreadAcrossAddresses: principals failing from many addresses,
// each address below every per-address threshold, are counted across
// all of them, each once a window: 300 principals from 300 addresses
// with one user's 40 typos beside read 301; unknown principals likewise;
// the next window counts them again; beyond ExactDistinct the
// HyperLogLog stays within 5 % of the truth the test sent.
func TestSpreadAcrossAddresses(t *testing.T) {
	f := newFeeder(config.AttackSignals{})
	for i := range 300 {
		addr := fmt.Sprintf("127.0.%d.%d", i>>8, i&255)
		f.as(OutcomeWrongKey, user(i), addr)
		f.as(OutcomeUnknownClient, fmt.Sprintf("nobody%d@PERF.TEST", i), addr)
	}
	for range 40 {
		f.as(OutcomeWrongKey, "typist@PERF.TEST", "10.0.0.1")
	}
	f.wait(config.DefaultAttackRecoveryWait)
	s := f.snap()
	if s.Principals != [NumSpreads]uint64{301, 300} || s.Detections[PasswordSpraying] != 0 || s.Detections[UserEnumeration] != 0 {
		t.Errorf("principals %v, detections %v: want [301 300] and no per-address detection", s.Principals, s.Detections)
	}
	f.wait(config.DefaultAttackWindow)
	for i := range 5 {
		f.as(OutcomeWrongKey, user(i), "10.0.0.2")
	}
	f.wait(config.DefaultAttackRecoveryWait)
	if s := f.snap(); s.Principals[SpreadWrongPassword] != 306 {
		t.Errorf("5 of them again in the next window: %d, want 306", s.Principals[SpreadWrongPassword])
	}

	f = newFeeder(config.AttackSignals{Window: time.Hour})
	const n = 50000
	for i := range n {
		f.as(OutcomeUnknownClient, fmt.Sprintf("nobody%d@PERF.TEST", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
	}
	got := f.snap().Principals[SpreadUnknownClient]
	if math.Abs(float64(got)-n)/n > 0.05 {
		t.Errorf("%d unknown principals counted %d", n, got)
	}
	t.Logf("%d distinct unknown principals: %d", n, got)
}
