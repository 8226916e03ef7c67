package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// TCP sockets through NETLINK_SOCK_DIAG (what ss uses), because
// /proc/net/tcp lists every socket of the namespace as text: measured on
// the CI machine with 19,000 TIME_WAIT sockets left by load tests, reading
// it cost 90 ms of CPU per scrape. Here the kernel returns only the
// listening sockets and, through a bytecode filter, the sockets on the
// KDC's ports. For a listening socket rqueue is the accept queue length
// and wqueue the backlog listen() got.

// Layout of linux/inet_diag.h.
const (
	sizeofInetDiagReq   = 4 + sizeofSockID + 8 // the compatibility request
	sizeofInetDiagMsg   = 4 + sizeofSockID + 20
	tcpDiagGetSock      = 18 // TCPDIAG_GETSOCK
	inetDiagReqBytecode = 1  // INET_DIAG_REQ_BYTECODE attribute
	inetDiagBcJmp       = 1  // INET_DIAG_BC_JMP
	inetDiagBcSGE       = 2  // INET_DIAG_BC_S_GE
	inetDiagBcSLE       = 3  // INET_DIAG_BC_S_LE
	sizeofInetDiagReqV2 = 8 + sizeofSockID
	sockDiagByFamily    = 20 // SOCK_DIAG_BY_FAMILY
	inetDiagSkmeminfo   = 7  // INET_DIAG_SKMEMINFO attribute
	skMeminfoDrops      = 8  // SK_MEMINFO_DROPS, index in its u32 array
	inetDiagNoCookie    = ^uint32(0)
)

// kdcNetns tells whether sock_diag, which answers for the exporter's own
// network namespace, can describe the KDC's: only when procPath is a live
// procfs, and the namespaces are the same or (not root: not allowed to
// look) unknown.
func kdcNetns(procPath string, pid int) netnsRelation {
	if !isProcfs(procPath) {
		return otherNetns // a fixture tree, not this machine
	}
	var theirs, ours unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("%s/%d/ns/net", procPath, pid), &theirs); err != nil {
		return unknownNetns
	}
	if err := unix.Stat("/proc/self/ns/net", &ours); err != nil {
		return unknownNetns
	}
	if theirs.Dev == ours.Dev && theirs.Ino == ours.Ino {
		return sameNetns
	}
	return otherNetns
}

// sockDiagTCP dumps the TCP sockets of both address families in the given
// states (a bitmask of 1<<state) whose local port is one of ports (none:
// any), in the exporter's network namespace. It uses the compatibility
// request (TCPDIAG_GETSOCK, struct inet_diag_req), which the kernel
// answers for AF_INET and AF_INET6 in one walk of its tables; the v2
// request (SOCK_DIAG_BY_FAMILY) takes one family, so one walk each, and
// a walk of the connection table is the cost of this collector.
func sockDiagTCP(states uint32, ports []uint16) ([]inetSocket, error) {
	d, err := openDiag(nil)
	if err != nil {
		return nil, err
	}
	defer d.close()
	return d.dumpTCP(states, ports)
}

// diagConn is a NETLINK_SOCK_DIAG socket, which the network collector
// keeps between scrapes (closed after an error), with its receive buffer.
type diagConn struct {
	fd  int
	buf []byte
	seq uint32
}

// openDiag opens a sock_diag socket in the exporter's network namespace,
// receiving into buf (allocated when shorter than sockDiagRecvBufBytes).
func openDiag(buf []byte) (*diagConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if len(buf) < sockDiagRecvBufBytes {
		buf = make([]byte, sockDiagRecvBufBytes)
	}
	return &diagConn{fd: fd, buf: buf}, nil
}

func (d *diagConn) close() { unix.Close(d.fd) }

// dumpTCP is sockDiagTCP on d.
func (d *diagConn) dumpTCP(states uint32, ports []uint16) ([]inetSocket, error) {
	var out []inetSocket
	err := d.query(diagRequest(states, ports), true, func(m []byte) {
		s := parseDiagMsg(m)
		s.proto = unix.IPPROTO_TCP
		out = append(out, s)
	})
	return out, err
}

