package config

import (
	"fmt"
	"time"
)

// TopTalkers configure the top talkers read from the KDC log (package
// kdclog/talkers): who sends the KDC its requests, by client address,
// client principal and service, counted over a tumbling window. Zero
// values take the defaults below.
//
//	top_talkers:
//	  top_k: 10
//	  window: 1m
type TopTalkers struct {
	// Disabled turns the top talkers off (no series, no cost).
	Disabled bool `yaml:"disabled"`
	// TopK is how many names of each kind are exported.
	TopK int `yaml:"top_k"`
	// Window is the tumbling window the counts run over, aligned to the
	// clock (multiples of it since the epoch), so that the exporters of
	// several KDCs count over the same minutes.
	Window time.Duration `yaml:"window"`
}

// Defaults and limits of TopTalkers.
const (
	DefaultTopTalkersK      = 10
	MaxTopTalkersK          = 100
	DefaultTopTalkersWindow = time.Minute
	MinTopTalkersWindow     = 5 * time.Second
	MaxTopTalkersWindow     = time.Hour
)

// WithDefaults returns t with its zero values replaced by the defaults.
func (t TopTalkers) WithDefaults() TopTalkers {
	if t.TopK == 0 {
		t.TopK = DefaultTopTalkersK
	}
	if t.Window == 0 {
		t.Window = DefaultTopTalkersWindow
	}
	return t
}

// Validate checks the values given (zero means the default).
func (t *TopTalkers) Validate() error {
	if t.TopK < 0 || t.TopK > MaxTopTalkersK {
		return fieldErr(fmt.Sprintf("must be between 1 and %d, got %d", MaxTopTalkersK, t.TopK), "top_k")
	}
	if t.Window < 0 || t.Window != 0 && (t.Window < MinTopTalkersWindow || t.Window > MaxTopTalkersWindow) {
		return fieldErr(fmt.Sprintf("must be between %s and %s, got %s", MinTopTalkersWindow, MaxTopTalkersWindow, t.Window), "window")
	}
	return nil
}
