package realm

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// KDCProxy is a KDC proxy ([MS-KKDCP]) in front of the realm's KDC:
// Debian's python3-kdcproxy served by gunicorn over TLS, with a
// certificate of a throwaway CA made in the realm's directory.
type KDCProxy struct {
	Port int    `json:"port"`
	URL  string `json:"url"` // https://127.0.0.1:PORT/KdcProxy
	// ServerName is the DNS name in the certificate besides 127.0.0.1.
	ServerName string `json:"server_name"`
	CA         string `json:"ca"` // the CA's certificate (PEM): what clients trust
	CAKey      string `json:"ca_key"`
	Cert       string `json:"cert"`
	Key        string `json:"key"`
	Conf       string `json:"conf"` // kdcproxy.conf (KDCPROXY_CONFIG)
	PidFile    string `json:"pid_file"`
	Log        string `json:"log"`
}

// KDCProxyPath is the URL path of the harness's proxy (FreeIPA's).
const KDCProxyPath = "/KdcProxy"

const kdcproxyModule = "/usr/lib/python3/dist-packages/kdcproxy/__init__.py"

// gunicornComm is the comm of gunicorn's processes (the script's name).
const gunicornComm = "gunicorn"

func (p *KDCProxy) setPaths(r *Realm) {
	p.CA = r.path("kdcproxy-ca.pem")
	p.CAKey = r.path("kdcproxy-ca.key")
	p.Cert = r.path("kdcproxy.pem")
	p.Key = r.path("kdcproxy.key")
	p.Conf = r.path("kdcproxy.conf")
	p.PidFile = r.path("kdcproxy.pid")
	p.Log = r.path("kdcproxy.log")
	p.ServerName = "kdcproxy." + r.Domain
	p.URL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)) + KDCProxyPath
}

// KDCProxyAvailable reports whether gunicorn and python3-kdcproxy are
// installed.
func KDCProxyAvailable() error {
	if _, err := LookPath("gunicorn"); err != nil {
		return fmt.Errorf("realm: gunicorn missing; on Debian: apt-get install gunicorn python3-kdcproxy")
	}
	// Debian's gunicorn runs /usr/bin/python3, which finds the module here.
	if _, err := os.Stat(kdcproxyModule); err != nil {
		return fmt.Errorf("realm: python3-kdcproxy missing (%s); on Debian: apt-get install python3-kdcproxy", kdcproxyModule)
	}
	return nil
}

// WriteCA writes a throwaway CA (its certificate to certFile, its key to
// keyFile, mode 0600) named cn.
func WriteCA(certFile, keyFile, cn string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	return writeCertKey(certFile, keyFile, der, key)
}

