package loadgen

import (
	"net"
	"testing"
	"time"
)

// The raw socket's round trip, and the kernel's arrival stamp read from
// its control message: between the send and the read, never the default.
func TestRawUDPTimestamp(t *testing.T) {
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	u, err := dialRawUDP(peer.LocalAddr().String(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	before := time.Now()
	u.queue([]byte("ping"))
	if err := u.send(); err != nil {
		t.Fatal(err)
	}
	peer.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	n, from, err := peer.ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("peer read %q, %v", buf[:n], err)
	}
	if _, err := peer.WriteToUDP([]byte("pong"), from); err != nil {
		t.Fatal(err)
	}
	got := 0
	for deadline := time.Now().Add(5 * time.Second); got == 0 && time.Now().Before(deadline); {
		if err := u.waitReadable(time.Second); err != nil {
			t.Fatal(err)
		}
		if got, err = u.recv(); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now()
	if got != 1 {
		t.Fatalf("%d datagrams", got)
	}
	msg, at := u.msg(0, time.Time{})
	if string(msg) != "pong" {
		t.Fatalf("read %q", msg)
	}
	if at.Before(before) || at.After(after) {
		t.Fatalf("arrival stamp %v, not between the send %v and the read %v", at, before, after)
	}
}
