package collector

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// networkCollector reports the KDC's listening sockets and the kernel
// counters that show lost requests, in the KDC's network namespace: UDP
// sockets and counters from /proc/PID/net of a KDC process; TCP sockets
// from sock_diag when the exporter shares that namespace (see
// tcpdiag_linux.go), else from /proc/PID/net/tcp{,6}. The KDC's sockets
// are those open in a KDC process; when its descriptors cannot be read
// (the exporter does not run as root), those bound to the kdc_listen and
// kdc_tcp_listen addresses of kdc.conf.
type networkCollector struct {
	scan           *procScanner
	conf           *confSource
	fs             procfs.FS
	procPath       string
	tcpConnections bool // count connections by state (the costly part)
	warn           *onceLogger
	diagBuf        []byte    // sock_diag replies, kept between scrapes
	diag           *diagConn // kept between scrapes; nil: to open
	udpMemo        sockMemo  // the KDC's UDP sockets at the last dump
	tcpMemo        sockMemo  // its TCP listeners at the last dump
	nsFor          procID    // the KDC process nsRel is for
	nsRel          netnsRelation

	udpQueue, udpDrops, tcpQueue, tcpLimit, tcpDrops, tcpConns,
	udpRcvbuf, udpInErrors, listenOverflows, listenDrops *prometheus.Desc
}

// Socket states in /proc/net/tcp (include/net/tcp_states.h).
const (
	udpUnconnected = 0x07 // TCP_CLOSE: a bound, unconnected UDP socket
	tcpListen      = 0x0A
	// tcpStatesAll selects every state in a sock_diag request (a bitmask
	// of 1<<state, TCP_ESTABLISHED=1 ... TCP_NEW_SYN_RECV=12).
	tcpStatesAll = 1<<13 - 1
)

// sizeofSockID is the size of struct inet_diag_sockid (linux/inet_diag.h).
const sizeofSockID = 48

// sockDiagRecvBufBytes is the buffer for sock_diag replies.
const sockDiagRecvBufBytes = 32 << 10

// tcpConnStates are the states counted for connections to the KDC port;
// all are always reported so that series do not come and go.
var tcpConnStates = []struct {
	code uint64
	name string
}{
	{0x01, "established"}, {0x03, "syn_recv"}, {0x04, "fin_wait1"}, {0x05, "fin_wait2"},
	{0x06, "time_wait"}, {0x08, "close_wait"}, {0x09, "last_ack"}, {0x0B, "closing"},
}

func newNetworkCollector(scan *procScanner, conf *confSource, pfs procfs.FS, procPath string, tcpConnections bool, logger log.Logger) *networkCollector {
	return &networkCollector{
		scan:           scan,
		conf:           conf,
		fs:             pfs,
		procPath:       procPath,
		tcpConnections: tcpConnections,
		warn:           newOnceLogger(logger),
		diagBuf:        make([]byte, sockDiagRecvBufBytes),
		udpQueue:       desc("kdc", "udp_receive_queue_bytes", "Memory charged to the receive queue of a KDC UDP socket: datagrams not yet read by the KDC, kernel overhead included; the kernel drops datagrams once it reaches the socket receive buffer size.", "address"),
		udpDrops:       prometheus.NewDesc(MetricUDPDrops, "Datagrams the kernel dropped on a KDC UDP socket, mostly because its receive buffer was full.", []string{"address"}, nil),
		tcpQueue:       desc("kdc", "tcp_listen_queue_length", "Connections completed and waiting in the accept queue of a KDC TCP listening socket.", "address"),
		tcpDrops:       desc("kdc", "tcp_listen_drops_total", "SYNs and connections a KDC TCP listening socket dropped (its sk_drops: accept queue overflows, a full SYN queue); from sock_diag only.", "address"),
		tcpLimit:       desc("kdc", "tcp_listen_queue_limit", "Backlog of a KDC TCP listening socket (what listen() got: kdc_tcp_listen_backlog capped by net.core.somaxconn); connections are dropped once the accept queue holds more than this.", "address"),
		tcpConns:       desc("kdc", "tcp_connections", "TCP connections to the KDC's listening addresses, by state.", "state"),
		udpRcvbuf: desc("host", "udp_receive_buffer_errors_total",
			"UDP datagrams dropped because a socket receive buffer was full, in the KDC's network namespace (RcvbufErrors of /proc/net/snmp, snmp6).", "proto"),
		udpInErrors: desc("host", "udp_in_errors_total",
			"UDP datagrams that could not be delivered (receive buffer errors included), in the KDC's network namespace.", "proto"),
		listenOverflows: prometheus.NewDesc(MetricTCPListenOverflows,
			"Times a TCP accept queue was full when a connection completed (TcpExt ListenOverflows), in the KDC's network namespace.", nil, nil),
		listenDrops: desc("host", "tcp_listen_drops_total",
			"SYNs and connections dropped by listening TCP sockets (TcpExt ListenDrops), in the KDC's network namespace."),
	}
}

