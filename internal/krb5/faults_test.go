package krb5

import (
	"context"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// lossyRelay forwards UDP datagrams between one client and the KDC, dropping
// the first `drop` requests: a lossy link in front of a real KDC.
func lossyRelay(t *testing.T, kdc string, drop int32) (addr string, dropped *atomic.Int32) {
	return lossyRelayOn(t, "127.0.0.1:0", kdc, drop)
}

func lossyRelayOn(t *testing.T, listen, kdc string, drop int32) (addr string, dropped *atomic.Int32) {
	dropped = new(atomic.Int32)
	addr = testutil.UDPRelay(t, listen, kdc, func(b []byte, send func([]byte)) {
		if dropped.Load() < drop {
			dropped.Add(1)
			return
		}
		send(b)
	})
	return addr, dropped
}

func TestUDPRetransmit(t *testing.T) {
	r := upRealm(t, realm.Options{})
	addr, dropped := lossyRelay(t, r.KDCAddr, 1)
	c := userClient(t, r, 1, Options{KDC: addr, UDPRetransmit: 100 * time.Millisecond})
	as, err := c.Login(testCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// At least one: on a loaded machine the KDC's answer to the resent
	// request may itself come later than the next 200 ms resend.
	if dropped.Load() != 1 || as.Retransmits < 1 {
		t.Errorf("dropped %d, retransmits %d; want 1 and at least 1", dropped.Load(), as.Retransmits)
	}
	// The retransmit shows as a slow first round trip, not as an error.
	if as.PreauthRequired < 100*time.Millisecond {
		t.Errorf("first round trip %v, shorter than the retransmit interval", as.PreauthRequired)
	}

	// Without retransmits the lost request is a timeout.
	addr, _ = lossyRelay(t, r.KDCAddr, 1)
	c = userClient(t, r, 1, Options{KDC: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Login(ctx)
	wantClass(t, err, ClassTimeout)
}

// A KDC whose UDP replies are limited to a few bytes answers
// KRB_ERR_RESPONSE_TOO_BIG; the exchange moves to TCP as libkrb5's does.
func TestResponseTooBigFallsBackToTCP(t *testing.T) {
	realmtest.RequireMIT(t)
	ctx := testCtx(t, time.Minute)
	r, err := realm.Create(ctx, realm.Options{Dir: t.TempDir(), Users: 2, Services: 1, Fillers: -1, NoKadmind: true})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(r.KDCConf)
	if err != nil {
		t.Fatal(err)
	}
	conf = []byte(strings.Replace(string(conf), "[kdcdefaults]\n", "[kdcdefaults]\n\tkdc_max_dgram_reply_size = 200\n", 1))
	if err := os.WriteFile(r.KDCConf, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		r.Down()
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })

	c := userClient(t, r, 1, Options{})
	as, err := c.Login(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !as.TCPFallback {
		t.Errorf("no TCP fallback: %+v", as)
	}
	tgs, err := c.ServiceTicket(ctx, c.PrepareService(mustPrincipal(t, r.Service(1))))
	if err != nil || !tgs.TCPFallback {
		t.Errorf("TGS %+v, %v; want a TCP fallback", tgs, err)
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		if testutil.InCI() {
			t.Fatalf("no /proc/self/fd in CI: %v", err)
		}
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// Probing a dead KDC a thousand times leaks neither goroutines nor sockets.
func TestDeadKDCNoLeaks(t *testing.T) {
	dead := realmtest.DeadAddr(t)
	hole := testutil.BlackHole(t)
	p := mustPrincipal(t, "user0001@PERF.TEST")
	creds := NewPasswordCredentials("x", p)

	run := func() {
		for i := 0; i < 1000; i++ {
			tr, addr, timeout := UDP, dead, 5*time.Second
			switch i % 4 {
			case 1:
				tr = TCP
			case 2:
				addr, timeout = hole, time.Millisecond // a port that drops packets
			}
			c, err := NewClient(Options{KDC: addr, Transport: tr, Client: p, Credentials: creds})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			_, err = c.Login(ctx)
			cancel()
			if cl := Classify(err); cl != ClassConnectionRefused && cl != ClassTimeout {
				t.Fatalf("probe %d: %v", i, err)
			}
			if i%8 == 3 {
				c.Close() // some callers close, others just drop the Client
			}
		}
	}
	run() // warm up: the runtime's own threads and pollers
	runtime.GC()
	g0, fd0 := runtime.NumGoroutine(), openFDs(t)
	run()
	// Goroutines and descriptors settle asynchronously; allow a moment.
	var g1, fd1 int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		runtime.GC()
		g1, fd1 = runtime.NumGoroutine(), openFDs(t)
		if g1 <= g0 && fd1 <= fd0 {
			return
		}
	}
	t.Errorf("after 1,000 probes of a dead KDC: goroutines %d -> %d, open fds %d -> %d", g0, g1, fd0, fd1)
}

// tcpRelay forwards TCP connections from listen to the KDC.
func tcpRelay(t *testing.T, listen, kdc string) string {
	l, err := net.Listen("tcp", listen)
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
			go func() {
				defer c.Close()
				k, err := net.Dial("tcp", kdc)
				if err != nil {
					return
				}
				defer k.Close()
				go io.Copy(k, c)
				io.Copy(c, k)
			}()
		}
	}()
	return l.Addr().String()
}

// The KDC at an IPv6 literal address, over UDP and TCP (relayed from ::1 to
// the harness KDC, which listens on 127.0.0.1).
func TestIPv6KDC(t *testing.T) {
	if l, err := net.ListenPacket("udp", "[::1]:0"); err != nil {
		if testutil.InCI() {
			t.Fatalf("no IPv6 loopback in CI: %v", err)
		}
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	r := upRealm(t, realm.Options{})
	udp, _ := lossyRelayOn(t, "[::1]:0", r.KDCAddr, 0)
	tcp := tcpRelay(t, "[::1]:0", r.KDCAddr)
	for tr, addr := range map[Transport]string{UDP: udp, TCP: tcp} {
		if !strings.HasPrefix(addr, "[::1]:") {
			t.Fatalf("relay address %s", addr)
		}
		c := userClient(t, r, 1, Options{KDC: addr, Transport: tr})
		if _, err := c.ServiceTicket(testCtx(t, 10*time.Second), c.PrepareService(mustPrincipal(t, r.Service(1)))); err != nil {
			t.Errorf("%v via %s: %v", tr, addr, err)
		}
		c.Close()
	}
}

// A UDP "KDC" that sends every datagram back, as a request reaching its own
// sender does: the engine must call that a network fault, not a malformed
// reply from a KDC (it is not from a KDC at all).
func TestEchoedRequestIsNetworkFault(t *testing.T) {
	echo := testutil.UDPServer(t, func(req []byte) []byte { return req })
	p := mustPrincipal(t, "user0001@PERF.TEST")
	c, err := NewClient(Options{KDC: echo, Client: p, Credentials: NewPasswordCredentials("x", p)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Login(testCtx(t, 10*time.Second))
	if pe := wantClass(t, err, ClassNetwork); !strings.Contains(pe.Error(), "instead of a reply") {
		t.Errorf("error %q does not say what came back", pe)
	}
}
