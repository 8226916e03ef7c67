package prober

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/enctype"
	"github.com/krb5-exporter/krb5-exporter/internal/kadmrpc"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcaddr"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// ModuleCredentials loads the keys a module names: its keytab (checked to hold
// a key of the client) or its password file.
func ModuleCredentials(m *config.ProbeModule) (*krb5.Credentials, error) {
	p, err := krb5.ParsePrincipal(m.Client, m.Realm)
	if err != nil {
		return nil, err
	}
	// The configuration's own check first: it refuses a file that others
	// can read (unless allow_readable_keys), which loading does not.
	if err := m.CheckKeyFile(); err != nil {
		return nil, err
	}
	if m.Keytab != "" {
		return krb5.NewKeytabCredentials(m.Keytab, p)
	}
	return krb5.NewPasswordFileCredentials(m.PasswordFile, p)
}

// PendingModuleCredentials are the credentials of a module whose file
// did not load (ModuleCredentials failed): each probe checks the file as
// ModuleCredentials does and loads it once the check passes.
func PendingModuleCredentials(m *config.ProbeModule, p krb5.Principal) *krb5.Credentials {
	return krb5.PendingCredentials(m.Keytab, m.PasswordFile, p, m.CheckKeyFile)
}

// Target is one KDC probed with one module: a Client, the prepared service
// and the time limit of each exchange. Not safe for concurrent use.
type Target struct {
	prober  string // config.ProberKDC, ProberKpasswd or ProberKadmin
	proto   protocol
	client  *krb5.Client
	service *krb5.Service
	timeout time.Duration
	ca      *proxyCA // transport https with a proxy_ca_file
	// cross is the service of another realm (realm_kdcs), reached at
	// remoteKDCs through the trust; service is nil then.
	cross      *krb5.CrossRealmService
	remoteKDCs []string
	// kadmind's address (kpasswd and kadmin probers: the target) and the
	// dialer of the RPC call.
	admin  string
	dialer net.Dialer
}

// protocol is what a probe of one kind runs and the exchanges it makes,
// one file a protocol as in blackbox_exporter's prober/: kdc.go (a login,
// and a service ticket), crossrealm.go, kpasswd.go, kadmin.go; proxy.go
// is the https transport's CA, loaded before a login.
type protocol struct {
	run       func(*Target, context.Context, *Outcome)
	exchanges []string // label values, in the order run makes them
}

// ServerAddress normalises a target address as KDCAddress does, with the
// module's default port (88, kpasswd's 464, kadmind's 749) for a bare host.
func ServerAddress(s string, m *config.ProbeModule) (string, error) {
	if err := kdcaddr.Check(s); err != nil {
		return "", err
	}
	if _, _, err := net.SplitHostPort(s); err == nil {
		return s, nil
	}
	port := m.DefaultPort()
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return netip.AddrPortFrom(a, uint16(port)).String(), nil
	}
	return net.JoinHostPort(s, strconv.Itoa(port)), nil
}

// NewTarget builds the client for a module against the KDC at addr (with
// transport https, the proxy at the URL addr; for the kpasswd and kadmin
// probers, kadmind). creds come from ModuleCredentials and may be shared
// between targets; a kadmin module needs none (nil).
func NewTarget(addr string, m *config.ProbeModule, creds *krb5.Credentials, logger log.Logger) (*Target, error) {
	t := &Target{prober: m.EffectiveProber(), timeout: m.EffectiveTimeout()}
	if t.prober != config.ProberKDC {
		a, err := ServerAddress(addr, m)
		if err != nil {
			return nil, err
		}
		t.admin = a
		if t.prober == config.ProberKadmin {
			t.proto = kadminProtocol
			return t, nil
		}
		addr = m.KDC // the kpasswd prober logs in there
	}
	tr, err := krb5.ParseTransport(m.Transport)
	if err != nil {
		return nil, err
	}
	var etypes []int32
	for _, name := range m.Enctypes {
		id, err := enctype.ParseClient(name)
		if err != nil {
			return nil, err
		}
		etypes = append(etypes, id)
	}
	o := krb5.Options{KDC: addr, Transport: tr}
	if tr == krb5.HTTPS {
		// addr is the proxy's URL. With a CA file, the pool is empty
		// until Run loads the file: nothing verifies before it does.
		roots := (*x509.CertPool)(nil)
		if m.ProxyCAFile != "" {
			roots = x509.NewCertPool()
		}
		o.KDC, o.Proxy = "", &krb5.ProxyOptions{URL: addr, RootCAs: roots, ServerName: m.ProxyServerName}
	}
	var asService krb5.Principal
	if t.prober == config.ProberKpasswd {
		asService = kpasswdService
	}
	c, err := krb5.NewClient(krb5.Options{
		KDC:              o.KDC,
		ASService:        asService,
		Transport:        tr,
		Proxy:            o.Proxy,
		Client:           creds.Principal(),
		Credentials:      creds,
		Etypes:           etypes,
		Preauth:          krb5.PreauthMode(m.Preauth),
		PreauthUpfront:   m.PreauthUpfront,
		UDPRetransmit:    m.UDPRetransmit,
		TicketLifetime:   m.EffectiveTicketLifetime(),
		MaxS2KIterations: m.MaxS2KIterations,
		Logger:           logger,
	})
	if err != nil {
		return nil, err
	}
	t.client = c
	if tr == krb5.HTTPS && m.ProxyCAFile != "" {
		t.ca = &proxyCA{mod: *m}
	}
	if m.Service != "" {
		sp, err := krb5.ParsePrincipal(m.Service, m.Realm)
		if err != nil {
			return nil, fmt.Errorf("service: %w", err)
		}
		if m.CrossRealm() {
			if t.cross, err = c.PrepareCrossRealm(sp); err != nil {
				return nil, fmt.Errorf("service: %w", err)
			}
			t.remoteKDCs = append([]string(nil), m.RemoteKDCs()...)
		} else {
			t.service = c.PrepareService(sp)
		}
	}
	switch {
	case t.prober == config.ProberKpasswd:
		t.proto = kpasswdProtocol
	case t.cross != nil:
		t.proto = crossProtocol
	case t.service != nil:
		t.proto = tgsProtocol
	default:
		t.proto = loginProtocol
	}
	return t, nil
}

