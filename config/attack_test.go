package config

import (
	"strings"
	"testing"
	"time"
)

// TestAttackSignals: the section's values are checked and a bad one is
// named with its file and line; absent values take the defaults.
func TestAttackSignals(t *testing.T) {
	c, err := Parse([]byte("attack_signals:\n  top_k: 5\n  window: 1m\n"), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	d := c.AttackSignals.WithDefaults()
	if d.TopK != 5 || d.Window != time.Minute || d.RecoveryWait != DefaultAttackRecoveryWait || d.SprayingPrincipals != DefaultSprayingPrincipals {
		t.Errorf("with defaults: %+v", d)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"attack_signals:\n  top_k: 101\n", "c.yml:2: attack_signals.top_k: must be between 1 and 100, got 101"},
		{"attack_signals:\n  top_k: 3\n  window: 10ms\n", "c.yml:3: attack_signals.window: must be between 1s and 24h"},
		{"attack_signals:\n  window: 1m\n  recovery_wait: 2m\n", "c.yml:3: attack_signals.recovery_wait: must be positive and at most the window (1m0s)"},
		{"attack_signals:\n  window: 2s\n", "attack_signals.recovery_wait: must be positive and at most the window (2s), got 5s (the default when unset)"},
		{"attack_signals:\n\n  spraying_principals: -1\n", "c.yml:3: attack_signals.spraying_principals: must be between 1 and 500, got -1"},
		{"attack_signals:\n  kerberoasting_rc4_services: 501\n", "c.yml:2: attack_signals.kerberoasting_rc4_services"},
		{"attack_signals:\n  tracked_offenders: 100\n", "c.yml:2: attack_signals.tracked_offenders: must be between 1024 and 1048576, got 100"},
		{"attack_signals:\n  top: 3\n", `c.yml:2: unknown key "top"`},
	} {
		_, err := Parse([]byte(tc.yaml), "c.yml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
