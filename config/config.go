// Package config holds the YAML configuration file of krb5-exporter: probe
// modules and targets, and the log files to follow. Decoding is strict: an
// unknown key or a value of the wrong type is an error that names the file,
// the line and the key, so a typo never silently disables a probe.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// Config is the whole configuration file. Every section is optional: an
// empty file is a valid configuration (the host collectors need none).
type Config struct {
	// Modules are named probe settings (realm, principal, credentials);
	// used by continuous probes and by /probe?module=NAME.
	Modules map[string]ProbeModule `yaml:"modules"`
	// Probes are the KDCs probed continuously by the daemon.
	Probes []ProbeTarget `yaml:"probes"`
	// Logs are the KDC and kadmind log files turned into request counters.
	Logs []LogSource `yaml:"logs"`
	// AttackSignals tune the attack signals read from the KDC logs.
	AttackSignals AttackSignals `yaml:"attack_signals"`

	// keyFileErrs are the modules' key files that did not pass
	// CheckKeyFile in LoadDeferringKeys, by module.
	keyFileErrs map[string]error
}

// FieldError is a validation error at a path of keys in the file
// (for example modules, default, timeout), resolved to a line on load.
type FieldError struct {
	Path []string
	Msg  string
}

func (e *FieldError) Error() string {
	path := make([]string, len(e.Path))
	for i, p := range e.Path {
		if checkName("", p) != nil { // a map key: shown escaped, as checkName's own error does
			p = strconv.Quote(p)
		}
		path[i] = p
	}
	return fmt.Sprintf("%s: %s", strings.Join(path, "."), e.Msg)
}

// fieldErr builds a FieldError; path elements are keys or sequence indexes.
func fieldErr(msg string, path ...string) *FieldError {
	return &FieldError{Path: path, Msg: msg}
}

// Validate checks values that YAML types cannot express and cross
// references between sections, and reads the modules' key files.
func (c *Config) Validate() error { return c.validate(true) }

func (c *Config) validate(keyFiles bool) error {
	for name, m := range c.Modules {
		if err := checkName("module name", name); err != nil {
			return fieldErr(err.Error(), "modules", name)
		}
		if err := m.Validate(); err != nil {
			return prefix(err, "modules", name)
		}
		if !keyFiles {
			continue
		}
		if err := m.CheckKeyFile(); err != nil {
			return prefix(err, "modules", name)
		}
		if err := m.CheckProxyCA(); err != nil {
			return prefix(err, "modules", name)
		}
	}
	names := map[string]bool{}
	for i, p := range c.Probes {
		if err := p.Validate(); err != nil {
			return prefix(err, "probes", strconv.Itoa(i))
		}
		if names[p.Name] {
			return fieldErr(fmt.Sprintf("duplicate probe name %q", p.Name), "probes", strconv.Itoa(i), "name")
		}
		names[p.Name] = true
		m, ok := c.Modules[p.Module]
		if !ok {
			return fieldErr(fmt.Sprintf("unknown module %q", p.Module), "probes", strconv.Itoa(i), "module")
		}
		if https := strings.HasPrefix(p.Address, "https://"); https != (m.Transport == "https") {
			msg := fmt.Sprintf("address %q is a URL: module %q must be of transport https", p.Address, p.Module)
			if !https {
				msg = fmt.Sprintf("module %q is of transport https: the address must be the proxy's https:// URL", p.Module)
			}
			return fieldErr(msg, "probes", strconv.Itoa(i), "address")
		}
	}
	for i, l := range c.Logs {
		if err := l.Validate(); err != nil {
			return prefix(err, "logs", strconv.Itoa(i))
		}
	}
	if err := c.AttackSignals.Validate(); err != nil {
		return prefix(err, "attack_signals")
	}
	return checkLogFiles(c.Logs)
}

// checkName refuses control and format characters (ESC, CR, C1, bidi
// overrides) in a name that becomes a label value or a line of top: they
// would rewrite the terminal or the page that shows it.
func checkName(what, s string) error {
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%s %q contains the control character %U", what, s, r)
		}
	}
	return nil
}

// prefix puts path in front of a section's own error path.
func prefix(err error, path ...string) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Path: append(append([]string{}, path...), fe.Path...), Msg: fe.Msg}
	}
	return &FieldError{Path: path, Msg: err.Error()}
}