func (c *networkCollector) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.udpQueue, c.udpDrops, c.tcpQueue, c.tcpLimit, c.tcpDrops, c.tcpConns,
		c.udpRcvbuf, c.udpInErrors, c.listenOverflows, c.listenDrops} {
		ch <- d
	}
}

// selector decides which sockets are the KDC's.
type selector struct {
	inodes  map[uint64]bool // from the KDC's fds; nil: match by address
	udp     []listenAddr
	tcp     []listenAddr
	byPorts bool
}

func (s *selector) match(inode uint64, ip net.IP, port uint64, addrs []listenAddr) bool {
	if !s.byPorts {
		return s.inodes[inode]
	}
	for _, a := range addrs {
		if a.matches(ip, port) {
			return true
		}
	}
	return false
}

func (c *networkCollector) Update(ch chan<- prometheus.Metric) error {
	snap, err := c.scan.get()
	if err != nil {
		return err
	}
	np := snap.netProc()
	if np == nil {
		return nil // no KDC: no sockets and no namespace to report on
	}
	// kdc.conf problems are the kdcconf collector's to report; here the
	// settings only add the accept queue limit and the port fallback.
	settings, confErr := c.conf.settings(snap.kdcArgs.realms)
	sel := &selector{}
	// An idle process has the same files as at its last read (procmemo.go).
	if np.idle && np.memo.haveSockets {
		sel.inodes = np.memo.sockets
	} else if sel.inodes, err = socketInodes(c.fs, np.pid); err == nil && np.memo != nil {
		np.memo.sockets, np.memo.haveSockets = sel.inodes, true
	}
	denied := c.scan.access.note(progKDC, "fd_links", np, "fd", err, "finding its sockets by the ports in kdc.conf")
	switch {
	case err == nil:
	case gone(err):
		return nil
	case denied && settings != nil:
		sel.byPorts, sel.udp, sel.tcp = true, settings.udpListen, settings.tcpListen
	case denied:
		return fmt.Errorf("cannot read krb5kdc's file descriptors (%v) and kdc.conf gives no ports (%v)", err, confErr)
	default:
		return fmt.Errorf("reading krb5kdc's file descriptors: %w", err)
	}
	rel := c.netns(np)
	v6, err := c.updateUDP(ch, np, sel, rel)
	if err != nil {
		if gone(err) {
			return nil
		}
		return err
	}
	if err := c.updateTCP(ch, np, sel, settings, rel); err != nil {
		if gone(err) {
			return nil
		}
		return err
	}
	return c.hostCounters(ch, np, v6)
}

// updateUDP reports each KDC UDP address; sockets sharing one are summed.
// v6 tells whether one of them is an IPv6 socket.
func (c *networkCollector) updateUDP(ch chan<- prometheus.Metric, np *kdcProc, sel *selector, rel netnsRelation) (v6 bool, err error) {
	socks, err := c.udpSockets(np, sel, rel)
	if err != nil {
		return false, err
	}
	var sums addrSums
	for _, s := range socks {
		if s.state != udpUnconnected || !sel.match(s.inode, s.ip, uint64(s.port), sel.udp) {
			continue
		}
		v6 = v6 || s.family == unix.AF_INET6
		sum, _ := sums.at(hostPort(s.ip, uint64(s.port)))
		sum.a += float64(s.rqueue)
		sum.b += float64(s.drops)
	}
	for _, s := range sums {
		ch <- gauge(c.udpQueue, s.a, s.addr)
		ch <- counter(c.udpDrops, s.b, s.addr)
	}
	return v6, nil
}

