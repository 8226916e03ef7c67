package loadgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// The batched tcp load. MIT's KDC answers one request per TCP connection
// and closes it (TestKDCAnswersOneRequestPerTCPConnection), so each round
// trip of a login is its own connection, as libkrb5 makes it. What the
// batched generator saves is everything around the connection: no
// goroutine, net.Conn or netpoller per client, and no socket per
// connection. One goroutine keeps a few logins in flight, each on its own
// non-blocking socket, registered once with one raw epoll instance (edge
// triggered) and kept for the whole load: a round trip is connect, the
// length-prefixed request written at once (on loopback the handshake is
// done when connect returns; else on EPOLLOUT), the reply read with its
// kernel arrival stamp; the next round trip first dissolves the last
// connection with connect(AF_UNSPEC) (a reset, as a close with linger 0;
// the socket, its options and its epoll registration stay), then
// connects again from a new port. It sleeps while a batch of replies
// comes in, then takes every ready connection with one epoll_wait.
//
// Towards a loopback KDC, connect and write are one system call, and the
// handshake's last ACK rides on the request: sendto(MSG_FASTOPEN) on a
// socket with TCP_FASTOPEN_NO_COOKIE puts the request in the SYN. MIT's
// KDC does not take data from a SYN (no TCP_FASTOPEN on its listener:
// strace of its start shows SO_REUSEADDR, listen(fd, 5), nothing else),
// so its kernel acknowledges the SYN alone, and ours sends the request
// again at once with the ACK (TestTCPRequestRidesOnSYN): the KDC accepts
// the same connection with the same request, as it would an instant
// later. Three system calls per round trip instead of eight (socket,
// setsockopt, epoll_ctl, setsockopt, connect or write, close saved) and
// one segment less, whose sending and the listener's receiving loopback
// charges to the generator. Not across a network: there the generator's
// CPU is not taken from the KDC, and a middlebox that drops SYNs with
// data would cost a SYN timeout.
//
// MIT's KDC listens with a backlog of 5: connections beyond the ones it
// has accepted and 6 waiting are dropped at the SYN and retried by the
// kernel after a second, so the load keeps at most TCPMaxInflight
// connections open.

// TCPMaxInflight bounds the connections in flight of the batched tcp load.
const TCPMaxInflight = 6

// tcpSlot is one login in flight over TCP: its socket (kept for the
// whole load, reconnected for each round trip) and buffers.
type tcpSlot struct {
	fd        int  // -1: no socket
	connected bool // fd has (had) a connection: disconnect before the next
	synData   bool // connect with the request in the SYN (sendto MSG_FASTOPEN)
	busy      bool
	fl        krb5.LoginFlight
	req       []byte // length prefix + request
	wrote     bool
	replied   bool      // the whole reply came
	rbuf      []byte    // length prefix + reply so far
	first     time.Time // the login's first send: its latency counts from here
	sent      time.Time // this round trip's connect
	arrived   time.Time // kernel stamp of the reply's last bytes
}

// TCP is the tcp load on the batched generator: inflight logins (at
// most TCPMaxInflight) in flight for dur, or until limit successful
// logins when limit > 0.
func TCP(ctx context.Context, cfg Config, inflight int, dur time.Duration, limit int64) (*Result, error) {
	depth := max(1, min(inflight, TCPMaxInflight))
	c, err := cfg.Client(1, krb5.TCP)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sa, err := sockaddrOf(cfg.KDC)
	if err != nil {
		return nil, err
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	defer unix.Close(ep)
	tl := newTally(&cfg)
	var out recordLog
	cfg.measure()
	start := time.Now()
	tl.dl = newDeadline(start, dur, cfg.Timeout)
	err = tcpWorker(ctx, &cfg, tl, c, sa, ep, depth, start, tl.dl, limit, &out)
	res := &Result{Wall: time.Since(start)}
	cfg.measure()
	res.Records, res.Waits, res.Sockets = out.appendTo(nil), out.waits, out.sockets
	tl.result(res)
	if err != nil {
		return res, err
	}
	return res, ctx.Err()
}

// isLoopback: sa is on this machine's loopback (127.0.0.0/8, ::1).
func isLoopback(sa unix.Sockaddr) bool {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.IP(a.Addr[:]).IsLoopback()
	case *unix.SockaddrInet6:
		return net.IP(a.Addr[:]).IsLoopback()
	}
	return false
}

func sockaddrOf(addr string) (unix.Sockaddr, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		s := &unix.SockaddrInet4{Port: ta.Port}
		copy(s.Addr[:], ip4)
		return s, nil
	}
	s := &unix.SockaddrInet6{Port: ta.Port}
	copy(s.Addr[:], ta.IP.To16())
	return s, nil
}

