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
	sizeofSockID        = 48
	sizeofInetDiagReq   = 4 + sizeofSockID + 8 // the compatibility request
	sizeofInetDiagMsg   = 4 + sizeofSockID + 20
	tcpDiagGetSock      = 18 // TCPDIAG_GETSOCK
	inetDiagReqBytecode = 1  // INET_DIAG_REQ_BYTECODE attribute
	inetDiagBcJmp       = 1  // INET_DIAG_BC_JMP
	inetDiagBcSGE       = 2  // INET_DIAG_BC_S_GE
	inetDiagBcSLE       = 3  // INET_DIAG_BC_S_LE
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
func sockDiagTCP(states uint32, ports []uint16) ([]tcpSocket, error) {
	return sockDiagTCPBuf(states, ports, nil)
}

// sockDiagTCPBuf is sockDiagTCP receiving into buf (allocated when shorter
// than sockDiagRecvBufBytes), which a collector keeps between scrapes.
func sockDiagTCPBuf(states uint32, ports []uint16, buf []byte) ([]tcpSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, err
	}
	if err := unix.Sendto(fd, diagRequest(states, ports), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag request: %w", err)
	}
	var out []tcpSocket
	if len(buf) < sockDiagRecvBufBytes {
		buf = make([]byte, sockDiagRecvBufBytes)
	}
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag reply: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("sock_diag reply: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
						return nil, fmt.Errorf("sock_diag: %w", syscall.Errno(errno))
					}
				}
				return out, nil
			}
			if len(m.Data) < sizeofInetDiagMsg {
				return nil, errors.New("sock_diag: short inet_diag_msg")
			}
			out = append(out, parseDiagMsg(m.Data))
		}
	}
}

// diagRequest builds nlmsghdr + inet_diag_req (+ a bytecode filter that
// accepts a socket whose local port is one of ports).
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

func parseDiagMsg(d []byte) tcpSocket {
	ne := binary.NativeEndian
	s := tcpSocket{state: d[1]}
	id := d[4 : 4+sizeofSockID]
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
	return s
}