// addrSums are sums per socket address ("host:port", so that sockets that
// print the same are summed): a KDC has a few, so a slice, not a map.
type addrSums []addrSum

type addrSum struct {
	addr string
	a, b float64
}

// at returns the sums of addr, new (zero) if it had none.
func (s *addrSums) at(addr string) (sum *addrSum, isNew bool) {
	for i := range *s {
		if (*s)[i].addr == addr {
			return &(*s)[i], false
		}
	}
	*s = append(*s, addrSum{addr: addr})
	return &(*s)[len(*s)-1], true
}

// udpSockets returns the KDC's UDP sockets (the caller keeps the
// unconnected ones): from sock_diag when it sees the KDC's namespace, else
// from /proc/PID/net/udp{,6}, which cost two walks of the kernel's UDP
// hash each (read to the end, then for the end; 16,384 slots here).
func (c *networkCollector) udpSockets(np *kdcProc, sel *selector, rel netnsRelation) ([]inetSocket, error) {
	if rel != otherNetns {
		socks, err := c.diagUDP(sel)
		switch {
		case err != nil:
			c.diagFailed("sock_diag_udp", "sock_diag failed for UDP; reading /proc/PID/net/udp instead", err)
		case len(socks) > 0 || rel == sameNetns:
			return socks, nil
		}
		// Namespaces unknown and no KDC socket seen: not ours, probably.
	}
	return c.procUDP(np, sel)
}

// diagUDP returns the KDC's UDP sockets from sock_diag: by exact requests
// while the KDC's socket inodes are those of the last dump, else from a
// dump of each address family.
func (c *networkCollector) diagUDP(sel *selector) ([]inetSocket, error) {
	d, err := c.diagConn()
	if err != nil {
		return nil, err
	}
	if c.udpMemo.valid(sel) {
		if socks, ok, err := c.udpMemo.lookup(d); err != nil || ok {
			return socks, err
		}
	}
	all, err := d.dumpUDP()
	if err != nil {
		return nil, err
	}
	var out []inetSocket
	for _, s := range all {
		if sel.match(s.inode, s.ip, uint64(s.port), sel.udp) {
			if !s.haveDrops {
				return nil, fmt.Errorf("sock_diag gave no memory counters (drops) for UDP socket %d", s.inode)
			}
			out = append(out, s)
		}
	}
	c.udpMemo.set(sel, out)
	return out, nil
}

// procUDP returns the KDC's UDP sockets from /proc/PID/net/udp{,6}.
func (c *networkCollector) procUDP(np *kdcProc, sel *selector) ([]inetSocket, error) {
	var out []inetSocket
	var family uint8
	add := func(l udpLine) {
		if sel.match(l.inode, l.ip, l.port, sel.udp) {
			out = append(out, inetSocket{state: uint8(l.st), ip: l.ip, port: uint16(l.port), inode: l.inode,
				rqueue: uint32(l.rxQueue), drops: uint32(l.drops), haveDrops: true, family: family})
		}
	}
	for _, name := range []string{"net/udp", "net/udp6"} {
		family = unix.AF_INET
		if name == "net/udp6" {
			family = unix.AF_INET6
		}
		b, err := c.scan.files.readAll(np.file(name))
		if err == nil {
			err = parseUDPLines(b, add)
		}
		switch {
		case err == nil:
		case name == "net/udp6" && errors.Is(err, fs.ErrNotExist): // IPv6 disabled
		default:
			return nil, fmt.Errorf("reading socket table %s: %w", name, err)
		}
	}
	return out, nil
}

// sockMemo is the KDC's sockets of one protocol as the last sock_diag dump
// found them, and the KDC's socket inodes then. While the inodes stay the
// same (the KDC opened and closed no socket), the KDC has no other socket
// of the protocol, and each one is asked for by an exact request (a hash
// lookup) instead of a dump (a walk of the kernel's whole table). Not when
// sockets are matched by address (sel.byPorts): any process may bind one.
type sockMemo struct {
	inodes map[uint64]bool // nil: nothing kept
	socks  []inetSocket
}

