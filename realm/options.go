package realm

import (
	"fmt"
	"regexp"

	"github.com/krb5-exporter/krb5-exporter/internal/enctype"
)

// RHEL9Enctypes are the encryption types a RHEL 9 KDC gives every
// principal by default, strongest first.
var RHEL9Enctypes = func() []string {
	var names []string
	for _, id := range enctype.RHEL9 {
		names = append(names, enctype.Name(id))
	}
	return names
}()

// Options describe the realm to create. The zero value of every field but
// Dir gives the seed's test realm: PERF.TEST, 1,000 users, 100 services,
// 10,000 filler principals, a single-process KDC, SPAKE, last-success
// writes on.
type Options struct {
	// Dir holds everything the realm writes; it must be absent or empty.
	Dir string `json:"dir"`
	// Realm and Domain default to PERF.TEST and perf.test.
	Realm  string `json:"realm"`
	Domain string `json:"domain"`
	// Users, Services and Fillers are principal counts; negative means none
	// and zero means the seed's default (1,000 / 100 / 10,000).
	Users    int `json:"users"`
	Services int `json:"services"`
	Fillers  int `json:"fillers"`
	// Workers > 0 starts krb5kdc -w Workers (a supervisor and N workers).
	Workers int `json:"workers"`
	// DisableLastSuccess stops the KDC writing (and fsyncing) the time of
	// every successful login to the database.
	DisableLastSuccess bool `json:"disable_last_success"`
	// NoSPAKE leaves spake_preauth_groups unset: encrypted timestamp only.
	NoSPAKE bool `json:"no_spake"`
	// Enctypes overrides RHEL9Enctypes for supported_enctypes.
	Enctypes []string `json:"enctypes,omitempty"`
	// KDCPort and KadmindPort pin the ports; zero picks free ones.
	KDCPort     int `json:"kdc_port"`
	KadmindPort int `json:"kadmind_port"`
	// NoKadmind skips starting kadmind (the KDC alone is enough for most
	// tests and saves a process).
	NoKadmind bool `json:"no_kadmind"`
	// LogToSyslog runs the KDC the Debian way: kdc.conf without a
	// [logging] section, so krb5kdc and kadmind log through syslog; the
	// daemons run in a private mount namespace whose /dev/log the harness
	// serves, writing each message as a journal entry into JournalDir
	// (systemd-journal-remote), as journald would.
	LogToSyslog bool `json:"log_to_syslog"`
	// SyslogSocket, with LogToSyslog, is the socket the daemons' /dev/log
	// names instead of the harness's relay: a real journald's (a test's
	// private one, internal/journaldtest). JournalDir is then not written.
	SyslogSocket string `json:"syslog_socket,omitempty"`
	// KDCProxy also serves the KDC through a KDC proxy ([MS-KKDCP]):
	// python3-kdcproxy under gunicorn over TLS on KDCProxyPort (zero picks
	// a free one), with a throwaway CA in Dir.
	KDCProxy     bool `json:"kdc_proxy"`
	KDCProxyPort int  `json:"kdc_proxy_port"`
	// SyslogRelay, if set, is the command that serves the syslog socket in
	// a process of its own (the CLI: `krb5-exporter realm syslog-relay
	// --dir D`); otherwise this process serves it until Down.
	SyslogRelay []string `json:"syslog_relay,omitempty"`
	// Trust, if set, is the name of a second realm Up creates in the
	// subdirectory trust/ with a two-way trust to this one (Trust): one
	// service principal and the probe principal, its own KDC on loopback,
	// no kadmind.
	Trust string `json:"trust,omitempty"`
	// MovableClock runs krb5kdc under libfaketime (Debian's faketime
	// package) reading its clock's offset from a file, so that
	// MoveKDCClock steps the running KDC's clock: a clock step, without
	// the restart (and its refused requests) of RestartKDCShifted.
	MovableClock bool `json:"movable_clock,omitempty"`
}

var realmName = regexp.MustCompile(`^[A-Z0-9][A-Z0-9.-]*$`)

func count(n, def int) int {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return def
	}
	return n
}

// withDefaults fills in defaults and checks what would break the KDC later
// with a less helpful message.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, fmt.Errorf("realm: a directory is required")
	}
	if o.Realm == "" {
		o.Realm = "PERF.TEST"
	}
	if !realmName.MatchString(o.Realm) {
		return o, fmt.Errorf("realm: %q is not an upper-case realm name", o.Realm)
	}
	if o.Domain == "" {
		o.Domain = "perf.test"
	}
	o.Users = count(o.Users, 1000)
	o.Services = count(o.Services, 100)
	o.Fillers = count(o.Fillers, 10000)
	if o.Workers < 0 {
		return o, fmt.Errorf("realm: workers must be >= 0, got %d", o.Workers)
	}
	if len(o.Enctypes) == 0 {
		o.Enctypes = RHEL9Enctypes
	}
	if o.Trust != "" && (!realmName.MatchString(o.Trust) || o.Trust == o.Realm) {
		return o, fmt.Errorf("realm: trusted realm %q: want an upper-case realm name other than %s", o.Trust, o.Realm)
	}
	if o.MovableClock {
		if _, err := fakeTimeLib(); err != nil {
			return o, err
		}
	}
	for _, p := range []int{o.KDCPort, o.KadmindPort, o.KDCProxyPort} {
		if p < 0 || p > 65535 {
			return o, fmt.Errorf("realm: port %d out of range", p)
		}
	}
	return o, nil
}
