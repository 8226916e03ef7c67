package collector

import (
	"maps"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// TestSockDiag checks the netlink answers against /proc/net/tcp for a
// listener of this test with three connections waiting to be accepted.
func TestSockDiag(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}

	// A connection is queued when the listener gets the client's last ACK,
	// which may be just after Dial returned: poll (at most 30 s: a
	// bound against hangs; loopback under load can be slow).
	var mine *inetSocket
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ls, err := sockDiagTCP(1<<tcpListen, nil)
		if err != nil {
			t.Fatal(err)
		}
		mine = nil
		for i := range ls {
			if ls[i].port == port {
				mine = &ls[i]
			}
			if ls[i].state != tcpListen {
				t.Errorf("state filter let through state %d", ls[i].state)
			}
		}
		if mine == nil {
			t.Fatalf("listener on port %d not in the dump of %d listeners", port, len(ls))
		}
		if mine.rqueue == 3 || time.Now().After(deadline) {
			break
		}
	}
	if !mine.ip.Equal(net.IPv4(127, 0, 0, 1)) || mine.rqueue != 3 {
		t.Errorf("listener %+v: want 127.0.0.1 with 3 connections queued", *mine)
	}
	// Go asks listen() for net.core.somaxconn.
	if b, err := os.ReadFile("/proc/sys/net/core/somaxconn"); err == nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); uint32(min(n, 65535)) != mine.wqueue {
			t.Errorf("backlog = %d, somaxconn = %d", mine.wqueue, n)
		}
	}

	// The port filter: only the three server-side sockets, not the
	// clients' (their local port is ephemeral), nor anything else.
	cs, err := sockDiagTCP(tcpStatesAll&^(1<<tcpListen), []uint16{port})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Fatalf("%d sockets on port %d, want 3: %+v", len(cs), port, cs)
	}
	for _, s := range cs {
		if s.port != port || s.state != 0x01 {
			t.Errorf("socket %+v: want ESTABLISHED on port %d", s, port)
		}
	}

	// Same listener in /proc/net/tcp.
	pfs, err := procfs.NewFS("/proc")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pfs.NetTCP()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range lines {
		if line.LocalPort == uint64(port) && line.St == tcpListen {
			found = true
			if line.Inode != mine.inode || line.RxQueue != uint64(mine.rqueue) {
				t.Errorf("/proc/net/tcp: inode %d queue %d; sock_diag: inode %d queue %d", line.Inode, line.RxQueue, mine.inode, mine.rqueue)
			}
		}
	}
	if !found {
		t.Error("listener not in /proc/net/tcp")
	}
}

func TestKDCNetns(t *testing.T) {
	if rel := kdcNetns("/proc", os.Getpid()); rel != sameNetns {
		t.Errorf("own process: %v, want sameNetns", rel)
	}
	if rel := kdcNetns(fixtureDir+"/proc", fxWorker0); rel != otherNetns {
		t.Errorf("fixture: %v, want otherNetns (not this machine)", rel)
	}
}

// BenchmarkSockDiag is one dump of the sockets on one port, the per-port
// cost of the network collector (the kernel walks the whole table).
func BenchmarkSockDiag(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := sockDiagTCP(tcpStatesAll&^(1<<tcpListen), []uint16{port}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(tcpEhashEntries()), "ehash-buckets")
}

// BenchmarkSockDiagTimeWait is the connection count's dump with many
// sockets in TIME_WAIT on the counted port (the figure in docs/metrics.md
// for --collector.network.tcp-connections): it first makes that many
// loopback connections the server side closes first, so that the
// server's sockets wait (at most 14,000 connections and 60 s; they expire
// 60 s later), then times the dump, which returns them all. Not part of
// make test; run with
//
//	go test ./collector -run '^$' -bench SockDiagTimeWait -benchtime 200x
func BenchmarkSockDiagTimeWait(b *testing.B) {
	for _, n := range []int{0, 14000} {
		b.Run("tw="+strconv.Itoa(n), func(b *testing.B) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			port := uint16(l.Addr().(*net.TCPAddr).Port)
			if made := timeWaits(b, l, n); made < n {
				b.Logf("made %d of %d connections within 60 s", made, n)
			}
			cs, err := sockDiagTCP(tcpStatesAll&^(1<<tcpListen), []uint16{port})
			if err != nil {
				b.Fatal(err)
			}
			tw := 0
			for _, s := range cs {
				if s.state == 0x06 {
					tw++
				}
			}
			cpu0 := processCPU()
			for b.Loop() {
				if _, err := sockDiagTCP(tcpStatesAll&^(1<<tcpListen), []uint16{port}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(tw), "time-wait")
			b.ReportMetric(float64(tcpEhashEntries()), "ehash-buckets")
		})
	}
}

