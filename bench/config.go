package bench

import (
	"fmt"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// Config is the bench configuration file: the settings (as in Settings,
// at the top level) and, optionally, an existing realm to test instead of
// an ephemeral one.
type Config struct {
	Settings `yaml:",inline"`
	// OutputDir receives results/<timestamp>/ (default "results").
	OutputDir string `yaml:"output_dir"`
	// Textfile is a node_exporter textfile path for the krb5_bench_* metrics.
	Textfile string `yaml:"textfile"`
	// Realm describes an existing realm; absent means an ephemeral one.
	Realm *ExistingRealm `yaml:"realm"`
}

// ExistingRealm is a realm the bench does not own. Tests that write
// (kadmin, startup) run only with allow_writes.
type ExistingRealm struct {
	Name          string   `yaml:"name"`
	KDC           string   `yaml:"kdc"`
	Domain        string   `yaml:"domain"`
	UsersKeytab   string   `yaml:"users_keytab"`
	Users         int      `yaml:"users"`
	UserFormat    string   `yaml:"user_format"`    // fmt pattern, default "user%04d"
	Services      int      `yaml:"services"`       //
	ServiceFormat string   `yaml:"service_format"` // default "HTTP/web%04d.<domain>"
	Kadmind       string   `yaml:"kadmind"`
	AdminName     string   `yaml:"admin_principal"`
	AdminKeytab   string   `yaml:"admin_keytab"`
	Krb5Config    string   `yaml:"krb5_config"`
	KDCConf       string   `yaml:"kdc_conf"`
	KDCPidFile    string   `yaml:"kdc_pid_file"`
	KDCLog        string   `yaml:"kdc_log"`
	DumpCommand   []string `yaml:"dump_command"`
	StopCommand   []string `yaml:"stop_command"`
	StartCommand  []string `yaml:"start_command"`
	AllowWrites   bool     `yaml:"allow_writes"`
}

// LoadConfig strictly decodes a configuration file onto base (config.Decode:
// errors name the file and line, "bench.yml:3: unknown key \"clinets\"").
// The file is read as config.Load reads the daemon's: a regular file (a
// FIFO is an error, not a hang) of at most config.MaxFileSize.
func LoadConfig(path string, base Config) (Config, error) {
	data, _, err := safefile.ReadFile(path, config.MaxFileSize, 0)
	if err != nil {
		return base, err
	}
	cfg := base
	if err := config.Decode(data, path, &cfg); err != nil {
		return base, err
	}
	if err := ValidateSettings(&cfg.Settings); err != nil {
		return base, fmt.Errorf("%s: %w", path, err)
	}
	if r := cfg.Realm; r != nil && (r.Name == "" || r.KDC == "") {
		return base, fmt.Errorf("%s: realm needs at least name and kdc", path)
	}
	return cfg, nil
}