func tcpWorker(ctx context.Context, cfg *Config, tl *tally, c *krb5.Client, sa unix.Sockaddr, ep, depth int, start time.Time, dl *deadline, limit int64, out *recordLog) error {
	slots := make([]tcpSlot, depth)
	for i := range slots {
		slots[i].fd = -1
	}
	defer func() {
		for i := range slots {
			slots[i].closeSocket()
		}
	}()
	var methods [krb5.StageResponse + 1]int
	defer tl.stages(&methods)
	fam, rsa, rsaLen := rawSockaddr(sa)
	synData := isLoopback(sa)
	var ok int64
	// finish ends slot s's login (err nil: its TGT came). Its connection
	// stays until the slot's next round trip dissolves it.
	finish := func(s *tcpSlot, at time.Time, err error) {
		s.busy = false
		if err == nil {
			methods[s.fl.Stage]++
			ok++
		}
		out.add(tl.note(Record{Start: s.first.Sub(start), Latency: at.Sub(s.first), Kind: KindAS, Class: krb5.Classify(err)}, err))
	}
	// roundTrip connects slot i's socket for the request in s.req and
	// sends it (see connect).
	roundTrip := func(i int, now time.Time) error {
		s := &slots[i]
		if err := s.open(ep, fam, i, synData, &out.sockets); err != nil {
			return err
		}
		s.wrote, s.replied, s.rbuf, s.sent = false, false, s.rbuf[:0], now
		return s.connect(rsa, rsaLen)
	}
	// next sends slot i's next request: its login's first AS-REQ, or the
	// one the last reply asked for. (No closure per request: one that
	// captures the slot escapes, an allocation per round trip.)
	next := func(i int, now time.Time, first bool) {
		s := &slots[i]
		var req []byte
		var err error
		if first {
			req, err = c.EncodeLoginFirst(append(s.req[:0], 0, 0, 0, 0), &s.fl)
		} else {
			req, err = c.EncodeLoginNext(append(s.req[:0], 0, 0, 0, 0), &s.fl)
		}
		if err != nil {
			finish(s, now, err)
			return
		}
		binary.BigEndian.PutUint32(req, uint32(len(req)-4))
		s.req = req
		if err := roundTrip(i, now); err != nil {
			var ke *krb5.Error
			if !errors.As(err, &ke) {
				err = &krb5.Error{Class: krb5.ClassNetwork, Phase: krb5.PhaseASRep, Err: err}
			}
			finish(s, now, err)
		}
	}
	events := make([]unix.EpollEvent, depth)
	// Sleep while a third of the round trips in flight are answered (two
	// of six): with half (three), the KDC ran out of connections while
	// the generator slept, 84-89 % busy against 98.5-98.8 %, 2,630-2,665
	// logins/s against 3,000-3,100, for the same generator CPU per login
	// (pinned, quiet machine, two runs each, interleaved).
	batch := max(1, depth/3)
	answered := 0
	yielded := start
	for {
		now := time.Now()
		if dl.over(now) || ctx.Err() != nil || (limit > 0 && ok >= limit) {
			return nil // logins still in flight are cut off, as in the closed loop
		}
		for i := range slots {
			s := &slots[i]
			switch {
			case !s.busy:
				s.busy, s.first, s.fl = true, now, krb5.LoginFlight{}
				next(i, now, true)
			case now.Sub(s.sent) >= cfg.Timeout:
				finish(s, now, &krb5.Error{Class: krb5.ClassTimeout, Phase: krb5.PhaseASRep, Err: os.ErrDeadlineExceeded})
			}
		}
		if now.Sub(yielded) >= yieldEvery {
			runtime.Gosched() // see udpCycle.run
			yielded = now
		}
		if answered > 0 && depth >= 4 {
			per := now.Sub(start) / time.Duration(answered)
			rawSleep(min(max(per*time.Duration(batch), minBatchWait), maxBatchWait, dl.next().Sub(now)))
			out.waits++
		}
		n, err := epollWait(ep, events, 0)
		if err == nil && n == 0 {
			out.waits++
			n, err = epollWait(ep, events, max(0, min(100*time.Millisecond, time.Until(dl.next())))) // past the end: a negative timeout would block forever, holding a P
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		now = time.Now()
		for _, ev := range events[:n] {
			s := &slots[ev.Fd]
			if !s.busy || s.replied {
				continue // an event of a connection already done with
			}
			// Edge triggered: the events are the socket's state when
			// epoll_wait returned, reported once per change. A
			// connection that is only writable has nothing to read: no
			// system call for it.
			const readable = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR
			if !s.wrote {
				if ev.Events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
					continue
				}
				if err := s.write(); err != nil {
					finish(s, now, err)
					continue
				}
				if !s.wrote {
					continue
				}
			}
			if ev.Events&readable == 0 {
				continue
			}
			done, err := s.read(now)
			if err != nil {
				finish(s, now, err)
				continue
			}
			if !done {
				continue
			}
			answered++
			tcpReply(c, int(ev.Fd), s, s.rbuf[4:], finish, next)
		}
	}
}

