package prober

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// proxyCA is a module's proxy_ca_file, read again when it changes (a
// renewed CA needs no reload) and, when it does not load, failing the
// probe before anything is sent: a probe never falls back to other roots.
type proxyCA struct {
	mod   config.ProbeModule
	stamp string // size, mtime and inode of the file last read
	err   error  // why the file last read did not load
}

// PhaseProxyCA is the phase of a probe that failed on its proxy_ca_file.
const PhaseProxyCA = "proxy_ca"

// refresh loads the CA file into c when it changed since the last read.
func (ca *proxyCA) refresh(c *krb5.Client) error {
	stamp := ""
	if fi, err := os.Stat(ca.mod.ProxyCAFile); err == nil {
		ino := uint64(0)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		stamp = fmt.Sprint(fi.Size(), fi.ModTime().UnixNano(), ino)
	}
	if stamp != "" && stamp == ca.stamp {
		return ca.err
	}
	ca.stamp = stamp
	roots, err := ca.mod.ProxyRoots()
	if err == nil {
		err = c.SetProxyRoots(roots)
	}
	ca.err = err
	return err
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
		asService = krb5.Principal{Components: []string{"kadmin", "changepw"}}
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
	switch t.prober {
	case config.ProberKadmin:
		return []string{ExchangeKadminRPC}
	case config.ProberKpasswd:
		return []string{ExchangeKpasswdAS, ExchangeKpasswd}
	}
	if t.cross != nil {
		return []string{ExchangeAS, ExchangeReferral, ExchangeRemoteTGS}
	}
	if t.service != nil {
		return []string{ExchangeAS, ExchangeTGS}
	}
	return []string{ExchangeAS}
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

// Run performs one probe: an AS exchange (a fresh login, which becomes the
// TGT), then a TGS exchange with the newest valid TGT, each bounded by the
// module's timeout and by ctx.
func (t *Target) Run(ctx context.Context) (o Outcome) {
	o.Start = time.Now()
	o.Prober = t.prober
	defer func() { o.Duration = time.Since(o.Start) }()
	if t.prober == config.ProberKadmin {
		o.RPCRan = true
		rctx, cancel := context.WithTimeout(ctx, t.timeout)
		o.RPC, o.RPCErr = kadmrpc.Ping(rctx, &t.dialer, t.admin)
		cancel()
		o.Canceled = canceled(ctx, o.RPCErr)
		return o
	}
	if t.ca != nil {
		if err := t.ca.refresh(t.client); err != nil {
			o.ASErr = &krb5.Error{Class: krb5.ClassTLS, Phase: PhaseProxyCA, Err: err}
			if t.service != nil {
				o.TGSRan = true
				o.TGSErr = &krb5.Error{Class: ClassNoTGT, Phase: krb5.PhaseTGSRep, Err: errors.New("no valid TGT: the login failed")}
			}
			return o
		}
	}

	actx, cancel := context.WithTimeout(ctx, t.timeout)
	o.AS, o.ASErr = t.client.Login(actx)
	cancel()
	if canceled(ctx, o.ASErr) {
		o.Canceled = true
		return o
	}
	if t.prober == config.ProberKpasswd {
		o.KpasswdRan = true
		if o.ASErr != nil {
			o.KpasswdErr = &krb5.Error{Class: ClassNoTicket, Phase: krb5.PhaseKpasswd, Err: errors.New("no kadmin/changepw ticket: the login failed")}
			return o
		}
		kctx, cancel := context.WithTimeout(ctx, t.timeout)
		o.Kpasswd, o.KpasswdErr = t.client.Kpasswd(kctx, t.admin, t.client.Transport())
		cancel()
		o.Canceled = canceled(ctx, o.KpasswdErr)
		return o
	}
	if t.cross != nil {
		t.runCross(ctx, &o)
		return o
	}
	if t.service == nil {
		return o
	}
	o.TGSRan = true
	if !t.client.HasTGT() {
		// The login failed and no earlier TGT is still good: trying again
		// inside ServiceTicket would only double the load on a failing KDC.
		o.TGSErr = &krb5.Error{Class: ClassNoTGT, Phase: krb5.PhaseTGSRep, Err: errors.New("no valid TGT: the login failed")}
		return o
	}
	tctx, cancel := context.WithTimeout(ctx, t.timeout)
	o.TGS, o.TGSErr = t.client.ServiceTicket(tctx, t.service)
	cancel()
	if canceled(ctx, o.TGSErr) {
		o.Canceled = true
	}
	return o
}

// runCross walks the trust after the login: the referral with the TGT,
// then the service ticket at each KDC of the service's realm in turn
// until one answers (a KDC that is down or unreachable is skipped, as
// libkrb5 does), each exchange bounded by the module's timeout.
func (t *Target) runCross(ctx context.Context, o *Outcome) {
	o.CrossRan = true
	if !t.client.HasTGT() {
		o.ReferralErr = &krb5.Error{Class: ClassNoTGT, Phase: krb5.PhaseReferral, Err: errors.New("no valid TGT: the login failed")}
		o.RemoteErr = &krb5.Error{Class: ClassNoTGT, Phase: krb5.PhaseRemoteTGS, Err: errors.New("no cross-realm TGT: the login failed")}
		return
	}
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	o.Referral, o.ReferralErr = t.client.Referral(rctx, t.cross)
	cancel()
	if canceled(ctx, o.ReferralErr) {
		o.Canceled = true
		return
	}
	if o.ReferralErr != nil {
		o.RemoteErr = &krb5.Error{Class: ClassNoTGT, Phase: krb5.PhaseRemoteTGS, Err: errors.New("no cross-realm TGT: the referral failed")}
		return
	}
	for _, kdc := range t.remoteKDCs {
		o.RemoteKDC = kdc
		hctx, cancel := context.WithTimeout(ctx, t.timeout)
		o.Remote, o.RemoteErr = t.client.RemoteServiceTicket(hctx, t.cross, kdc)
		cancel()
		if canceled(ctx, o.RemoteErr) {
			o.Canceled = true
			return
		}
		switch krb5.Classify(o.RemoteErr) {
		case krb5.ClassTimeout, krb5.ClassConnectionRefused, krb5.ClassNetwork:
			continue // the next KDC of the realm
		}
		return
	}
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
