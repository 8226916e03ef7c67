package collector

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestKDCServiceKnownTimes reads the program's own histograms (its map,
// not a copy of its bucketing) after requests whose times the test knows
// from outside the program, and checks each observation's bucket against
// them. Each request's time x_i lies in [lo_i, hi_i], so the k-th smallest
// observation lies between the k-th smallest lo and the k-th smallest hi:
// its bucket's upper bound must be at least the one and its lower bound
// below the other (the buckets' bounds are Prometheus's schema 3,
// 2^(i/8) s).
//
//   - Held: the KDC stopped (SIGSTOP, seen stopped in /proc) while K
//     requests arrive, then continued: each waited in the socket at least
//     from its send to the SIGCONT, and at most to the last reply; so its
//     queue time.
//   - Slow replies: strace delays each of the KDC's sends (the reply) by
//     D, one request at a time: each service time is at least D and at
//     most the client's round trip, and each queue time at most the round
//     trip less D (the service is in the round trip, not in the queue).
//     D is just above a bucket's lower bound, so that a bucket off by one
//     falls outside the round trip.
//
// The bounds hold under any load (a loaded machine only widens them), so
// it runs in the race run too. Broken on purpose: the queue time taken at
// the reply instead of at the receive, and the C bucketing off by one,
// each fail it.
func TestKDCServiceKnownTimes(t *testing.T) {
	testutil.RequireProgram(t, "strace")
	r := upRealm(t, 0, false)
	_, ks, reg := serviceCollector(t, r)
	kdc := r.KDCPids()[0]
	conn := dialKDC(t, r)
	n := 0
	fresh := func() []byte {
		n++
		b, err := realm.ASRequest(r.Realm, "collector-known-"+strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	read := func() time.Time { return awaitReply(t, conn) }
	// The first requests make the program's state of the KDC's thread
	// and its UDP port.
	for range 3 {
		conn.Write(fresh())
		read()
	}

	const K = 8
	var lo, hi []time.Duration
	_, held := phase(t, ks, reg, func() {
		if err := syscall.Kill(kdc, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(kdc, syscall.SIGCONT)
		waitStopped(t, kdc)
		// Each request arrived between before and after its send: a
		// loaded machine can hold the sender after the packet is queued.
		var before, after []time.Time
		for range K {
			b := fresh()
			before = append(before, time.Now())
			if _, err := conn.Write(b); err != nil {
				t.Fatal(err)
			}
			after = append(after, time.Now())
		}
		time.Sleep(150 * time.Millisecond)
		cont := time.Now()
		syscall.Kill(kdc, syscall.SIGCONT)
		var last time.Time
		for range K {
			last = read()
		}
		for i := range before {
			lo = append(lo, cont.Sub(after[i]))
			hi = append(hi, last.Sub(before[i]))
		}
	})
	t.Logf("held: %d queue times, held %v to %v", held.Count, slices.Min(lo), slices.Max(lo))
	if held.Count != K {
		t.Errorf("%d queue times of %d requests held in the socket", held.Count, K)
	}
	checkBuckets(t, "held: queue time", held, lo, hi)

	for _, d := range []time.Duration{
		// 0.5 % above the lower bounds of the buckets (2^-5, 2^(-39/8)]
		// and (2^-3, 2^(-23/8)] s: 31.25-34.07 and 125-136.3 ms.
		time.Duration(1.005 * 31.25e6), time.Duration(1.005 * 125e6),
	} {
		const N = 10
		out := filepath.Join(t.TempDir(), "strace.out")
		delay := strconv.FormatInt(d.Microseconds(), 10)
		st := exec.Command("strace", "-qq", "-o", out, "-e", "trace=sendto,sendmsg", "-e", "inject=sendto,sendmsg:delay_enter="+delay, "-p", strconv.Itoa(kdc))
		st.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := st.Start(); err != nil {
			t.Fatal(err)
		}
		testutil.TracedBy(t, kdc, st.Process.Pid)
		var rtts, svcLo, queueHi []time.Duration
		svc, queue := phase(t, ks, reg, func() {
			for range N {
				b := fresh()
				sent := time.Now()
				conn.Write(b)
				rtt := read().Sub(sent)
				rtts = append(rtts, rtt)
				svcLo = append(svcLo, d)
				queueHi = append(queueHi, rtt-d)
			}
		})
		// strace writes a call's line when it returns, which can be after
		// the client has read the reply: wait for the lines (5 s at most)
		// before stopping it.
		sends := 0
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			log, _ := os.ReadFile(out)
			if sends = strings.Count(string(log), "(DELAYED)"); sends >= N {
				break
			}
		}
		st.Process.Signal(syscall.SIGINT)
		st.Wait()
		log, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		sends = strings.Count(string(log), "(DELAYED)")
		t.Logf("replies delayed %v: strace delayed %d sends; %d service times, %d queue times; round trips %v to %v", d, sends, svc.Count, queue.Count, slices.Min(rtts), slices.Max(rtts))
		if sends != N {
			t.Errorf("strace delayed %d sends of %d replies", sends, N)
		}
		if svc.Count != N || queue.Count != N {
			t.Errorf("%d service and %d queue times of %d requests", svc.Count, queue.Count, N)
		}
		checkBuckets(t, "replies delayed "+d.String()+": service time", svc, svcLo, rtts)
		checkBuckets(t, "replies delayed "+d.String()+": queue time", queue, nil, queueHi)
	}
}

// checkBuckets checks the observations of h, in order, against the
// bounds of each (lo nil: 0), sorted: the k-th smallest observation's
// bucket must reach lo's k-th smallest and start below hi's.
func checkBuckets(t *testing.T, what string, h kdcbpf.Hist, lo, hi []time.Duration) {
	t.Helper()
	var obs []int
	for b, c := range h.Buckets {
		for range c {
			obs = append(obs, b)
		}
	}
	hi = slices.Sorted(slices.Values(hi))
	lo = slices.Sorted(slices.Values(lo))
	for k, b := range obs {
		if k >= len(hi) {
			t.Errorf("%s: %d observations, %d requests", what, len(obs), len(hi))
			return
		}
		upper, lower := kdcbpf.UpperBound(b), 0.0
		if b > 0 {
			lower = kdcbpf.UpperBound(b - 1)
		}
		min := 0.0
		if lo != nil {
			min = lo[k].Seconds()
		}
		if upper < min || lower >= hi[k].Seconds() {
			t.Errorf("%s: observation %d of %d in bucket (%.4g, %.4g] ms, known to be in [%.4g, %.4g] ms", what, k+1, len(obs), lower*1e3, upper*1e3, min*1e3, hi[k].Seconds()*1e3)
		}
	}
}

// waitStopped waits until pid is stopped (state T), up to 5 s.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		st, err := procOf(t, pid).Stat()
		if err != nil {
			t.Fatal(err)
		}
		if st.State == "T" {
			return
		}
	}
	t.Fatalf("pid %d not stopped 5 s after SIGSTOP", pid)
}
