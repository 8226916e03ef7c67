package testutil

import (
	"net"
	"sync/atomic"
	"testing"
)

// RelaySockets opens the two sides of a UDP test relay: front listens for
// the client on listen, back is connected to the server. Both close with
// the test.
func RelaySockets(t testing.TB, listen, server string) (front, back *net.UDPConn) {
	t.Helper()
	la, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		t.Fatal(err)
	}
	front, err = net.ListenUDP("udp", la)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := net.ResolveUDPAddr("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	back, err = net.DialUDP("udp", nil, sa)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close(); back.Close() })
	return front, back
}

// UDPRelay relays between one client and the UDP server at server (a
// KDC): each datagram of the client goes to pass, which sends it on with
// send (at once, later, or never: a lossy or slow link), and each answer
// of the server goes back to the client at once. It returns the address
// the client sends to.
func UDPRelay(t testing.TB, listen, server string, pass func(b []byte, send func([]byte))) string {
	t.Helper()
	front, back := RelaySockets(t, listen, server)
	send := func(b []byte) { back.Write(b) }
	var client atomic.Pointer[net.UDPAddr]
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := front.ReadFromUDP(buf)
			if err != nil {
				return
			}
			client.Store(from)
			pass(append([]byte(nil), buf[:n]...), send)
		}
	}()
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := back.Read(buf)
			if err != nil {
				return
			}
			if c := client.Load(); c != nil {
				front.WriteToUDP(buf[:n], c)
			}
		}
	}()
	return front.LocalAddr().String()
}