// open makes slot i's socket the first time (non-blocking, arrival
// stamps on, requests in the SYN when synData, in the epoll set ep with
// the slot's index) and dissolves its last connection otherwise:
// connect(AF_UNSPEC) resets an open
// connection (as a close with linger 0 does: the generator does not pay
// for the FIN exchange and the KDC side's TIME_WAIT, which on loopback
// the closing side's system call carries; the KDC's own work is the
// same) and leaves the socket ready to connect again, from a new port.
// Should that fail, the socket is closed and a new one made.
func (s *tcpSlot) open(ep, fam, i int, synData bool, opened *int) error {
	if s.fd >= 0 && s.connected {
		s.connected = false
		unspec := unix.RawSockaddr{Family: unix.AF_UNSPEC}
		if err := rawConnect(s.fd, unsafe.Pointer(&unspec), unsafe.Sizeof(unspec)); err != nil {
			s.closeSocket()
		}
	}
	if s.fd >= 0 {
		return nil
	}
	fd, err := rawSocket(fam)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	one := int32(1)
	_ = rawSetsockopt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, unsafe.Pointer(&one), 4)
	s.synData = synData && rawSetsockopt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_NO_COOKIE, unsafe.Pointer(&one), 4) == nil
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(i)}
	if err := rawEpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	s.fd = fd
	*opened++
	return nil
}

// connect makes the connection for the request in s.req (the socket
// open, its last connection dissolved) and sends the request, or leaves
// it for EPOLLOUT when the connection is not up yet.
func (s *tcpSlot) connect(sa unsafe.Pointer, saLen uintptr) error {
	s.connected = true
	if s.synData {
		n, err := rawSendtoFastOpen(s.fd, s.req, sa, saLen)
		switch {
		case err == nil && n == len(s.req):
			s.wrote = true
			return nil
		case err == nil:
			return connError(fmt.Errorf("short write: %d of %d bytes", n, len(s.req)))
		case err == unix.EOPNOTSUPP:
			// Client fast open is off (net.ipv4.tcp_fastopen
			// without bit 1): connect, then write, from now on.
			s.synData = false
		case err != unix.EINPROGRESS:
			return connError(err)
		default:
			return s.write() // connecting: the request goes once it is up
		}
	}
	if err := rawConnect(s.fd, sa, saLen); err != nil && err != unix.EINPROGRESS {
		return connError(err)
	}
	return s.write()
}

// closeSocket closes s's socket (with a connection: a reset), which also
// leaves the epoll set.
func (s *tcpSlot) closeSocket() {
	if s.fd >= 0 {
		if s.connected {
			l := unix.Linger{Onoff: 1, Linger: 0}
			_ = rawSetsockopt(s.fd, unix.SOL_SOCKET, unix.SO_LINGER, unsafe.Pointer(&l), unsafe.Sizeof(l))
		}
		unix.RawSyscall(unix.SYS_CLOSE, uintptr(s.fd), 0, 0)
		s.fd, s.connected = -1, false
	}
}

// connError classifies a failed connect or write.
func connError(err error) error {
	class := krb5.ClassNetwork
	if errors.Is(err, unix.ECONNREFUSED) {
		class = krb5.ClassConnectionRefused
	}
	return &krb5.Error{Class: class, Phase: krb5.PhaseASRep, Err: err}
}

// write sends the request once the connection is up (EAGAIN, ENOTCONN:
// not yet; the next EPOLLOUT says when).
func (s *tcpSlot) write() error {
	n, err := rawWrite(s.fd, s.req)
	switch {
	case err == unix.EAGAIN || err == unix.ENOTCONN || err == unix.EINPROGRESS:
		return nil
	case err != nil:
		if err == unix.EPIPE || err == unix.ECONNRESET {
			// The connect failed: its error says why.
			if e, _ := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR); e != 0 {
				err = unix.Errno(e)
			}
		}
		return connError(err)
	case n < len(s.req):
		// A request is a few hundred bytes: a short write on a fresh
		// connection does not happen; treat it as a failure, not a stall.
		return connError(fmt.Errorf("short write: %d of %d bytes", n, len(s.req)))
	}
	s.wrote = true
	return nil
}