// dumpUDP returns the UDP sockets of both address families, each with its
// drop count: one v2 request per family (it takes one), each one walk of
// the kernel's UDP hash, as a read of /proc/net/udp or udp6 is.
func (d *diagConn) dumpUDP() ([]inetSocket, error) {
	var out []inetSocket
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		req := diagRequestV2(family, unix.IPPROTO_UDP, tcpStatesAll, nil)
		err := d.query(req, true, func(m []byte) {
			s := parseDiagMsg(m)
			s.proto = unix.IPPROTO_UDP
			out = append(out, s)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// lookup asks the kernel for the socket s (from an earlier reply) again,
// by its addresses and cookie: a hash lookup, not a walk. found is false
// when that socket is gone (ENOENT), or the addresses now lead to another
// socket (ESTALE: the cookie differs).
func (d *diagConn) lookup(s inetSocket) (got inetSocket, found bool, err error) {
	id := s.id
	if s.proto == unix.IPPROTO_UDP {
		// udp_dump_one looks the socket up as the receiver of a datagram
		// from idiag_src to idiag_dst: the local side goes in dst.
		copy(id[0:2], s.id[2:4])
		copy(id[2:4], s.id[0:2])
		copy(id[4:20], s.id[20:36])
		copy(id[20:36], s.id[4:20])
	}
	n := 0
	err = d.query(diagRequestV2(s.family, s.proto, tcpStatesAll, id[:]), false, func(m []byte) {
		got = parseDiagMsg(m)
		got.proto = s.proto
		n++
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESTALE) {
		return got, false, nil
	}
	if err == nil && n != 1 {
		err = fmt.Errorf("sock_diag: %d replies to a socket lookup", n)
	}
	return got, err == nil, err
}

// query sends req and calls each with the body of every reply message
// (an inet_diag_msg and its attributes) until the reply ends: NLMSG_DONE
// for a dump, the one message for an exact request. A reply to an earlier
// request (a timed-out one) is skipped by its sequence number.
func (d *diagConn) query(req []byte, dump bool, each func([]byte)) error {
	d.seq++
	binary.NativeEndian.PutUint32(req[8:], d.seq)
	if err := unix.Sendto(d.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sock_diag request: %w", err)
	}
	for {
		n, err := unix.Read(d.fd, d.buf)
		if err != nil {
			return fmt.Errorf("sock_diag reply: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(d.buf[:n])
		if err != nil {
			return fmt.Errorf("sock_diag reply: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != d.seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
						return fmt.Errorf("sock_diag: %w", syscall.Errno(errno))
					}
				}
				return nil
			}
			if len(m.Data) < sizeofInetDiagMsg {
				return errors.New("sock_diag: short inet_diag_msg")
			}
			each(m.Data)
			if !dump {
				return nil
			}
		}
	}
}

// diagRequestV2 builds nlmsghdr + inet_diag_req_v2 for one family and
// protocol, asking for the socket memory counters (drops) too: a dump of
// the sockets in states, or with id (an inet_diag_sockid, cookie
// included) the exact request for that one socket.
func diagRequestV2(family, proto uint8, states uint32, id []byte) []byte {
	size := unix.SizeofNlMsghdr + sizeofInetDiagReqV2
	b := make([]byte, size)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(size))
	ne.PutUint16(b[4:], sockDiagByFamily)
	flags := uint16(unix.NLM_F_REQUEST)
	if id == nil {
		flags |= unix.NLM_F_DUMP
	}
	ne.PutUint16(b[6:], flags)
	r := b[unix.SizeofNlMsghdr:]
	r[0], r[1] = family, proto
	r[2] = 1 << (inetDiagSkmeminfo - 1) // idiag_ext
	ne.PutUint32(r[4:], states)
	if id != nil {
		copy(r[8:8+sizeofSockID], id)
	} else {
		ne.PutUint32(r[8+40:], inetDiagNoCookie)
		ne.PutUint32(r[8+44:], inetDiagNoCookie)
	}
	return b
}

// diagRequest builds nlmsghdr + inet_diag_req (+ a bytecode filter that
// accepts a socket whose local port is one of ports), asking for the
// memory counters (drops) of listeners.
func diagRequest(states uint32, ports []uint16) []byte {
	bc := portFilter(ports)
	size := unix.SizeofNlMsghdr + sizeofInetDiagReq
	if bc != nil {
		size += unix.SizeofRtAttr + len(bc)
	}
	b := make([]byte, size)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(size))
	ne.PutUint16(b[4:], tcpDiagGetSock)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(b[8:], 1) // sequence number
	r := b[unix.SizeofNlMsghdr:]
	r[0] = unix.AF_INET // ignored by a dump: the kernel sets AF_UNSPEC
	if states == 1<<tcpListen {
		// idiag_ext: the socket memory counters of listeners, whose drops
		// are the listen drops (tcp_listendrop adds to sk_drops); not for
		// the connections, where they would cost 36 bytes a socket.
		r[3] = 1 << (inetDiagSkmeminfo - 1)
	}
	if len(ports) == 1 {
		// The kernel compares idiag_sport with every socket before
		// running the bytecode (much cheaper); the bytecode keeps the
		// filter exact where it does not.
		binary.BigEndian.PutUint16(r[4:], ports[0])
	}
	ne.PutUint32(r[4+sizeofSockID:], states)
	if bc != nil {
		a := r[sizeofInetDiagReq:]
		ne.PutUint16(a[0:], uint16(unix.SizeofRtAttr+len(bc)))
		ne.PutUint16(a[2:], inetDiagReqBytecode)
		copy(a[unix.SizeofRtAttr:], bc)
	}
	return b
}

// portFilter compiles "sport == p1 || sport == p2 || ..." to inet_diag
// bytecode (nil for no ports). Each op is {code, yes, no}: the kernel goes
// forward by yes when the condition holds, by no when not, and accepts the
// socket if it lands exactly on the end; "past the end" (+4) rejects. A
// port comparison is two ops, the second holding the port in its no.
// Per port: sport >= p, then sport <= p, then (except for the last port)
// a jump to the end, which accepts; a failed comparison goes on to the
// next port (the last port's, past the end). The kernel's audit follows
// the yes chain, which passes every port's first op: all targets valid.
func portFilter(ports []uint16) []byte {
	if len(ports) == 0 {
		return nil
	}
	n := len(ports)
	total := 20*(n-1) + 16
	bc := make([]byte, total)
	putOp := func(off int, code uint8, yes uint8, no uint16) {
		bc[off], bc[off+1] = code, yes
		binary.NativeEndian.PutUint16(bc[off+2:], no)
	}
	for i, p := range ports {
		off := 20 * i
		next := off + 20 // the next port's first op
		if i == n-1 {
			next = total + 4 // reject
		}
		putOp(off, inetDiagBcSGE, 8, uint16(next-off))
		putOp(off+4, 0, 0, p)
		putOp(off+8, inetDiagBcSLE, 8, uint16(next-(off+8)))
		putOp(off+12, 0, 0, p)
		if i < n-1 {
			putOp(off+16, inetDiagBcJmp, 4, uint16(total-(off+16)))
		}
	}
	return bc
}

// parseDiagMsg parses an inet_diag_msg and, of its attributes, the
// socket memory counters (INET_DIAG_SKMEMINFO) for the drop count.
func parseDiagMsg(d []byte) inetSocket {
	ne := binary.NativeEndian
	s := inetSocket{family: d[0], state: d[1]}
	id := d[4 : 4+sizeofSockID]
	copy(s.id[:], id)
	s.port = binary.BigEndian.Uint16(id[0:])
	if d[0] == unix.AF_INET {
		s.ip = net.IP(append([]byte(nil), id[4:8]...))
	} else {
		s.ip = net.IP(append([]byte(nil), id[4:20]...))
	}
	rest := d[4+sizeofSockID:]
	s.rqueue = ne.Uint32(rest[4:])
	s.wqueue = ne.Uint32(rest[8:])
	s.inode = uint64(ne.Uint32(rest[16:]))
	for a := d[sizeofInetDiagMsg:]; len(a) >= unix.SizeofRtAttr; {
		l := int(ne.Uint16(a[0:]))
		if l < unix.SizeofRtAttr || l > len(a) {
			break
		}
		if ne.Uint16(a[2:]) == inetDiagSkmeminfo && l >= unix.SizeofRtAttr+4*(skMeminfoDrops+1) {
			s.drops = ne.Uint32(a[unix.SizeofRtAttr+4*skMeminfoDrops:])
			s.haveDrops = true
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return s
}
