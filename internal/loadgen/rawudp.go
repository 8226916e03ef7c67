package loadgen

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawUDP is a connected UDP socket driven with raw system calls by one
// goroutine: sendmmsg and recvmmsg (non-blocking, so raw: no hand-off of
// the P) without the Go netpoller, and waits that block the thread itself. Going through the
// netpoller costs an epoll round trip and a scheduler pass per wake-up,
// and a blocking system call made the ordinary way lets the runtime's
// monitor hand the P off and poll every 20 µs; at a few µs of Kerberos
// work per request those dominated the generator's CPU.
type rawUDP struct {
	fd int
	// Receive side: one 8 KiB buffer and one control buffer (for the
	// kernel's arrival timestamp) per message.
	rhdr []unix.Mmsghdr
	riov []unix.Iovec
	rbuf [][]byte
	roob [][]byte
	// Send side, rebuilt for each batch: one iovec per datagram, one
	// message per run of datagrams of one length (UDP_SEGMENT), each
	// with its control buffer.
	shdr []unix.Mmsghdr
	siov []unix.Iovec
	soob [][]byte
	// gso: the kernel takes UDP_SEGMENT (Linux 4.18 and later); cleared
	// when it refuses it.
	gso bool
	// chunk bounds the datagrams one recv takes (see recvChunk).
	chunk int
	// Datagrams and messages handed to the kernel (tests).
	dgrams, msgs int
}