// writeServerCert issues the proxy's certificate (127.0.0.1 and
// p.ServerName) from the CA in p.CA/p.CAKey.
func (p *KDCProxy) writeServerCert() error {
	ca, err := tls.LoadX509KeyPair(p.CA, p.CAKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: p.ServerName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{p.ServerName},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		return err
	}
	return writeCertKey(p.Cert, p.Key, der, key)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writeCertKey(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := safefile.Write(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return safefile.Write(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

// kdcproxyConf points the proxy at the realm's KDC, never DNS, over UDP:
// python3-kdcproxy 1.0 spins on a TCP connect the KDC refused (a
// stopped KDC: one warning line per spin, 74 MB of log and a busy core
// for the 17 s it waits before its 503, measured), where a refused UDP
// datagram costs one line.
func (r *Realm) kdcproxyConf() string {
	return fmt.Sprintf(`[global]
use_dns = false

[%s]
kerberos = kerberos+udp://127.0.0.1:%d
`, r.Realm, r.KDCPort)
}

// setupKDCProxy reserves the proxy's port and writes its CA, certificate
// and configuration (Create, with Opts.KDCProxy).
func (r *Realm) setupKDCProxy() error {
	if err := KDCProxyAvailable(); err != nil {
		return err
	}
	port, err := r.lease(r.Opts.KDCProxyPort, TCP)
	if err != nil {
		return err
	}
	r.KDCProxy = &KDCProxy{Port: port}
	p := r.KDCProxy
	p.setPaths(r)
	if err := WriteCA(p.CA, p.CAKey, "krb5-exporter throwaway CA for "+r.Realm); err != nil {
		return fmt.Errorf("realm: kdcproxy CA: %w", err)
	}
	if err := p.writeServerCert(); err != nil {
		return fmt.Errorf("realm: kdcproxy certificate: %w", err)
	}
	if err := os.WriteFile(p.Conf, []byte(r.kdcproxyConf()), 0o600); err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	return nil
}

// StartKDCProxy starts gunicorn serving kdcproxy (daemonised, pid in
// KDCProxy.PidFile) and returns once it completes a TLS handshake.
func (r *Realm) StartKDCProxy(ctx context.Context) error {
	p := r.KDCProxy
	if p == nil {
		return errors.New("realm: created without a KDC proxy")
	}
	if pid := r.KDCProxyPid(); pid > 0 {
		return fmt.Errorf("realm: kdcproxy already running as pid %d", pid)
	}
	g, err := LookPath("gunicorn")
	if err != nil {
		return KDCProxyAvailable()
	}
	// Two sync workers: kdcproxy holds a worker until the KDC answers or
	// its own 17 s timeout, and a probe must not queue behind a kinit.
	// --timeout 30 (gunicorn's default) recycles a worker stuck longer.
	// --graceful-timeout 2: on SIGTERM the master waits that long for a
	// worker's request, not 30 s; a test that stopped the KDC leaves one
	// waiting on it, and StopKDCProxy allows 10 s.
	cmd := r.command(ctx, g, "--daemon", "--pid", p.PidFile,
		"--bind", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)),
		"--certfile", p.Cert, "--keyfile", p.Key,
		"--workers", "2", "--timeout", "30", "--graceful-timeout", "2",
		"--error-logfile", p.Log, "--capture-output",
		"--chdir", r.Dir, "kdcproxy:application")
	cmd.Env = append(cmd.Env, "KDCPROXY_CONFIG="+p.Conf)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("realm: gunicorn did not start: %v: %s", err, firstLines(out, 3))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pool := x509.NewCertPool()
	if b, err := os.ReadFile(p.CA); err == nil {
		pool.AppendCertsFromPEM(b)
	}
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
	for {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)))
		if err == nil {
			c.Close()
			if r.KDCProxyPid() > 0 {
				return nil
			}
			err = fmt.Errorf("no pid in %s yet", p.PidFile)
		}
		if ctx.Err() != nil {
			r.StopKDCProxy()
			return fmt.Errorf("realm: kdcproxy does not accept TLS on port %d: %v; log: %s", p.Port, err, logTail(p.Log))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StopKDCProxy stops gunicorn and its workers; nil if not running.
func (r *Realm) StopKDCProxy() error {
	if r.KDCProxy == nil {
		return nil
	}
	pid := r.KDCProxyPid()
	if pid == 0 {
		os.Remove(r.KDCProxy.PidFile)
		return nil
	}
	pids := append([]int{pid}, children(pid, gunicornComm)...)
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !anyAlive(pids, gunicornComm) {
			os.Remove(r.KDCProxy.PidFile)
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range pids {
		if alive(p, gunicornComm) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	os.Remove(r.KDCProxy.PidFile)
	return fmt.Errorf("realm: kdcproxy (pid %d) ignored SIGTERM for 10s and was killed", pid)
}

// KDCProxyPids returns gunicorn's master followed by its workers.
func (r *Realm) KDCProxyPids() []int {
	pid := r.KDCProxyPid()
	if pid == 0 {
		return nil
	}
	return append([]int{pid}, children(pid, gunicornComm)...)
}

// KDCProxyPid returns the pid of the proxy's gunicorn master, or 0 when
// it is not running: only a gunicorn with this realm's pid file on its
// command line counts (a stale or forged file never names a stranger).
// Without a usable pid file (removed, or written late) the master is
// found by that command line: it is what its workers' parent runs too.
func (r *Realm) KDCProxyPid() int {
	if r.KDCProxy == nil {
		return 0
	}
	if b, err := os.ReadFile(r.KDCProxy.PidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && r.isKDCProxy(pid) {
			return pid
		}
	}
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0
	}
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && r.isKDCProxy(p.PID) && !r.isKDCProxy(st.PPID) {
			return p.PID
		}
	}
	return 0
}

// isKDCProxy reports whether pid is a live gunicorn of this realm's proxy.
func (r *Realm) isKDCProxy(pid int) bool {
	if pid <= 0 || !alive(pid, gunicornComm) {
		return false
	}
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	args, err := proc.CmdLine()
	return err == nil && hasArgPair(args, "--pid", r.KDCProxy.PidFile)
}

// KDCProxyKrb5Conf is a krb5.conf whose realm reaches the KDC only
// through the proxy (kdc = https://...), trusting caFile for it (MIT's
// http_anchors): the oracle kinit's profile.
func (r *Realm) KDCProxyKrb5Conf(url, caFile string) string {
	return fmt.Sprintf(`[libdefaults]
	default_realm = %[1]s
	dns_lookup_realm = false
	dns_lookup_kdc = false
	rdns = false
	dns_canonicalize_hostname = false
	default_tkt_enctypes = %[4]s
	default_tgs_enctypes = %[4]s
	permitted_enctypes = %[4]s

[realms]
	%[1]s = {
		kdc = %[2]s
		http_anchors = FILE:%[3]s
	}
`, r.Realm, url, caFile, strings.Join(r.Opts.Enctypes, " "))
}
