package collector

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestKDCServiceWarm checks which requests the program calls warm (begun
// without the worker blocking since its previous reply) against requests
// the test made cold or warm: AS requests of unknown principals (no
// database write, so nothing blocks in service), over UDP.
//
//   - Paced: one at a time, 20 ms after the previous reply: the worker
//     sleeps in its event loop before each, so none is warm.
//   - Held: K sent while the KDC is stopped (SIGSTOP), then released: the
//     first wakes the worker, the K-1 others were waiting at each reply,
//     so exactly K-1 are warm; their gaps and service time lie within the
//     time from the release to the last reply.
//
// Broken on purpose: the worker's sleep not recorded (every request after
// a reply warm) fails the paced phase; the flag not cleared at the reply
// (none warm) fails the held one.
func TestKDCServiceWarm(t *testing.T) {
	r := upRealm(t, 0, false)
	_, ks, reg := serviceCollector(t, r)
	kdc := r.KDCPids()[0]
	conn := dialKDC(t, r)
	n := 0
	send := func() {
		n++
		b, err := realm.ASRequest(r.Realm, "collector-warm-"+strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() time.Time { return awaitReply(t, conn) }
	for range 3 { // the program's state of the thread and its port
		send()
		read()
	}
	warm := func(load func()) (kdcbpf.Warm, uint64) {
		gather(t, reg)
		w0, n0 := ks.snap.Warm[kdcbpf.RequestAS][kdcbpf.TransportUDP], ks.snap.Service[kdcbpf.RequestAS][kdcbpf.TransportUDP].Count
		load()
		gather(t, reg)
		w, c := ks.snap.Warm[kdcbpf.RequestAS][kdcbpf.TransportUDP], ks.snap.Service[kdcbpf.RequestAS][kdcbpf.TransportUDP].Count
		return kdcbpf.Warm{Count: w.Count - w0.Count, CPU: w.CPU - w0.CPU, Blocked: w.Blocked - w0.Blocked, Gap: w.Gap - w0.Gap}, c - n0
	}

	const N = 20
	paced, count := warm(func() {
		for range N {
			time.Sleep(20 * time.Millisecond)
			send()
			read()
		}
	})
	t.Logf("paced: %d requests, %d warm", count, paced.Count)
	if count != N || paced.Count != 0 {
		t.Errorf("paced: %d of %d requests timed, %d warm; want all timed, none warm", count, N, paced.Count)
	}

	const K = 16
	var span time.Duration
	held, count := warm(func() {
		if err := syscall.Kill(kdc, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(kdc, syscall.SIGCONT)
		waitStopped(t, kdc)
		for range K {
			send()
		}
		time.Sleep(50 * time.Millisecond)
		cont := time.Now()
		syscall.Kill(kdc, syscall.SIGCONT)
		var last time.Time
		for range K {
			last = read()
		}
		span = last.Sub(cont)
	})
	t.Logf("held: %d requests, %d warm: %d µs on CPU, %d µs blocked, %d µs of gaps; %v from the release to the last reply",
		count, held.Count, held.CPU/1000, held.Blocked/1000, held.Gap/1000, span)
	if count != K || held.Count != K-1 {
		t.Errorf("held: %d of %d requests timed, %d warm; want all timed, %d warm", count, K, held.Count, K-1)
	}
	if held.Count > 0 && (held.Gap == 0 || time.Duration(held.CPU+held.Blocked+held.Gap) > span) {
		t.Errorf("held: warm requests' service and gaps %v, the release to the last reply %v (gaps %v: want more than 0, the sum within it)",
			time.Duration(held.CPU+held.Blocked+held.Gap), span, time.Duration(held.Gap))
	}
}