func (m *sockMemo) valid(sel *selector) bool {
	return m.inodes != nil && !sel.byPorts && maps.Equal(m.inodes, sel.inodes)
}

func (m *sockMemo) set(sel *selector, socks []inetSocket) {
	m.inodes, m.socks = nil, nil
	if !sel.byPorts && sel.inodes != nil {
		m.inodes, m.socks = sel.inodes, socks
	}
}

// lookup asks for each kept socket again; ok is false (and the memo
// cleared) when one is gone or replaced: time for a dump.
func (m *sockMemo) lookup(d *diagConn) (socks []inetSocket, ok bool, err error) {
	socks = make([]inetSocket, 0, len(m.socks))
	for _, s := range m.socks {
		got, found, err := d.lookup(s)
		if err != nil {
			return nil, false, err
		}
		if !found || got.inode != s.inode {
			*m = sockMemo{}
			return nil, false, nil
		}
		if s.haveDrops && !got.haveDrops {
			return nil, false, fmt.Errorf("sock_diag gave no memory counters (drops) for socket %d", s.inode)
		}
		socks = append(socks, got)
	}
	return socks, true, nil
}

// diagConn returns the kept sock_diag socket, opening it if need be.
func (c *networkCollector) diagConn() (*diagConn, error) {
	if c.diag == nil {
		d, err := openDiag(c.diagBuf)
		if err != nil {
			return nil, err
		}
		c.diag = d
	}
	return c.diag, nil
}

// diagFailed closes the sock_diag socket after an error (a reply may be
// left half read) and forgets the sockets kept; the next scrape tries
// sock_diag again.
func (c *networkCollector) diagFailed(key, msg string, err error) {
	c.warn.log(key, "msg", msg, "err", err)
	if c.diag != nil {
		c.diag.close()
		c.diag = nil
	}
	c.udpMemo, c.tcpMemo = sockMemo{}, sockMemo{}
}

// netns is kdcNetns for np, kept while np is the same process: a process
// does not change network namespace (MIT's daemons never call setns or
// unshare), and neither does the exporter.
func (c *networkCollector) netns(np *kdcProc) netnsRelation {
	if id := np.id(); id != c.nsFor {
		c.nsFor, c.nsRel = id, kdcNetns(c.procPath, np.pid)
	}
	return c.nsRel
}

// udpLine is what the collector uses of a line of /proc/net/udp{,6}.
type udpLine struct {
	ip                       net.IP
	port, st, rxQueue, inode uint64
	drops                    uint64
}

// parseUDPLines parses /proc/net/udp or udp6 (after the header line:
// "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt
// uid timeout inode ref pointer drops"), addresses in hex as the kernel
// prints them: each 32-bit word in host (here little-endian) order, as
// procfs reads them.
func parseUDPLines(b []byte, each func(udpLine)) error {
	first := true
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if first {
			first = false
			continue
		}
		var f [13][]byte
		n := 0
		for rest := line; n < len(f); n++ {
			if f[n], rest = nextField(rest); f[n] == nil {
				break
			}
		}
		if n == 0 {
			continue // an empty line
		}
		if n < 13 {
			return fmt.Errorf("socket line with %d fields: %q", n, truncate(line))
		}
		var l udpLine
		hexIP, hexPort, ok := bytes.Cut(f[1], []byte(":"))
		var err error
		if ok {
			l.ip, err = parseHexIP(hexIP)
		}
		if !ok || err != nil {
			return fmt.Errorf("local address %q", f[1])
		}
		tx, rx, ok := bytes.Cut(f[4], []byte(":"))
		var errs [5]error
		l.port, errs[0] = strconv.ParseUint(string(hexPort), 16, 64)
		l.st, errs[1] = strconv.ParseUint(string(f[3]), 16, 64)
		_, errs[2] = strconv.ParseUint(string(tx), 16, 64)
		l.rxQueue, errs[3] = strconv.ParseUint(string(rx), 16, 64)
		l.inode, errs[4] = strconv.ParseUint(string(f[9]), 0, 64)
		if err := errors.Join(errs[:]...); err != nil || !ok {
			return fmt.Errorf("socket line %q: %v", truncate(line), err)
		}
		if l.drops, err = strconv.ParseUint(string(f[12]), 0, 64); err != nil {
			return fmt.Errorf("drops in %q: %w", truncate(line), err)
		}
		each(l)
	}
	return nil
}

