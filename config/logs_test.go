package config

import (
	"strings"
	"testing"
	"time"
)

func TestLogSources(t *testing.T) {
	cfg, err := Parse([]byte(`
logs:
  - path: /var/log/krb5kdc.log
    type: kdc
    start_at: beginning
    probe_principals: [krb5-exporter-probe@EXAMPLE.COM, synthetic]
    poll_interval: 250ms
    rotate_wait: 1m
  - path: /var/log/kadmind.log
    type: kadmind
  - path: /var/log/auth.log
    type: any
`), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Logs) != 3 {
		t.Fatalf("%d log sources", len(cfg.Logs))
	}
	k := cfg.Logs[0]
	if !k.FromBeginning() || k.Poll() != 250*time.Millisecond || k.RotationWait() != time.Minute || len(k.ProbePrincipals) != 2 {
		t.Errorf("kdc source: %+v", k)
	}
	a := cfg.Logs[1]
	if a.FromBeginning() || a.Poll() != DefaultLogPollInterval || a.RotationWait() != DefaultLogRotateWait {
		t.Errorf("defaults: %+v", a)
	}
}

func TestLogSourceErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"logs:\n  - type: kdc\n", "test.yml:2: logs.0.path: path is required"},
		{"logs:\n  - path: /x\n", `type is required`},
		{"logs:\n  - path: /x\n    type: heimdal\n", `test.yml:3: logs.0.type: type "heimdal": must be "kdc", "kadmind", "any" or "kpropd"`},
		{"logs:\n  - path: /x\n    type: kdc\n    start_at: middle\n", `start_at "middle"`},
		{"logs:\n  - path: /x\n    type: kdc\n    probe_principals: [\"a b@R\"]\n", "contains a space"},
		{"logs:\n  - path: /x\n    type: kdc\n    probe_principals: [\"@R\"]\n", "want name@REALM or name"},
		{"logs:\n  - path: /x\n    type: kdc\n    probe_principals: [p, p]\n", "listed twice"},
		{"logs:\n  - path: /x\n    type: kdc\n    poll_interval: 1ms\n", "between 10ms and 1m"},
		{"logs:\n  - path: /x\n    type: kdc\n    rotate_wait: -1s\n", "between 0 and 1h"},
		{"logs:\n  - path: /x\n    type: kdc\n  - path: /x\n    type: kadmind\n", "listed twice"},
		{"logs:\n  - path: /x\n    type: kdc\n    severity: high\n", `unknown key "severity"`},
		{"logs:\n  - path: /x\n    type: kdc\n    poll_interval: soon\n", "test.yml:4"},
	} {
		_, err := Parse([]byte(c.yaml), "test.yml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.yaml, err, c.want)
		}
	}
}