// Close releases the target's socket.
func (t *Target) Close() {
	if t.client != nil {
		t.client.Close()
	}
}

// Transport returns the configured transport.
func (t *Target) Transport() krb5.Transport {
	if t.client == nil {
		return krb5.TCP // kadmind's RPC
	}
	return t.client.Transport()
}

// Prober is the module's prober: config.ProberKDC, ProberKpasswd or
// ProberKadmin.
func (t *Target) Prober() string { return t.prober }

// Exchanges are the exchanges each probe of the target runs, as label
// values.
func (t *Target) Exchanges() []string {
	return append([]string(nil), t.proto.exchanges...)
}

// HasService reports whether the target runs a TGS exchange.
func (t *Target) HasService() bool { return t.service != nil }

// CrossRealm reports whether the target walks a trust (the referral and
// remote_tgs exchanges) instead of the TGS exchange.
func (t *Target) CrossRealm() bool { return t.cross != nil }

// ClassNoTGT is the TGS result when no valid TGT exists because the login
// failed: the TGS exchange was not attempted.
const ClassNoTGT = "no_tgt"

// ClassNoTicket is the kpasswd result when the login for kadmin/changepw
// failed: the password-change exchange was not attempted.
const ClassNoTicket = "no_ticket"

// Outcome is the result of one probe: a login, then a service ticket; for
// the kpasswd prober a login for kadmin/changepw, then the kpasswd
// exchange; for the kadmin prober the RPC call alone.
type Outcome struct {
	Prober   string // config.ProberKDC, ProberKpasswd or ProberKadmin
	Start    time.Time
	Duration time.Duration // both exchanges
	AS       krb5.ASResult
	ASErr    error
	TGSRan   bool // the module names a service
	TGS      krb5.TGSResult
	TGSErr   error
	// KpasswdRan: the kpasswd prober's password-change exchange.
	KpasswdRan bool
	Kpasswd    krb5.KpasswdResult
	KpasswdErr error
	// RPCRan: the kadmin prober's RPC call.
	RPCRan bool
	RPC    kadmrpc.Result
	RPCErr error
	// CrossRan is set when the module's service is of another realm: the
	// referral at the target KDC, then the service ticket at a KDC of that
	// realm (RemoteKDC: the one that answered, or the last one tried).
	CrossRan    bool
	Referral    krb5.TGSResult
	ReferralErr error
	Remote      krb5.RemoteResult
	RemoteErr   error
	RemoteKDC   string
	// Canceled is set when ctx was cancelled (shutdown, reload): the outcome
	// says nothing about the KDC and is not recorded.
	Canceled bool
}

// Run performs one probe with the module's prober (its protocol's run),
// each exchange bounded by the module's timeout and by ctx.
func (t *Target) Run(ctx context.Context) (o Outcome) {
	o.Start = time.Now()
	o.Prober = t.prober
	defer func() { o.Duration = time.Since(o.Start) }()
	t.proto.run(t, ctx, &o)
	return o
}

// canceled tells a caller that gave up (not a deadline: that is a timeout).
func canceled(ctx context.Context, err error) bool {
	return err != nil && (errors.Is(ctx.Err(), context.Canceled) || krb5.Classify(err) == krb5.ClassCanceled)
}

// HasAS reports whether the probe ran a login (every prober but kadmin).
func (o *Outcome) HasAS() bool { return o.Prober != config.ProberKadmin }

// ASExchange is the login's exchange label: as, or kpasswd_as for the
// kpasswd prober's login for kadmin/changepw (not a KDC login alert's
// business: the KDC's own targets probe that).
func (o *Outcome) ASExchange() string {
	if o.Prober == config.ProberKpasswd {
		return ExchangeKpasswdAS
	}
	return ExchangeAS
}

// Success reports whether every exchange the probe ran succeeded.
func (o *Outcome) Success() bool {
	for _, ex := range o.Exchanges(krb5.UDP) {
		if ex.Err != nil {
			return false
		}
	}
	return true
}
