package loadgen

import (
	"bytes"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestRawUDPSegments: datagrams queued in runs of one length go out as
// one UDP_SEGMENT message per run (at most gsoMaxSegs), and the peer, a
// plain socket, reads each datagram whole, alone and in order: the
// lengths 300 x 70, 100, 300 x 2, 2000 (too large to segment), 300 make
// 6 messages of 75 datagrams (64, 6, 1, 2, 1, 1).
func TestRawUDPSegments(t *testing.T) { rawUDPSegments(t, false) }

// TestRawUDPSegmentsRefused: where the kernel refuses UDP_SEGMENT (here a
// socket without UDP checksums, SO_NO_CHECK, for which it answers
// EINVAL), the rest of the batch and the batches after go one datagram
// per message, every datagram whole and in order.
func TestRawUDPSegmentsRefused(t *testing.T) { rawUDPSegments(t, true) }

func rawUDPSegments(t *testing.T, refused bool) {
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	peer.SetReadBuffer(1 << 20)
	var want [][]byte
	add := func(n, l int) {
		for range n {
			b := make([]byte, l)
			for j := range b {
				b[j] = byte(len(want) + j)
			}
			want = append(want, b)
		}
	}
	add(70, 300)
	add(1, 100)
	add(2, 300)
	add(1, 2000)
	add(1, 300)
	u, err := dialRawUDP(peer.LocalAddr().String(), len(want))
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	if refused {
		if err := unix.SetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range want {
		u.queue(b)
	}
	if err := u.send(); err != nil {
		t.Fatal(err)
	}
	switch {
	case refused && (u.gso || u.dgrams != len(want) || u.msgs != len(want)):
		t.Errorf("refused: gso %v, %d datagrams in %d messages, want off and %d in as many", u.gso, u.dgrams, u.msgs, len(want))
	case !refused && (u.dgrams != len(want) || u.msgs != 6):
		t.Errorf("%d datagrams in %d messages, want %d in 6", u.dgrams, u.msgs, len(want))
	}
	peer.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	for i, w := range want {
		n, err := peer.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if !bytes.Equal(buf[:n], w) {
			t.Fatalf("datagram %d: %d bytes %x..., want %d bytes %x...", i, n, buf[:min(n, 4)], len(w), w[:4])
		}
	}
}

// BenchmarkRawUDPSend is the sender's CPU (its thread's, in the sendmmsg
// calls only) per datagram of a batch like the as load's (16 first and 16
// timestamp AS-REQs, two lengths), one datagram per message and in
// UDP_SEGMENT runs, to a plain socket on loopback drained by another
// thread. Pin it (taskset -c 1, -test.cpu 2) for stable figures.
func BenchmarkRawUDPSend(b *testing.B) {
	for _, gso := range []bool{false, true} {
		name := "plain"
		if gso {
			name = "segments"
		}
		b.Run(name, func(b *testing.B) {
			peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				b.Fatal(err)
			}
			defer peer.Close()
			peer.SetReadBuffer(4 << 20)
			var got atomic.Int64
			go func() {
				buf := make([]byte, 2048)
				for {
					if _, err := peer.Read(buf); err != nil {
						return
					}
					got.Add(1)
				}
			}()
			const batch = 32
			u, err := dialRawUDP(peer.LocalAddr().String(), batch)
			if err != nil {
				b.Fatal(err)
			}
			defer u.close()
			u.gso = gso
			msgs := make([][]byte, batch)
			for i := range msgs {
				msgs[i] = make([]byte, 280+20*(i/(batch/2)))
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu time.Duration
			sent := int64(0)
			p0 := processCPU()
			b.ResetTimer()
			for n := 0; n < b.N; n += batch {
				for _, m := range msgs {
					u.queue(m)
				}
				t0 := threadCPU()
				if err := u.send(); err != nil {
					b.Fatal(err)
				}
				cpu += threadCPU() - t0
				sent += batch
				for got.Load() < sent-batch { // the sink a batch behind at most: no drops
					time.Sleep(20 * time.Microsecond)
				}
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(sent), "send-cpu-us/datagram")
			// The whole process (the sink's reads, and kernel work the
			// sends left for later, e.g. splitting a run) per datagram.
			b.ReportMetric(float64((processCPU()-p0).Nanoseconds())/1e3/float64(sent), "process-cpu-us/datagram")
		})
	}
}

func processCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// TestRawUDPRecvChunk: with more datagrams waiting than a chunk
// (recvChunk, half net.core.skb_defer_max), one recv takes a chunk and
// the next the rest, in order.
func TestRawUDPRecvChunk(t *testing.T) {
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	const n = 40
	u, err := dialRawUDP(peer.LocalAddr().String(), 64)
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	if u.chunk != min(64, recvChunk()) || u.chunk < 1 {
		t.Fatalf("chunk %d, want %d", u.chunk, min(64, recvChunk()))
	}
	u.chunk = 32 // the default skb_defer_max's, whatever this machine's
	u.queue([]byte("hello"))
	if err := u.send(); err != nil {
		t.Fatal(err)
	}
	peer.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	_, from, err := peer.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := peer.WriteToUDP([]byte{byte(i)}, from); err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	next := 0
	for deadline := time.Now().Add(5 * time.Second); next < n && time.Now().Before(deadline); {
		if err := u.waitReadable(time.Second); err != nil {
			t.Fatal(err)
		}
		k, err := u.recv()
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 {
			got = append(got, k)
		}
		for j := range k {
			if b, _ := u.msg(j, time.Time{}); len(b) != 1 || int(b[0]) != next {
				t.Fatalf("datagram %d: %v", next, b)
			}
			next++
		}
	}
	// Loopback delivers the 40 before the first recv: 32, then 8.
	if next != n || len(got) != 2 || got[0] != 32 {
		t.Fatalf("recv took %v datagrams, want 32 then 8", got)
	}
}