// parseHexIP decodes an address of /proc/net/{tcp,udp}{,6}.
func parseHexIP(h []byte) (net.IP, error) {
	var raw [16]byte
	n, err := hex.Decode(raw[:], h)
	if err != nil || (n != 4 && n != 16) {
		return nil, fmt.Errorf("address %q", h)
	}
	ip := make(net.IP, n)
	for w := 0; w < n; w += 4 {
		ip[w], ip[w+1], ip[w+2], ip[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	return ip, nil
}

// updateTCP reports the KDC's listening sockets (for them rqueue is the
// accept queue) and the connections to their addresses by state.
func (c *networkCollector) updateTCP(ch chan<- prometheus.Metric, np *kdcProc, sel *selector, settings *kdcSettings, rel netnsRelation) error {
	listeners, conns, fromKernel, err := c.tcpSockets(np, sel, rel)
	if err != nil {
		return err
	}
	var sums, drops addrSums
	computed := -1.0 // the limit from kdc.conf, worked out when needed
	for _, l := range listeners {
		addr := hostPort(l.ip, uint64(l.port))
		sum, isNew := sums.at(addr)
		switch {
		case fromKernel:
			sum.b = float64(l.wqueue) // what listen() got
		case isNew:
			if computed < 0 {
				computed = c.acceptQueueLimit(settings)
			}
			sum.b = computed
		}
		sum.a += float64(l.rqueue)
		if l.haveDrops {
			d, _ := drops.at(addr)
			d.a += float64(l.drops)
		}
	}
	for _, s := range sums {
		ch <- gauge(c.tcpQueue, s.a, s.addr)
		if s.b > 0 {
			ch <- gauge(c.tcpLimit, s.b, s.addr)
		}
	}
	for _, d := range drops {
		ch <- counter(c.tcpDrops, d.a, d.addr)
	}
	if len(listeners) == 0 || !c.tcpConnections {
		return nil
	}
	counts := make([]float64, len(tcpConnStates))
	for _, s := range conns {
		for _, l := range listeners {
			if l.port != s.port || !(l.ip.IsUnspecified() || l.ip.Equal(s.ip)) {
				continue
			}
			for i, st := range tcpConnStates {
				if st.code == uint64(s.state) {
					counts[i]++
				}
			}
			break
		}
	}
	for i, s := range tcpConnStates {
		ch <- gauge(c.tcpConns, counts[i], s.name)
	}
	return nil
}

// inetSocket is a TCP or UDP socket from sock_diag or /proc/net/*.
type inetSocket struct {
	state          uint8
	ip             net.IP
	port           uint16
	inode          uint64
	rqueue, wqueue uint32 // wqueue of a listener: its backlog (sock_diag only)
	drops          uint32 // UDP; of a TCP listener from sock_diag: its listen drops
	haveDrops      bool

	// sock_diag only: what an exact request for the socket needs.
	proto, family uint8
	id            [sizeofSockID]byte // inet_diag_sockid, cookie included
}

// netnsRelation is how the KDC's network namespace relates to ours.
type netnsRelation int

const (
	sameNetns netnsRelation = iota
	otherNetns
	unknownNetns
)

// tcpSockets returns the KDC's listening sockets and the other sockets on
// their ports: from sock_diag when it sees the KDC's namespace, else from
// /proc/PID/net/tcp{,6}. fromKernel means the listeners' backlog is known.
func (c *networkCollector) tcpSockets(np *kdcProc, sel *selector, rel netnsRelation) (listeners, conns []inetSocket, fromKernel bool, err error) {
	if rel != otherNetns {
		listeners, conns, err = c.diagKDCSockets(sel, c.tcpConnections)
		switch {
		case err != nil:
			c.diagFailed("sock_diag", "sock_diag failed; reading /proc/PID/net/tcp instead", err)
		case len(listeners) > 0 || rel == sameNetns:
			return listeners, conns, true, nil
		}
		// Namespaces unknown and no KDC listener seen: not ours, probably.
	}
	nsfs, err := procfs.NewFS(np.dir)
	if err != nil {
		return nil, nil, false, err
	}
	lines, err := readSockets(nsfs.NetTCP, nsfs.NetTCP6)
	if err != nil {
		return nil, nil, false, err
	}
	for _, l := range lines {
		s := inetSocket{state: uint8(l.St), ip: l.LocalAddr, port: uint16(l.LocalPort), inode: l.Inode, rqueue: uint32(l.RxQueue)}
		if s.state == tcpListen {
			if sel.match(s.inode, s.ip, l.LocalPort, sel.tcp) {
				listeners = append(listeners, s)
			}
		} else {
			conns = append(conns, s)
		}
	}
	return listeners, conns, false, nil
}

// diagKDCSockets asks sock_diag for the listening sockets, keeps the KDC's,
// then asks for the other sockets on their ports: two requests, each one
// walk of the kernel's table for both address families (a v6 wildcard
// listener's IPv4 clients show up as v4-mapped AF_INET6 sockets). The
// second walks the whole established hash: measured here (262,144
// buckets) 2-5 ms of CPU with few sockets, see BenchmarkSockDiagTimeWait
// for many; a listener dump takes 0.04-0.3 ms (16,384 buckets). While the
// KDC's socket inodes stay those of the last listener dump, the listeners
// are asked for one by one instead (sockMemo).
func (c *networkCollector) diagKDCSockets(sel *selector, withConns bool) (listeners, conns []inetSocket, err error) {
	d, err := c.diagConn()
	if err != nil {
		return nil, nil, err
	}
	ok := false
	if c.tcpMemo.valid(sel) {
		if listeners, ok, err = c.tcpMemo.lookup(d); err != nil {
			return nil, nil, err
		}
	}
	if !ok {
		ls, err := d.dumpTCP(1<<tcpListen, nil)
		if err != nil {
			return nil, nil, err
		}
		listeners = listeners[:0]
		for _, s := range ls {
			if sel.match(s.inode, s.ip, uint64(s.port), sel.tcp) {
				listeners = append(listeners, s)
			}
		}
		c.tcpMemo.set(sel, listeners)
	}
	var ports []uint16
	kept := listeners[:0:0]
	for _, s := range listeners {
		if s.state != tcpListen {
			continue // a guard: a listener leaves LISTEN only as it closes, and is then gone
		}
		kept = append(kept, s)
		if !slices.Contains(ports, s.port) {
			ports = append(ports, s.port)
		}
	}
	listeners = kept
	if !withConns || len(ports) == 0 {
		return listeners, nil, nil
	}
	conns, err = d.dumpTCP(tcpStatesAll&^(1<<tcpListen), ports)
	if err != nil {
		return nil, nil, err
	}
	return listeners, conns, nil
}

// acceptQueueLimit is what listen() got: the backlog asked for, capped by
// somaxconn; 0 when unknown.
func (c *networkCollector) acceptQueueLimit(s *kdcSettings) float64 {
	if s == nil {
		return 0
	}
	limit := s.tcpListenBacklog
	if v, err := c.fs.SysctlInts("net.core.somaxconn"); err == nil && len(v) == 1 && v[0] > 0 {
		limit = min(limit, v[0])
	}
	return float64(limit)
}

// hostCounters reports the namespace's UDP and TCP listen counters. The
// IPv6 UDP ones only while the KDC has an IPv6 UDP socket (v6): drops on
// IPv6 sockets cannot be the KDC's otherwise, and snmp6 is the dearest of
// the three files to generate (9 µs of 31 warm here, testdata/README.md
// round 7).
func (c *networkCollector) hostCounters(ch chan<- prometheus.Metric, p *kdcProc, v6 bool) error {
	files := c.scan.files
	b, err := files.readSingle(p.file("net/snmp"))
	if err != nil {
		if gone(err) {
			return nil
		}
		return fmt.Errorf("reading net/snmp: %w", err)
	}
	udp := tableRow(b, "Udp:")
	optCounter(ch, c.udpRcvbuf, udp, "RcvbufErrors", "udp")
	optCounter(ch, c.udpInErrors, udp, "InErrors", "udp")
	if v6 {
		b, err = files.readSingle(p.file("net/snmp6"))
		switch {
		case err == nil:
			udp6 := keyColumn(b)
			optCounter(ch, c.udpRcvbuf, udp6, "Udp6RcvbufErrors", "udp6")
			optCounter(ch, c.udpInErrors, udp6, "Udp6InErrors", "udp6")
		case gone(err): // IPv6 disabled: no snmp6
		default:
			return fmt.Errorf("reading net/snmp6: %w", err)
		}
	}
	b, err = files.readSingle(p.file("net/netstat"))
	if err != nil {
		if gone(err) {
			return nil
		}
		return fmt.Errorf("reading net/netstat: %w", err)
	}
	tcpExt := tableRow(b, "TcpExt:")
	optCounter(ch, c.listenOverflows, tcpExt, "ListenOverflows")
	optCounter(ch, c.listenDrops, tcpExt, "ListenDrops")
	return nil
}

// optCounter sends a counter the kernel may not have.
func optCounter(ch chan<- prometheus.Metric, d *prometheus.Desc, lookup func(string) (float64, bool), name string, labels ...string) {
	if v, ok := lookup(name); ok {
		ch <- counter(d, v, labels...)
	}
}

// tableRow returns a lookup in the table of /proc/net/snmp or netstat
// whose two lines start with prefix ("Udp:"): a line of names, then a line
// of values. A name missing, or a value that is not a number, is absent.
// The lookup walks both lines side by side; the file is read again for
// the next scrape, so it copies nothing.
func tableRow(b []byte, prefix string) func(name string) (float64, bool) {
	var names, values []byte
	for len(b) > 0 && values == nil {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if rest, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			if names == nil {
				names = rest
			} else {
				values = rest
			}
		}
	}
	return func(name string) (float64, bool) {
		n, v := names, values
		for {
			var key, val []byte
			key, n = nextField(n)
			val, v = nextField(v)
			if key == nil || val == nil {
				return 0, false
			}
			if string(key) == name {
				f, err := strconv.ParseFloat(string(val), 64)
				return f, err == nil
			}
		}
	}
}

// nextField returns the first space-separated field of b and the rest;
// nil when there is none.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	if i == j {
		return nil, nil
	}
	return b[i:j], b[j:]
}