// read takes what has arrived; done once the whole length-prefixed reply
// is there.
func (s *tcpSlot) read(now time.Time) (done bool, err error) {
	var oob [64]byte
	for {
		if cap(s.rbuf)-len(s.rbuf) < 4096 {
			s.rbuf = append(s.rbuf, make([]byte, 8192)...)[:len(s.rbuf)]
		}
		buf := s.rbuf[len(s.rbuf):cap(s.rbuf)]
		n, oobn, err := rawRecvmsg(s.fd, buf, oob[:])
		switch {
		case err == unix.EAGAIN:
			return false, nil
		case err == unix.EINTR:
			continue
		case err != nil:
			return false, connError(err)
		}
		if n == 0 {
			return false, &krb5.Error{Class: krb5.ClassNetwork, Phase: krb5.PhaseASRep, Err: fmt.Errorf("the KDC closed the connection after %d bytes", len(s.rbuf))}
		}
		s.rbuf = s.rbuf[:len(s.rbuf)+n]
		s.arrived = rxTimestamp(oob[:oobn], now)
		if len(s.rbuf) >= 4 {
			want := int(binary.BigEndian.Uint32(s.rbuf)) + 4
			if want > 1<<20 {
				return false, &krb5.Error{Class: krb5.ClassMalformedReply, Phase: krb5.PhaseASRep, Err: fmt.Errorf("reply length %d", want-4)}
			}
			if len(s.rbuf) >= want {
				s.rbuf, s.replied = s.rbuf[:want], true
				return true, nil
			}
		}
	}
}

// tcpReply handles the reply to slot s's round trip, as sessionLoad.reply does
// for UDP: the login goes on to its next round trip or ends.
func tcpReply(c *krb5.Client, i int, s *tcpSlot, reply []byte, finish func(*tcpSlot, time.Time, error), next func(int, time.Time, bool)) {
	at := s.arrived
	kind, err := c.ReadLoginReply(reply)
	if err != nil && s.fl.Stage == krb5.StageSupport {
		var fallback bool
		if fallback, err = c.SPAKERefused(err); fallback {
			kind = krb5.ReplyMoreData
		}
	}
	switch {
	case err != nil:
		finish(s, at, err)
	case kind == krb5.ReplyPreauthRequired || kind == krb5.ReplyMoreData:
		next(i, time.Now(), false)
	default:
		_, err := c.OpenLoginFlight(reply, &s.fl)
		finish(s, at, err)
	}
}

// epollWait is epoll_wait without the Go scheduler (see rawSleep): it
// blocks the thread at most d.
func epollWait(ep int, events []unix.EpollEvent, d time.Duration) (int, error) {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(d.Milliseconds()), 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			if d > 0 {
				return 0, nil
			}
			continue
		}
		return 0, e
	}
}

// Raw system calls for the tcp worker: every one is non-blocking, so a
// RawSyscall (no entersyscall/exitsyscall, so no P handed off by the
// runtime's monitor while the kernel does a connection's TCP work)
// costs nothing and allocates nothing.

func rawSockaddr(sa unix.Sockaddr) (fam int, p unsafe.Pointer, n uintptr) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		r := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Addr}
		pp := (*[2]byte)(unsafe.Pointer(&r.Port))
		pp[0], pp[1] = byte(a.Port>>8), byte(a.Port)
		return unix.AF_INET, unsafe.Pointer(r), unsafe.Sizeof(*r)
	case *unix.SockaddrInet6:
		r := &unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.Addr}
		pp := (*[2]byte)(unsafe.Pointer(&r.Port))
		pp[0], pp[1] = byte(a.Port>>8), byte(a.Port)
		return unix.AF_INET6, unsafe.Pointer(r), unsafe.Sizeof(*r)
	}
	panic("loadgen: not an IP socket address")
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func rawSocket(fam int) (int, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(fam), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	return int(fd), errnoErr(e)
}

func rawConnect(fd int, sa unsafe.Pointer, n uintptr) error {
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(sa), n)
	return errnoErr(e)
}

// rawSendtoFastOpen connects fd to sa and sends b in the SYN.
func rawSendtoFastOpen(fd int, b []byte, sa unsafe.Pointer, n uintptr) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_FASTOPEN, uintptr(sa), n)
	return int(r), errnoErr(e)
}

func rawSetsockopt(fd, level, opt int, v unsafe.Pointer, n uintptr) error {
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(v), n, 0)
	return errnoErr(e)
}

func rawEpollCtl(ep, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(ep), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	return errnoErr(e)
}

func rawWrite(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), errnoErr(e)
}

func rawRecvmsg(fd int, buf, oob []byte) (n, oobn int, err error) {
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	var h unix.Msghdr
	h.Iov = &iov
	h.SetIovlen(1)
	h.Control = &oob[0]
	h.SetControllen(len(oob))
	r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&h)), unix.MSG_DONTWAIT)
	return int(r), int(h.Controllen), errnoErr(e)
}
