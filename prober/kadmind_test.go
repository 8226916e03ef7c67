package prober

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// kadmindConfig probes the realm's kadmind: kpasswd over UDP and TCP
// (logging in at the realm's KDC) and the admin RPC, every second; and the
// admin RPC and kpasswd pointed at the KDC's port, which closes the
// connection on them, and at a server at web answering as HTTP does to garbage.
func kadmindConfig(r *realm.Realm, web string) *config.Config {
	kp := config.ProbeModule{Prober: config.ProberKpasswd, Realm: r.Realm, Client: r.ProbePrincipal, Keytab: r.ProbeKeytab,
		KDC: r.KDCAddr, Timeout: time.Second, AllowedKDCs: []string{"127.0.0.1"}}
	kpTCP := kp
	kpTCP.Transport = "tcp"
	ka := config.ProbeModule{Prober: config.ProberKadmin, Timeout: time.Second, AllowedKDCs: []string{"127.0.0.1"}}
	kpasswd := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KpasswdPort))
	return &config.Config{
		Modules: map[string]config.ProbeModule{"kpasswd": kp, "kpasswd-tcp": kpTCP, "kadmin": ka},
		Probes: []config.ProbeTarget{
			{Name: "kpasswd-udp", Address: kpasswd, Module: "kpasswd", Interval: time.Second},
			{Name: "kpasswd-tcp", Address: kpasswd, Module: "kpasswd-tcp", Interval: time.Second},
			{Name: "kadmin", Address: r.KadmindAddr, Module: "kadmin", Interval: time.Second},
			{Name: "kadmin-at-kdc", Address: r.KDCAddr, Module: "kadmin", Interval: time.Second},
			{Name: "kpasswd-at-kdc", Address: r.KDCAddr, Module: "kpasswd-tcp", Interval: time.Second},
			{Name: "kadmin-at-web", Address: web, Module: "kadmin", Interval: time.Second},
			{Name: "kpasswd-at-web", Address: web, Module: "kpasswd-tcp", Interval: time.Second},
		},
	}
}

// garbageServer answers every connection as an HTTP server answers a
// request it cannot parse, whatever it was sent, and closes it.
func garbageServer(t *testing.T) string {
	l, err := net.Listen("tcp", realmtest.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Read(make([]byte, 512))
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			c.Close()
		}
	}()
	return l.Addr().String()
}

// rpcRefusals counts kadmind's own log lines for an AUTH_NONE call: the
// oracle that the RPC reached kadmind's dispatcher.
func rpcRefusals(t *testing.T, r *realm.Realm) int {
	b, err := os.ReadFile(r.KadmindLog)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "Authentication attempt failed: 127.0.0.1, RPC authentication flavor 0")
}

