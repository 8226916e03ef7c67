package config

import (
	"fmt"
	"time"
)

// AttackSignals configure the attack signals read from the KDC log
// (package kdclog/attack): how many offenders are kept, the window the
// per-offender counts run over, and the thresholds at which an offender
// counts as a detection. Zero values take the defaults below.
//
//	attack_signals:
//	  top_k: 10
//	  window: 10m
//	  spraying_principals: 10
type AttackSignals struct {
	// Disabled turns the detector off (no attack series, no cost).
	Disabled bool `yaml:"disabled"`
	// FollowLogins turns on AS-REP roasting: every AS request is checked
	// for a pre-authentication step before its ISSUE. Off, only failures
	// cost anything.
	FollowLogins bool `yaml:"follow_logins"`
	// FollowServiceTickets counts every service ticket's service for
	// Kerberoasting, not only RC4 ones.
	FollowServiceTickets bool `yaml:"follow_service_tickets"`
	// TopK is how many offenders each signal exports: those with the
	// highest scores in the window.
	TopK int `yaml:"top_k"`
	// TrackedOffenders is how many offenders each signal counts exactly
	// in a window (every one up to it, whatever else the window holds),
	// with up to eight times as many distinct principals or services
	// among them. Memory grows with what the window holds up to
	// kdclog/attack.MaxBytes: about 47 MiB for the five signals at the
	// default (docs/metrics.md, "Attack signals").
	TrackedOffenders int `yaml:"tracked_offenders"`
	// Window is the tumbling window the per-offender counts run over.
	Window time.Duration `yaml:"window"`
	// RecoveryWait is how long a PREAUTH_FAILED waits for an ISSUE of the
	// same client and address (a SPAKE group fallback, a retyped
	// password) before it counts as a wrong password.
	RecoveryWait time.Duration `yaml:"recovery_wait"`
	// SprayingPrincipals: distinct principals one address failed for.
	SprayingPrincipals int `yaml:"spraying_principals"`
	// BruteForceFailures: wrong passwords for one principal.
	BruteForceFailures int `yaml:"brute_force_failures"`
	// EnumerationPrincipals: distinct unknown principals one address asked for.
	EnumerationPrincipals int `yaml:"enumeration_principals"`
	// KerberoastingServices: distinct services one client got tickets for;
	// KerberoastingRC4Services: the same with an RC4 ticket or reply.
	KerberoastingServices    int `yaml:"kerberoasting_services"`
	KerberoastingRC4Services int `yaml:"kerberoasting_rc4_services"`
	// ASREPRoastingPrincipals: distinct principals one address got a
	// ticket for without pre-authentication.
	ASREPRoastingPrincipals int `yaml:"asrep_roasting_principals"`
}

// Defaults and limits of AttackSignals.
const (
	DefaultAttackTopK          = 10
	MaxAttackTopK              = 100
	DefaultTrackedOffenders    = 114688 // 7/8 of 2^17: the tables' fullest at a power of two
	MinTrackedOffenders        = 1024
	MaxTrackedOffenders        = 1 << 20
	DefaultAttackWindow        = 10 * time.Minute
	DefaultAttackRecoveryWait  = 5 * time.Second
	MaxAttackThreshold         = 500
	DefaultSprayingPrincipals  = 10
	DefaultBruteForceFailures  = 10
	DefaultEnumerationPrincs   = 10
	DefaultKerberoastServices  = 25
	DefaultKerberoastRC4       = 3
	DefaultASREPRoastingPrincs = 1
)

// WithDefaults returns a with its zero values replaced by the defaults.
func (a AttackSignals) WithDefaults() AttackSignals {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&a.TopK, DefaultAttackTopK)
	def(&a.TrackedOffenders, DefaultTrackedOffenders)
	def(&a.SprayingPrincipals, DefaultSprayingPrincipals)
	def(&a.BruteForceFailures, DefaultBruteForceFailures)
	def(&a.EnumerationPrincipals, DefaultEnumerationPrincs)
	def(&a.KerberoastingServices, DefaultKerberoastServices)
	def(&a.KerberoastingRC4Services, DefaultKerberoastRC4)
	def(&a.ASREPRoastingPrincipals, DefaultASREPRoastingPrincs)
	if a.Window == 0 {
		a.Window = DefaultAttackWindow
	}
	if a.RecoveryWait == 0 {
		a.RecoveryWait = DefaultAttackRecoveryWait
	}
	return a
}

// Validate checks the values given (zero means the default).
func (a *AttackSignals) Validate() error {
	if a.TopK < 0 || a.TopK > MaxAttackTopK {
		return fieldErr(fmt.Sprintf("must be between 1 and %d, got %d", MaxAttackTopK, a.TopK), "top_k")
	}
	if a.TrackedOffenders != 0 && (a.TrackedOffenders < MinTrackedOffenders || a.TrackedOffenders > MaxTrackedOffenders) {
		return fieldErr(fmt.Sprintf("must be between %d and %d, got %d", MinTrackedOffenders, MaxTrackedOffenders, a.TrackedOffenders), "tracked_offenders")
	}
	if a.Window < 0 || a.Window != 0 && (a.Window < time.Second || a.Window > 24*time.Hour) {
		return fieldErr(fmt.Sprintf("must be between 1s and 24h, got %s", a.Window), "window")
	}
	d := a.WithDefaults()
	if a.RecoveryWait < 0 || d.RecoveryWait > d.Window {
		return fieldErr(fmt.Sprintf("must be positive and at most the window (%s), got %s (the default when unset)", d.Window, d.RecoveryWait), "recovery_wait")
	}
	for _, t := range []struct {
		key string
		v   int
	}{
		{"spraying_principals", a.SprayingPrincipals},
		{"brute_force_failures", a.BruteForceFailures},
		{"enumeration_principals", a.EnumerationPrincipals},
		{"kerberoasting_services", a.KerberoastingServices},
		{"kerberoasting_rc4_services", a.KerberoastingRC4Services},
		{"asrep_roasting_principals", a.ASREPRoastingPrincipals},
	} {
		if t.v < 0 || t.v > MaxAttackThreshold {
			return fieldErr(fmt.Sprintf("must be between 1 and %d, got %d", MaxAttackThreshold, t.v), t.key)
		}
	}
	return nil
}
