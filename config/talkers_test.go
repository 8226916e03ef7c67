package config

import (
	"strings"
	"testing"
	"time"
)

// TestTopTalkers: the section's values are checked and a bad one is
// named with its file and line; absent values take the defaults.
func TestTopTalkers(t *testing.T) {
	c, err := Parse([]byte("top_talkers:\n  top_k: 5\n"), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if d := c.TopTalkers.WithDefaults(); d.TopK != 5 || d.Window != time.Minute || d.Disabled {
		t.Errorf("with defaults: %+v", d)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"top_talkers:\n  top_k: 101\n", "c.yml:2: top_talkers.top_k: must be between 1 and 100, got 101"},
		{"top_talkers:\n  top_k: -1\n", "c.yml:2: top_talkers.top_k: must be between 1 and 100, got -1"},
		{"top_talkers:\n  top_k: 3\n  window: 1s\n", "c.yml:3: top_talkers.window: must be between 5s and 1h0m0s, got 1s"},
		{"top_talkers:\n  window: 2h\n", "c.yml:2: top_talkers.window: must be between 5s and 1h0m0s, got 2h0m0s"},
		{"top_talkers:\n  k: 3\n", `c.yml:2: unknown key "k"`},
	} {
		_, err := Parse([]byte(tc.yaml), "c.yml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
