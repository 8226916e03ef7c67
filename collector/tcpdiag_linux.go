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
	sizeofSockID         = 48
	sizeofInetDiagReqV2  = 8 + sizeofSockID
	sizeofInetDiagMsg    = 4 + sizeofSockID + 20
	inetDiagReqBytecode  = 1 // INET_DIAG_REQ_BYTECODE attribute
	inetDiagBcSGE        = 2 // INET_DIAG_BC_S_GE
	inetDiagBcSLE        = 3 // INET_DIAG_BC_S_LE
	sockDiagRecvBufBytes = 32 << 10
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

// sockDiagTCP dumps the TCP sockets of one address family in the given
// states (a bitmask of 1<<state) whose local port is sport (0: any), in
// the exporter's network namespace.
func sockDiagTCP(family uint8, states uint32, sport uint16) ([]tcpSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, err
	}
	if err := unix.Sendto(fd, diagRequest(family, states, sport), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag request: %w", err)
	}
	var out []tcpSocket
	buf := make([]byte, sockDiagRecvBufBytes)
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

// diagRequest builds nlmsghdr + inet_diag_req_v2 (+ a bytecode filter
// "sport >= P && sport <= P").
func diagRequest(family uint8, states uint32, sport uint16) []byte {
	var bc []byte
	if sport != 0 {
		// Each condition is an op {code, yes, no} and an op whose "no"
		// holds the port; "yes" goes to the next condition, "no" jumps
		// past the end (+4), which rejects the socket.
		bc = make([]byte, 16)
		putOp := func(b []byte, code uint8, yes, no uint16) {
			b[0], b[1] = code, uint8(yes)
			binary.NativeEndian.PutUint16(b[2:], no)
		}
		putOp(bc[0:], inetDiagBcSGE, 8, 16+4)
		putOp(bc[4:], 0, 0, sport)
		putOp(bc[8:], inetDiagBcSLE, 8, 8+4)
		putOp(bc[12:], 0, 0, sport)
	}
	size := unix.SizeofNlMsghdr + sizeofInetDiagReqV2
	if bc != nil {
		size += unix.SizeofRtAttr + len(bc)
	}
	b := make([]byte, size)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(size))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(b[8:], 1) // sequence number
	r := b[unix.SizeofNlMsghdr:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], states)
	// The kernel compares idiag_sport with every socket before running the
	// bytecode (much cheaper); the bytecode keeps the filter exact where
	// it does not.
	binary.BigEndian.PutUint16(r[8:], sport)
	if bc != nil {
		a := r[sizeofInetDiagReqV2:]
		ne.PutUint16(a[0:], uint16(unix.SizeofRtAttr+len(bc)))
		ne.PutUint16(a[2:], inetDiagReqBytecode)
		copy(a[unix.SizeofRtAttr:], bc)
	}
	return b
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