// dialRawUDP opens a UDP socket connected to addr (host:port), with room
// for n replies in flight, and kernel receive timestamps (SO_TIMESTAMPNS)
// so that replies read after a batching wait keep their true latency.
func dialRawUDP(addr string, n int) (*rawUDP, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	var sa unix.Sockaddr
	fam := unix.AF_INET
	if ip4 := ua.IP.To4(); ip4 != nil {
		s := &unix.SockaddrInet4{Port: ua.Port}
		copy(s.Addr[:], ip4)
		sa = s
	} else {
		fam = unix.AF_INET6
		s := &unix.SockaddrInet6{Port: ua.Port}
		copy(s.Addr[:], ua.IP.To16())
		sa = s
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	u := &rawUDP{fd: fd}
	// Room for every reply and request in flight, so the kernel drops none
	// (the kernel caps it at net.core.rmem_max; resends cover the rest).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 1<<20)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		u.close()
		return nil, fmt.Errorf("SO_TIMESTAMPNS: %w", err)
	}
	if err := unix.Connect(fd, sa); err != nil {
		u.close()
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	n = max(1, n)
	u.rhdr = make([]unix.Mmsghdr, n)
	u.riov = make([]unix.Iovec, n)
	u.rbuf = make([][]byte, n)
	u.roob = make([][]byte, n)
	for i := range u.rhdr {
		u.rbuf[i] = make([]byte, 8192)
		u.roob[i] = make([]byte, 64)
		u.riov[i].Base = &u.rbuf[i][0]
		u.riov[i].SetLen(len(u.rbuf[i]))
		h := &u.rhdr[i].Hdr
		h.Iov = &u.riov[i]
		h.SetIovlen(1)
		h.Control = &u.roob[i][0]
	}
	u.shdr = make([]unix.Mmsghdr, 0, n)
	u.siov = make([]unix.Iovec, 0, n)
	u.soob = make([][]byte, n)
	for i := range u.soob {
		u.soob[i] = make([]byte, unix.CmsgSpace(2))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&u.soob[i][0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
	}
	u.gso = true
	u.chunk = min(n, recvChunk())
	return u, nil
}

// recvChunk is how many datagrams one recvmmsg takes at most: half the
// kernel's skb_defer_max (net.core, 64 by default, so 32). Since Linux
// 6.18 a UDP socket hands each datagram it frees back to the CPU that
// allocated it (skb_attempt_defer_free: the KDC's, for its replies), and
// sends that CPU an inter-processor interrupt each time more than half
// skb_defer_max wait there between two of its flushes, which come with
// every datagram it sends. A batch of replies taken in one recvmmsg
// crossed that line about every other cycle (a batch is 32 replies at 64
// in flight): an IPI, a VM exit on a virtual machine, was 29 % of
// recvmmsg's CPU in the profile of the as load (9 % after). Taken 32 at
// a time with their Kerberos work between, the KDC's CPU mostly flushes
// (it answers) between two chunks. On older kernels, or with
// skb_defer_max 0 (the default chunk then), the bound only splits a
// larger batch into more calls.
func recvChunk() int {
	b, err := os.ReadFile("/proc/sys/net/core/skb_defer_max")
	if err != nil {
		return defaultRecvChunk
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 2 {
		return defaultRecvChunk
	}
	return n / 2
}

const defaultRecvChunk = 32

func (u *rawUDP) close() {
	if u.fd >= 0 {
		unix.Close(u.fd)
		u.fd = -1
	}
}

// queue adds a datagram to the next send batch; b must stay unchanged
// until send returns.
func (u *rawUDP) queue(b []byte) {
	u.siov = append(u.siov, unix.Iovec{Base: &b[0]})
	u.siov[len(u.siov)-1].SetLen(len(b))
}

// gsoMax bounds a run of datagrams sent as one UDP_SEGMENT message: the
// kernel takes at most 64 segments (UDP_MAX_SEGMENTS in older kernels)
// and 64 KiB; a segment must fit the path's MTU whole (1232: IPv6's
// minimum MTU less the headers), larger datagrams go alone.
const (
	gsoMaxSegs  = 64
	gsoMaxBytes = 60000
	gsoMaxLen   = 1232
)

// batch builds the messages of the queued datagrams: with gso, each run
// of consecutive datagrams of one length is one message with a
// UDP_SEGMENT control message, which the kernel sends as that many
// datagrams (on loopback it splits them only at the receiving socket: one
// route, one pass through IP and the device for the run; about 0.4 of
// the 1.7 µs a datagram costs the sender here).
func (u *rawUDP) batch() {
	u.shdr = u.shdr[:0]
	for i := 0; i < len(u.siov); {
		l := u.siov[i].Len
		k := 1
		if u.gso && l <= gsoMaxLen {
			for i+k < len(u.siov) && k < gsoMaxSegs && u.siov[i+k].Len == l && uint64(k+1)*l <= gsoMaxBytes {
				k++
			}
		}
		u.shdr = append(u.shdr, unix.Mmsghdr{})
		h := &u.shdr[len(u.shdr)-1].Hdr
		h.Iov = &u.siov[i]
		h.SetIovlen(k)
		if k > 1 {
			oob := u.soob[len(u.shdr)-1]
			*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = uint16(l)
			h.Control = &oob[0]
			h.SetControllen(len(oob))
		}
		i += k
	}
}

// send hands the queued datagrams to the kernel in as few sendmmsg calls
// as it takes, and empties the queue. A refused send (the ICMP port
// unreachable of an earlier datagram) returns unix.ECONNREFUSED with the
// queue emptied: the requests not sent wait for their resend.
func (u *rawUDP) send() error {
	defer func() { u.shdr, u.siov = u.shdr[:0], u.siov[:0] }()
	u.batch()
	for sent := 0; sent < len(u.shdr); {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(u.fd), uintptr(unsafe.Pointer(&u.shdr[sent])), uintptr(len(u.shdr)-sent), unix.MSG_DONTWAIT, 0, 0)
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			// The send buffer is full: the rest waits for its resend.
			return nil
		case (e == unix.EINVAL || e == unix.EIO || e == unix.ENOPROTOOPT) && u.gso && u.shdr[sent].Hdr.Controllen > 0:
			// No UDP_SEGMENT here (an older kernel, a device without
			// checksum offload): the rest one datagram per message.
			u.gso = false
			first := (uintptr(unsafe.Pointer(u.shdr[sent].Hdr.Iov)) - uintptr(unsafe.Pointer(&u.siov[0]))) / unsafe.Sizeof(u.siov[0])
			u.siov = append(u.siov[:0], u.siov[first:]...)
			u.batch()
			sent = 0
			continue
		case e != 0:
			return e
		}
		for _, h := range u.shdr[sent : sent+int(n)] {
			u.dgrams += int(h.Hdr.Iovlen)
		}
		u.msgs += int(n)
		sent += int(n)
	}
	return nil
}

// recv reads the datagrams waiting, up to u.chunk (recvChunk), without
// blocking: it returns 0 when none is there, u.chunk when more may be.
func (u *rawUDP) recv() (int, error) {
	m := u.chunk
	if m <= 0 || m > len(u.rhdr) {
		m = len(u.rhdr)
	}
	for i := range m {
		u.rhdr[i].Hdr.SetControllen(len(u.roob[i]))
	}
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(u.fd), uintptr(unsafe.Pointer(&u.rhdr[0])), uintptr(m), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		}
		return 0, e
	}
}

// msg is the i-th datagram of the last recv and its arrival time (def
// when the kernel gave none).
func (u *rawUDP) msg(i int, def time.Time) ([]byte, time.Time) {
	h := &u.rhdr[i]
	return u.rbuf[i][:h.Len], rxTimestamp(u.roob[i][:h.Hdr.Controllen], def)
}

// sleep blocks the calling thread for d without the Go scheduler: a
// RawSyscall keeps the P, so the runtime neither hands it off nor polls
// the thread. A signal (the runtime's preemption, the GC) cuts the sleep
// short, which is harmless: the caller loops. For a goroutine that may
// hold its P that long (no other goroutine needs it meanwhile).
func rawSleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// waitReadable blocks the thread until a datagram is waiting or d has
// passed (or a signal came), as rawSleep does.
func (u *rawUDP) waitReadable(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	fds := [1]unix.PollFd{{Fd: int32(u.fd), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(int64(d))
	_, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 && e != unix.EINTR {
		return e
	}
	if fds[0].Revents&unix.POLLERR != 0 {
		// A pending ICMP error: the next recv reports it.
		return nil
	}
	return nil
}

func isRefused(err error) bool { return errors.Is(err, unix.ECONNREFUSED) }