// timeWaits makes up to n connections to l, closing each on the server
// side first, for at most 60 s, and returns how many it made.
func timeWaits(b *testing.B, l net.Listener, n int) int {
	deadline := time.Now().Add(60 * time.Second)
	made := 0
	for ; made < n && time.Now().Before(deadline); made++ {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		s, err := l.Accept()
		if err != nil {
			b.Fatal(err)
		}
		s.Close()               // server first: its socket goes to TIME_WAIT
		c.Read(make([]byte, 1)) // the client sees the FIN
		c.Close()
	}
	return made
}

// tcpEhashEntries is the size of the table a connection dump walks (0 if
// the kernel does not say).
func tcpEhashEntries() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_ehash_entries")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return max(n, -n) // negative: the namespace shares the global table
}

// TestSockDiagPortsAndFamilies: one request answers for IPv4 and IPv6
// sockets, and the port filter keeps exactly the sockets on the ports
// asked for, with one port, two or three (each port's part of the
// bytecode, and the last one's, is taken).
func TestSockDiagPortsAndFamilies(t *testing.T) {
	listen := func(addr string) (net.Listener, uint16) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l, uint16(l.Addr().(*net.TCPAddr).Port)
	}
	la, a := listen("127.0.0.1:0")
	lb, b := listen("[::1]:0")
	lc, c := listen("127.0.0.1:0")
	dial := func(l net.Listener, n int) {
		for i := 0; i < n; i++ {
			conn, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
		}
	}
	dial(la, 2)
	dial(lb, 1)
	dial(lc, 3)

	ls, err := sockDiagTCP(1<<tcpListen, nil)
	if err != nil {
		t.Fatal(err)
	}
	fams := map[uint16]bool{}
	for _, s := range ls {
		if s.port == a || s.port == b || s.port == c {
			fams[s.port] = s.ip.To4() != nil
		}
	}
	if len(fams) != 3 || !fams[a] || fams[b] || !fams[c] {
		t.Errorf("listener dump: want the IPv4 listeners on %d, %d and the IPv6 one on %d; v4 by port: %v", a, c, b, fams)
	}

	// Server-side sockets are established as soon as the handshake
	// completes; clients' own sockets have ephemeral ports.
	for _, tc := range []struct {
		ports []uint16
		want  map[uint16]int
	}{
		{[]uint16{a}, map[uint16]int{a: 2}},
		{[]uint16{b}, map[uint16]int{b: 1}},
		{[]uint16{a, b}, map[uint16]int{a: 2, b: 1}},
		{[]uint16{b, c}, map[uint16]int{b: 1, c: 3}},
		{[]uint16{c, b, a}, map[uint16]int{a: 2, b: 1, c: 3}},
	} {
		got := map[uint16]int{}
		// A connection shows on the server side once the listener got
		// the last ACK, which may be just after Dial returned: poll (at
		// most 30 s: a bound against hangs).
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			cs, err := sockDiagTCP(tcpStatesAll&^(1<<tcpListen), tc.ports)
			if err != nil {
				t.Fatalf("ports %v: %v", tc.ports, err)
			}
			got = map[uint16]int{}
			for _, s := range cs {
				got[s.port]++
			}
			if maps.Equal(got, tc.want) || time.Now().After(deadline) {
				break
			}
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("ports %v: sockets by port %v, want %v", tc.ports, got, tc.want)
		}
	}
}