// keyColumn returns a lookup in /proc/net/snmp6, lines of "name value".
// The file is read again for the next scrape, so the lookup copies nothing.
func keyColumn(b []byte) func(name string) (float64, bool) {
	return func(name string) (float64, bool) {
		rest := b
		for len(rest) > 0 {
			line := rest
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				line, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			key, tail := nextField(line)
			if string(key) != name {
				continue
			}
			val, tail := nextField(tail)
			if extra, _ := nextField(tail); val == nil || extra != nil {
				continue
			}
			v, err := strconv.ParseFloat(string(val), 64)
			return v, err == nil
		}
		return 0, false
	}
}

// socketInodes returns the inodes of the sockets open in process pid.
func socketInodes(pfs procfs.FS, pid int) (map[uint64]bool, error) {
	p, err := pfs.Proc(pid)
	if err != nil {
		return nil, err
	}
	targets, err := p.FileDescriptorTargets()
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, t := range targets {
		if s, ok := strings.CutPrefix(t, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	return inodes, nil
}

// readSockets reads the IPv4 and the IPv6 table; a missing IPv6 table
// (IPv6 disabled) is not an error.
func readSockets[T ~[]E, E any](v4, v6 func() (T, error)) ([]E, error) {
	a, err := v4()
	if err != nil {
		return nil, fmt.Errorf("reading socket table: %w", err)
	}
	b, err := v6()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading IPv6 socket table: %w", err)
	}
	return append([]E(a), b...), nil
}

func hostPort(ip net.IP, port uint64) string {
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10))
}