// MaxFileSize bounds the configuration file: thousands of modules, probes
// and logs fit in far less, and /dev/zero given by mistake must not fill
// the memory.
const MaxFileSize = 4 << 20

// Load reads, strictly decodes and validates a configuration file: a
// regular file (a FIFO is an error, not a hang) of at most MaxFileSize.
func Load(path string) (*Config, error) { return load(path, true) }

// LoadDeferringKeys is Load where a module's keytab or password file
// that does not pass ProbeModule.CheckKeyFile does not fail the load: the
// finding is kept for that module (KeyFileError). The daemon's: its probes
// check and load the file themselves and fail with result="keytab" while
// it does not load. Keytabs are provisioned and rotated apart from the exporter:
// one module's must not keep the host collectors and log counters from
// starting, nor a reload from applying.
func LoadDeferringKeys(path string) (*Config, error) { return load(path, false) }

func load(path string, keyFiles bool) (*Config, error) {
	data, _, err := safefile.ReadFile(path, MaxFileSize, 0)
	if err != nil {
		return nil, err
	}
	return parse(data, path, keyFiles)
}

// Parse decodes and validates data; name is used in error messages.
func Parse(data []byte, name string) (*Config, error) { return parse(data, name, true) }

func parse(data []byte, name string, keyFiles bool) (*Config, error) {
	cfg := &Config{}
	if err := Decode(data, name, cfg); err != nil {
		return nil, err
	}
	if err := cfg.validate(keyFiles); err != nil {
		return nil, atLine(data, name, err)
	}
	if !keyFiles {
		for mname, m := range cfg.Modules {
			if err := m.CheckKeyFile(); err != nil {
				if cfg.keyFileErrs == nil {
					cfg.keyFileErrs = map[string]error{}
				}
				cfg.keyFileErrs[mname] = atLine(data, name, prefix(err, "modules", mname))
			}
		}
	}
	return cfg, nil
}

// KeyFileError is why the module's keytab or password file did not pass
// CheckKeyFile when LoadDeferringKeys read the configuration, with the
// file and line of the module's keytab or password_file (never the key
// file's path); nil when it passed or was not checked.
func (c *Config) KeyFileError(module string) error { return c.keyFileErrs[module] }

// atLine puts the file and, for a FieldError, the line in front of err.
func atLine(data []byte, name string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		var root yaml.Node
		if yaml.Unmarshal(data, &root) == nil {
			if line := lineOf(&root, fe.Path); line > 0 {
				return fmt.Errorf("%s:%d: %s", name, line, fe.Error())
			}
		}
	}
	return fmt.Errorf("%s: %w", name, err)
}

// Decode strictly decodes data, one YAML document, onto v (its values are
// the defaults): an unknown key, a value of the wrong type or a second
// document is an error naming name and the line, one "name:N: ..." per
// problem. Every configuration file of the project is read with it.
func Decode(data []byte, name string, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return yamlError(name, err)
	}
	// A second document (after ---) would be silently ignored.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return fmt.Errorf("%s:%d: a second YAML document; the configuration is one document", name, extra.Line)
	} else if !errors.Is(err, io.EOF) {
		return yamlError(name, err)
	}
	return nil
}

var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// yamlError rewrites yaml.v3's "yaml: unmarshal errors: line N: ..." into
// one "file:N: ..." per problem, the form editors and CI logs link to.
func yamlError(name string, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			return fmt.Errorf("%s:%s: %s", name, m[1], m[2])
		}
		return fmt.Errorf("%s: %s", name, msg)
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := yamlLine.FindStringSubmatch(e); m != nil {
			e = fmt.Sprintf("%s:%s: %s", name, m[1], friendlier(m[2]))
		} else {
			e = fmt.Sprintf("%s: %s", name, e)
		}
		msgs = append(msgs, e)
	}
	return errors.New(strings.Join(msgs, "; "))
}

var unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)

func friendlier(msg string) string {
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("unknown key %q", m[1])
	}
	return msg
}

// lineOf finds the line of the node at path (mapping keys and sequence
// indexes); it returns the deepest line it could reach.
func lineOf(root *yaml.Node, path []string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, p := range path {
		switch n.Kind {
		case yaml.MappingNode:
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
			if !found {
				return line
			}
		case yaml.SequenceNode:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
		default:
			return line
		}
	}
	return line
}