// procUDPLine returns the line of /proc/self/net/udp (or udp6) for the
// socket inode, parsed by the collector's /proc path.
func procUDPLine(t *testing.T, v6 bool, inode uint64) (udpLine, bool) {
	t.Helper()
	name := "/proc/self/net/udp"
	if v6 {
		name += "6"
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var mine udpLine
	found := false
	if err := parseUDPLines(b, func(l udpLine) {
		if l.inode == inode {
			mine, found = l, true
		}
	}); err != nil {
		t.Fatal(err)
	}
	return mine, found
}

// socketInode is the inode of a socket, as /proc and sock_diag show it.
func socketInode(t *testing.T, c syscall.Conn) uint64 {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return st.Ino
}

// TestSockDiagUDP checks the UDP dump and the exact requests against
// /proc/self/net/udp{,6}: for an IPv4 and an IPv6 socket with a small
// receive buffer, never read, flooded until the kernel drops datagrams,
// the same state, address, queue and drop count; then, once a socket is
// closed, or its address taken by a new socket, the lookup says gone.
func TestSockDiagUDP(t *testing.T) {
	type sock struct {
		conn  *net.UDPConn
		v6    bool
		inode uint64
	}
	var socks []sock
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
		if err != nil {
			if strings.HasPrefix(addr, "[") {
				t.Logf("no IPv6: %v", err)
				continue
			}
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SetReadBuffer(4096); err != nil {
			t.Fatal(err)
		}
		// 200 datagrams of 500 bytes: far more than 4 KiB holds.
		out, err := net.DialUDP("udp", nil, c.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 200; i++ {
			if _, err := out.Write(make([]byte, 500)); err != nil {
				t.Fatal(err)
			}
		}
		out.Close()
		socks = append(socks, sock{c, addr[0] == '[', socketInode(t, c)})
	}
	d, err := openDiag(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	all, err := d.dumpUDP()
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, s sock, got inetSocket) {
		t.Helper()
		l, ok := procUDPLine(t, s.v6, s.inode)
		if !ok {
			t.Fatalf("socket %d not in /proc/net/udp", s.inode)
		}
		port := uint16(s.conn.LocalAddr().(*net.UDPAddr).Port)
		if got.inode != l.inode || uint64(got.state) != l.st || !got.ip.Equal(l.ip) || got.port != port ||
			uint64(got.port) != l.port || uint64(got.rqueue) != l.rxQueue || !got.haveDrops || uint64(got.drops) != l.drops {
			t.Errorf("%s: sock_diag %+v; /proc/net/udp %+v", what, got, l)
		}
		if got.drops == 0 || got.rqueue == 0 || got.state != udpUnconnected {
			t.Errorf("%s: %+v: want unconnected, queued and dropped", what, got)
		}
	}
	var found []inetSocket
	for _, s := range socks {
		n := 0
		for _, g := range all {
			if g.inode == s.inode {
				same("dump", s, g)
				found = append(found, g)
				n++
			}
		}
		if n != 1 {
			t.Fatalf("socket %d found %d times in a dump of %d", s.inode, n, len(all))
		}
	}
	for i, s := range socks {
		got, ok, err := d.lookup(found[i])
		if err != nil || !ok {
			t.Fatalf("lookup of %+v: found %v, %v", found[i], ok, err)
		}
		same("lookup", s, got)
	}
	// Gone, and replaced by a socket on the same address (another cookie).
	for i, s := range socks {
		addr := s.conn.LocalAddr().(*net.UDPAddr)
		s.conn.Close()
		if _, ok, err := d.lookup(found[i]); ok || err != nil {
			t.Errorf("closed socket: found %v, %v", ok, err)
		}
		c, err := net.ListenUDP("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, ok, err := d.lookup(found[i]); ok || err != nil {
			t.Errorf("socket replaced on %v: found %v, %v", addr, ok, err)
		}
	}
}

// TestSockDiagTCPLookup: a listener found by a dump is found again by an
// exact request, with its accept queue; not once closed, nor when a new
// listener has its address.
func TestSockDiagTCPLookup(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	d, err := openDiag(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	ls, err := d.dumpTCP(1<<tcpListen, []uint16{port})
	if err != nil || len(ls) != 1 {
		t.Fatalf("dump: %+v, %v", ls, err)
	}
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got inetSocket
	testutil.Eventually(t, 30*time.Second, "the connection in the accept queue", func() bool {
		var ok bool
		got, ok, err = d.lookup(ls[0])
		if err != nil || !ok {
			t.Fatalf("lookup: found %v, %v", ok, err)
		}
		return got.rqueue == 1
	})
	if got.inode != ls[0].inode || got.state != tcpListen || got.wqueue != ls[0].wqueue || got.port != port {
		t.Errorf("lookup %+v, dump %+v", got, ls[0])
	}
	l.Close()
	if _, ok, err := d.lookup(ls[0]); ok || err != nil {
		t.Errorf("closed listener: found %v, %v", ok, err)
	}
	l2, err := net.Listen("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, ok, err := d.lookup(ls[0]); ok || err != nil {
		t.Errorf("listener replaced: found %v, %v", ok, err)
	}
}

// TestSockDiagTCPListenDrops checks a listener's drops from sock_diag (a
// dump and an exact request) against the kernel's own count for its
// network namespace, TcpExtListenDrops: in a namespace of the test's own,
// where the listener (backlog 1, never accepting, 8 clients connecting)
// is the only one, the two are the same drops.
func TestSockDiagTCPListenDrops(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("a network namespace of the test's own needs root")
		}
		t.Skip("a network namespace of the test's own needs root")
	}
	type result struct {
		before, after    uint64 // ListenDrops read before and after the requests
		overflows        uint64
		dump, lookup     inetSocket
		dumped, lookedUp int
		err              error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, and the
		// namespace with it.
		runtime.LockOSThread()
		var r result
		r.err = func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return err
			}
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			ifr, err := unix.NewIfreq("lo")
			if err != nil {
				return err
			}
			ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
			if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
				return err
			}
			l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(l)
			if err := unix.Bind(l, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
				return err
			}
			if err := unix.Listen(l, 1); err != nil {
				return err
			}
			sa, err := unix.Getsockname(l)
			if err != nil {
				return err
			}
			for range 8 {
				c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				defer unix.Close(c)
				if err := unix.Connect(c, sa); err != nil && err != unix.EINPROGRESS {
					return err
				}
			}
			counts := func() (drops, overflows uint64, err error) {
				b, err := os.ReadFile("/proc/thread-self/net/netstat")
				if err != nil {
					return 0, 0, err
				}
				var names []string
				for _, line := range strings.Split(string(b), "\n") {
					f := strings.Fields(line)
					if len(f) == 0 || f[0] != "TcpExt:" {
						continue
					}
					if names == nil {
						names = f
						continue
					}
					for i := 1; i < len(f) && i < len(names); i++ {
						v, _ := strconv.ParseUint(f[i], 10, 64)
						switch names[i] {
						case "ListenDrops":
							drops = v
						case "ListenOverflows":
							overflows = v
						}
					}
				}
				return drops, overflows, nil
			}
			// The clients' SYNs past the backlog are dropped at once;
			// their retransmits (1 s, 3 s, ...) add more while we read.
			for deadline := time.Now().Add(10 * time.Second); r.before == 0; time.Sleep(10 * time.Millisecond) {
				if r.before, _, err = counts(); err != nil || time.Now().After(deadline) {
					return err
				}
			}
			d, err := openDiag(nil)
			if err != nil {
				return err
			}
			defer d.close()
			ls, err := d.dumpTCP(1<<tcpListen, nil)
			if err != nil {
				return err
			}
			r.dumped = len(ls)
			if len(ls) == 1 {
				r.dump = ls[0]
				var ok bool
				if r.lookup, ok, err = d.lookup(ls[0]); err != nil {
					return err
				} else if ok {
					r.lookedUp = 1
				}
			}
			r.after, r.overflows, err = counts()
			return err
		}()
		ch <- r
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("ListenDrops %d..%d (ListenOverflows %d); sock_diag: dump %d, exact request %d", r.before, r.after, r.overflows, r.dump.drops, r.lookup.drops)
	if r.before == 0 {
		t.Fatal("the kernel counted no listen drop in 10 s")
	}
	if r.dumped != 1 || r.lookedUp != 1 {
		t.Fatalf("%d listeners in the namespace's dump, %d found by an exact request; want 1 and 1", r.dumped, r.lookedUp)
	}
	for what, s := range map[string]inetSocket{"dump": r.dump, "exact request": r.lookup} {
		if !s.haveDrops || uint64(s.drops) < r.before || uint64(s.drops) > r.after {
			t.Errorf("%s: drops %d (have %v), want within the namespace's ListenDrops %d..%d", what, s.drops, s.haveDrops, r.before, r.after)
		}
	}
}
