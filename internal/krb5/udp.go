package krb5

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"time"
)

// pollSlice bounds how long a read waits before it looks at ctx.Done() again:
// cancellation (shutdown, reload) is noticed within pollSlice without a
// context.AfterFunc per exchange (six allocations and a goroutine hand-off).
const pollSlice = 100 * time.Millisecond

// udpSocket is a connected UDP socket.
type udpSocket struct{ conn *net.UDPConn }

func dialUDPSocket(local netip.Addr, ap netip.AddrPort) (*udpSocket, error) {
	var laddr *net.UDPAddr
	if local.IsValid() {
		laddr = &net.UDPAddr{IP: local.AsSlice()}
	}
	c, err := net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, err
	}
	return &udpSocket{conn: c}, nil
}

func (s *udpSocket) close() { s.conn.Close() }

// exchange sends req and returns the length of the first datagram received
// into buf. With resend > 0 the request is sent again after resend, then
// after twice as long each time, as libkrb5 does, until ctx ends.
func (s *udpSocket) exchange(ctx context.Context, req, buf []byte, resend time.Duration, st *exchangeStats) (int, error) {
	if _, err := s.conn.Write(req); err != nil {
		return 0, err
	}
	deadline, hasDeadline := ctx.Deadline()
	var next time.Time
	if resend > 0 {
		next = time.Now().Add(resend)
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		now := time.Now()
		if resend > 0 && !now.Before(next) {
			if _, err := s.conn.Write(req); err != nil {
				return 0, err
			}
			st.retransmits++
			resend *= 2
			next = now.Add(resend)
		}
		limit := now.Add(pollSlice)
		if hasDeadline && deadline.Before(limit) {
			limit = deadline
		}
		if resend > 0 && next.Before(limit) {
			limit = next
		}
		_ = s.conn.SetReadDeadline(limit)
		n, err := s.conn.Read(buf)
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, err
		}
		if hasDeadline && !time.Now().Before(deadline) {
			return 0, context.DeadlineExceeded
		}
	}
}
