package config

import (
	"errors"
	"time"
)

// ProbeModule says how to probe a KDC: realm, who logs in and with what.
// Secrets stay in files named here, never in a URL or a label.
type ProbeModule struct {
	Realm     string        `yaml:"realm"`
	Client    string        `yaml:"client"`
	Keytab    string        `yaml:"keytab"`
	Service   string        `yaml:"service"`
	Transport string        `yaml:"transport"`
	Timeout   time.Duration `yaml:"timeout"`
}

// Validate checks a module on its own.
func (m *ProbeModule) Validate() error {
	if m.Realm == "" {
		return fieldErr("realm is required", "realm")
	}
	if m.Client == "" {
		return fieldErr("client is required", "client")
	}
	if m.Keytab == "" {
		return errors.New("keytab is required")
	}
	return nil
}

// ProbeTarget is one KDC probed continuously.
type ProbeTarget struct {
	Name     string        `yaml:"name"`
	Address  string        `yaml:"address"`
	Module   string        `yaml:"module"`
	Interval time.Duration `yaml:"interval"`
}

// Validate checks a target on its own.
func (t *ProbeTarget) Validate() error {
	if t.Name == "" {
		return fieldErr("name is required", "name")
	}
	if t.Address == "" {
		return fieldErr("address is required", "address")
	}
	return nil
}