// TestKadmindProbesStoppedHungRestarted runs the kpasswd and kadmin probers
// against the harness realm's real kadmind: they succeed (kadmind's log
// has the RPC's refusal; kpasswd's AP-REP proves the kadmin/changepw key),
// then fail as connection_refused while kadmind is stopped, as timeout
// while it is SIGSTOPped, and succeed again after each; the KDC's port
// (closing on them) fails as network, an HTTP server (answering 400) as
// malformed_reply. The probe principal's
// kvno and dates (kadmin.local) are the same after.
func TestKadmindProbesStoppedHungRestarted(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{})
	before := realmtest.KeyState(t, r, r.ProbePrincipal)
	reg := prometheus.NewPedanticRegistry()
	var logs testutil.LockedBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the manager's log:\n%s", logs.String())
		}
	})
	m := NewManager(log.NewLogfmtLogger(&logs), reg)
	t.Cleanup(m.Stop)
	refusals0 := rpcRefusals(t, r)
	web := garbageServer(t)
	if err := m.ApplyConfig(kadmindConfig(r, web)); err != nil {
		t.Fatal(err)
	}
	pm := m.metrics
	kadmind := [][2]string{{"kpasswd-udp", ExchangeKpasswd}, {"kpasswd-tcp", ExchangeKpasswd}, {"kadmin", ExchangeKadminRPC}}
	count := func(class string) map[string]float64 {
		c := map[string]float64{}
		for _, te := range kadmind {
			c[te[0]] = counter(pm.total, te[0], te[1], class)
		}
		return c
	}
	// each waits until every kadmind exchange was counted as class more
	// often than in since, and success reads as want.
	each := func(what, class string, since map[string]float64, want float64) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, what, func() bool {
			for _, te := range kadmind {
				if counter(pm.total, te[0], te[1], class) <= since[te[0]] || gauge(pm.success, te[0], te[1]) != want {
					return false
				}
			}
			return true
		})
	}
	each("every kadmind probe to succeed", krb5.ClassSuccess, count(krb5.ClassSuccess), 1)
	if n := rpcRefusals(t, r); n <= refusals0 {
		t.Errorf("kadmind logged %d AUTH_NONE refusals, %d before the probes", n, refusals0)
	}
	if gauge(pm.success, "kpasswd-udp", ExchangeKpasswdAS) != 1 || histogramCount(t, pm.duration, "kpasswd-tcp", ExchangeKpasswd, "tcp") == 0 ||
		histogramCount(t, pm.duration, "kadmin", ExchangeKadminRPC, "tcp") == 0 {
		t.Error("the kpasswd login or the durations not recorded")
	}
	// Not a kadmind: the KDC closes the connection, HTTP answers garbage.
	testutil.Eventually(t, 20*time.Second, "the probes of the KDC's port and of HTTP to fail", func() bool {
		return counter(pm.total, "kadmin-at-kdc", ExchangeKadminRPC, krb5.ClassNetwork) > 0 &&
			counter(pm.total, "kpasswd-at-kdc", ExchangeKpasswd, krb5.ClassNetwork) > 0 &&
			counter(pm.total, "kadmin-at-web", ExchangeKadminRPC, krb5.ClassMalformedReply) > 0 &&
			counter(pm.total, "kpasswd-at-web", ExchangeKpasswd, krb5.ClassMalformedReply) > 0
	})

	// Stopped: refused, while the KDC still issues the changepw ticket.
	refused := count(krb5.ClassConnectionRefused)
	if err := r.StopKadmind(); err != nil {
		t.Fatal(err)
	}
	each("every kadmind probe to fail as connection_refused", krb5.ClassConnectionRefused, refused, 0)
	if gauge(pm.success, "kpasswd-udp", ExchangeKpasswdAS) != 1 {
		t.Error("the login for kadmin/changepw failed with the KDC up")
	}
	ok := count(krb5.ClassSuccess)
	if err := r.StartKadmind(testutil.Context(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	each("every kadmind probe to succeed after the restart", krb5.ClassSuccess, ok, 1)

	// Hung: kadmind SIGSTOPped answers nothing (the kernel still
	// completes TCP handshakes into its backlog).
	pid := r.KadmindPid()
	if pid <= 0 {
		t.Fatal("no kadmind pid")
	}
	timeouts := count(krb5.ClassTimeout)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	each("every kadmind probe to time out", krb5.ClassTimeout, timeouts, 0)
	ok = count(krb5.ClassSuccess)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	each("every kadmind probe to succeed after SIGCONT", krb5.ClassSuccess, ok, 1)

	m.Stop()
	if after := realmtest.KeyState(t, r, r.ProbePrincipal); after != before {
		t.Errorf("the probe principal changed:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// TestKadmindProbeHandler: /probe runs the kpasswd and kadmin modules
// against the real kadmind once each, refuses a target outside
// allowed_kdcs, and reports a stopped kadmind as connection_refused.
func TestKadmindProbeHandler(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{})
	cfg := kadmindConfig(r, realmtest.DeadAddr(t))
	cfg.Probes = nil
	srv := probeServer(t, cfg)
	kpasswd := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KpasswdPort))
	for _, tc := range []struct{ module, target, want string }{
		{"kpasswd", kpasswd, `probe_krb5_result{exchange="kpasswd",result="success"} 1`},
		{"kpasswd-tcp", kpasswd, `probe_krb5_result{exchange="kpasswd_as",result="success"} 1`},
		{"kadmin", r.KadmindAddr, `probe_krb5_result{exchange="kadmin_rpc",result="success"} 1`},
	} {
		code, body := get(t, probeURL(srv, "module", tc.module, "target", tc.target), nil)
		if code != 200 || !strings.Contains(body, "\nprobe_success 1\n") || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d\n%s", tc.module, code, body)
		}
	}
	if code, _ := get(t, probeURL(srv, "module", "kadmin", "target", "192.0.2.1:749"), nil); code != 403 {
		t.Errorf("a target outside allowed_kdcs: %d, want 403", code)
	}
	if err := r.StopKadmind(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ module, target, want string }{
		{"kpasswd-tcp", kpasswd, `probe_krb5_result{exchange="kpasswd",result="connection_refused"} 1`},
		{"kadmin", r.KadmindAddr, `probe_krb5_result{exchange="kadmin_rpc",result="connection_refused"} 1`},
	} {
		code, body := get(t, probeURL(srv, "module", tc.module, "target", tc.target), nil)
		if code != 200 || !strings.Contains(body, "\nprobe_success 0\n") || !strings.Contains(body, tc.want) {
			t.Errorf("%s with kadmind stopped: %d\n%s", tc.module, code, body)
		}
	}
}
