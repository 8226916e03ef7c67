package bench

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// The settings are the defaults, then the file's, then the flags given:
// a flag left out keeps the file's value, a flag given replaces it.
func TestFlagsOverConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.yml")
	if err := os.WriteFile(path, []byte("clients: 3\nduration: 7s\noutput_dir: out\ntargets: {as_min_rate: 5, tgs_min_rate: 7}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) Config {
		t.Helper()
		app := kingpin.New("bench", "")
		f := RegisterFlags(app, ":1")
		if _, err := app.Parse(args); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.Config()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return cfg
	}
	def := Defaults()
	cfg := parse("--config.file", path, "--duration", "2s", "--client-levels", "1, 4", "--target.as-min-rate", "9")
	if cfg.Clients != 3 || cfg.OutputDir != "out" || cfg.Duration.Seconds() != 2 || !slices.Equal(cfg.ClientLevels, []int{1, 4}) ||
		cfg.Targets.ASMinRate != 9 || cfg.Targets.TGSMinRate != 7 || cfg.LoginRate != def.LoginRate {
		t.Errorf("file and flags: clients %d, output %q, duration %s, levels %v, as-min-rate %g, tgs-min-rate %g, login rate %g",
			cfg.Clients, cfg.OutputDir, cfg.Duration, cfg.ClientLevels, cfg.Targets.ASMinRate, cfg.Targets.TGSMinRate, cfg.LoginRate)
	}
	cfg = parse("--clients", "6")
	if cfg.Clients != 6 || cfg.OutputDir != "results" || cfg.Duration != def.Duration {
		t.Errorf("flags alone: clients %d, output %q, duration %s", cfg.Clients, cfg.OutputDir, cfg.Duration)
	}
}
