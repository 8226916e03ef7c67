package loadgen

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// tcpActiveOpens is the kernel's count of TCP connections this machine
// opened (/proc/net/snmp Tcp: ActiveOpens).
func tcpActiveOpens(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i++ {
		h, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(h) == 0 || h[0] != "Tcp:" || len(v) != len(h) || v[0] != "Tcp:" {
			continue
		}
		for j := range h {
			if h[j] == "ActiveOpens" {
				n, _ := strconv.ParseInt(v[j], 10, 64)
				return n
			}
		}
	}
	t.Fatal("no Tcp ActiveOpens in /proc/net/snmp")
	return 0
}

// The tcp load on the batched generator (the default): every login is a
// fresh kinit -k over TCP, one connection per round trip (the kernel's
// count of opened connections and the KDC's log are the witnesses), with
// encrypted timestamp and with SPAKE (three round trips), no errors, a
// few connections in flight and one wait per several round trips. The
// connections come from one socket per login in flight, reconnected for
// each round trip (connect(AF_UNSPEC) then connect), not a socket per
// connection. The counts are checked on a load stopped after a number
// of logins (not after a time: how many a time allows depends on the
// machine's load); bench's TestBatchedTCP shows the load in the report.
func TestBatchedTCP(t *testing.T) {
	r := upRealm(t)
	for _, tc := range []struct {
		preauth krb5.PreauthMode
		trips   int
	}{{krb5.PreauthEncTimestamp, 2}, {krb5.PreauthSPAKE, 3}} {
		const n = 60
		cfg := realmConfig(t, r, tc.preauth)
		realmtest.DrainKDC(t, r)
		from := testutil.LogSize(t, r.KDCLog)
		opens := tcpActiveOpens(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := TCP(ctx, cfg, TCPMaxInflight, time.Minute, n)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tc.preauth, err)
		}
		realmtest.DrainKDC(t, r)
		logins, failed := count(res.Records, KindAS)
		ok := logins - failed
		if ok < n || failed > 0 {
			t.Fatalf("%s: %d logins, %d errors: %v", tc.preauth, logins, failed, res.ErrorTexts)
		}
		if res.Waits == 0 || res.Waits > ok*tc.trips {
			t.Errorf("%s: %d waits for %d round trips", tc.preauth, res.Waits, ok*tc.trips)
		}
		issued := testutil.LogCount(t, r.KDCLog, from, realmtest.ASIssue)
		if issued < ok || issued > ok+TCPMaxInflight {
			t.Errorf("%s: %d logins counted, the KDC issued %d", tc.preauth, ok, issued)
		}
		if n := tcpActiveOpens(t) - opens; n < int64(ok*tc.trips) {
			t.Errorf("%s: %d logins of %d round trips, but only %d TCP connections opened", tc.preauth, ok, tc.trips, n)
		}
		if res.Sockets < 1 || res.Sockets > TCPMaxInflight {
			t.Errorf("%s: the generator opened %d sockets for %d connections, want one per login in flight (at most %d)", tc.preauth, res.Sockets, ok*tc.trips, TCPMaxInflight)
		}
		t.Logf("%s: %d logins, %d waits, %d sockets", tc.preauth, ok, res.Waits, res.Sockets)
	}
}

// TestTCPRequestRidesOnSYN: towards a loopback address a round trip of
// the tcp load sends the request in the SYN; a listener without fast open
// (as MIT's KDC's) ignores it, and the kernel sends it again at once with
// the handshake's ACK: two segments (SYN with the request; the request
// with the ACK), not three (SYN, ACK, request), and the listener reads
// the request exactly once. On the first connection of a slot's socket
// and on those made again after connect(AF_UNSPEC). The kernel's own
// account of the socket (TCP_INFO: segments sent, fast open's outcome) is
// the witness.
func TestTCPRequestRidesOnSYN(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sa, err := sockaddrOf(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if !isLoopback(sa) {
		t.Fatalf("%s is not loopback", ln.Addr())
	}
	fam, rsa, rsaLen := rawSockaddr(sa)
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	s := tcpSlot{fd: -1}
	defer s.closeSocket()
	// tcpInfo: segments the socket sent, and tcpi_fastopen_client_fail
	// (bits 1-2 of byte 7 of struct tcp_info; 2: the SYN's data was not
	// acknowledged and was sent again).
	tcpInfo := func() (segsOut uint32, tfoFail byte) {
		info, err := unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			t.Fatal(err)
		}
		raw := (*[8]byte)(unsafe.Pointer(info))
		return info.Segs_out, raw[7] >> 1 & 3
	}
	var opened int
	for round := range 3 {
		if err := s.open(ep, fam, 0, true, &opened); err != nil {
			t.Fatal(err)
		}
		s.req = append(append(s.req[:0], 0, 0, 0, 100), make([]byte, 100)...)
		s.req[4+round] = 0xa5 // each round's own request
		s.wrote, s.replied, s.rbuf = false, false, s.rbuf[:0]
		before, _ := tcpInfo()
		if err := s.connect(rsa, rsaLen); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !s.synData || !s.wrote {
			t.Fatalf("round %d: request in the SYN %v, sent %v: want both", round, s.synData, s.wrote)
		}
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		got := make([]byte, 104)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !bytes.Equal(got, s.req) {
			t.Fatalf("round %d: the listener read % x, want % x", round, got, s.req)
		}
		segs, fail := tcpInfo()
		if n := segs - before; n != 2 || fail != 2 {
			t.Errorf("round %d: %d segments sent for the handshake and the request, fast open outcome %d; want 2 (SYN with the request; the request with the ACK) and 2 (data not acknowledged, sent again)", round, n, fail)
		}
		// Nothing more comes: the request was delivered once.
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if n, err := c.Read(make([]byte, 1)); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("round %d: after the request the listener read %d more bytes (%v)", round, n, err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte{0, 0, 0, 1, 7})
		c.Close()
		for done := false; !done; {
			if done, err = s.read(time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(s.rbuf, []byte{0, 0, 0, 1, 7}) {
			t.Fatalf("round %d: reply % x", round, s.rbuf)
		}
	}
	if opened != 1 {
		t.Errorf("%d sockets opened for 3 round trips, want 1", opened)
	}
}
