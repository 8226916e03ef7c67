package loadgen

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// BenchmarkCycleFloor is the floor under the batched as and tgs loads:
// the UDP cycle of Batched (64 in flight, its sleeps, sendmmsg and
// recvmmsg in chunks, arrival stamps) against the real KDC, carrying
// first AS-REQs encoded before the load (4096 of them, each its own
// nonce), whose answers are neither parsed nor followed: each reply
// frees the oldest slot, which sends the next. Its gen-cpu-us/dgram is
// what the system calls, the wake-ups and the runtime cost the
// generator per request and reply before any Kerberos work; an
// encrypted-timestamp login is two of them, a ticket one. Pin it as
// bench.BenchmarkGenerator: BENCH_KDC_CPU=0 moves the KDC to CPU 0, and
//
//	go test -c -o /tmp/loadgen.test ./internal/loadgen && \
//	BENCH_KDC_CPU=0 taskset -c 1 /tmp/loadgen.test -test.run '^$' -test.bench CycleFloor -test.benchtime 200000x -test.cpu 1
func BenchmarkCycleFloor(b *testing.B) {
	r := upRealm(b)
	if cpu := os.Getenv("BENCH_KDC_CPU"); cpu != "" {
		for _, p := range r.KDCPids() {
			if out, err := exec.Command("taskset", "-pc", cpu, strconv.Itoa(p)).CombinedOutput(); err != nil {
				b.Fatalf("taskset: %v %s", err, out)
			}
		}
	}
	cfg := realmConfig(b, r, krb5.PreauthEncTimestamp)
	c, err := cfg.Client(1, krb5.UDP)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const depth = 64
	fl := &floorLoad{limit: b.N}
	for range 4096 {
		var f krb5.LoginFlight
		buf, err := c.EncodeLoginFirst(nil, &f)
		if err != nil {
			b.Fatal(err)
		}
		fl.reqs = append(fl.reqs, floorReq{buf, f.Nonce})
	}
	u, err := dialRawUDP(cfg.KDC, depth)
	if err != nil {
		b.Fatal(err)
	}
	defer u.close()
	var out recordLog
	fl.cy = newUDPCycle(u, depth, cfg.Timeout, true, &out)
	var ru0, ru1 syscall.Rusage
	b.ResetTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	if err := fl.cy.run(context.Background(), fl, start); err != nil {
		b.Fatal(err)
	}
	wall := time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	b.StopTimer()
	if fl.failed > 0 {
		b.Fatalf("%d requests failed", fl.failed)
	}
	cpu := float64(ru1.Utime.Nano()-ru0.Utime.Nano()+ru1.Stime.Nano()-ru0.Stime.Nano()) / 1e3
	b.ReportMetric(cpu/float64(fl.ok), "gen-cpu-us/dgram")
	b.ReportMetric(float64(ru1.Nvcsw-ru0.Nvcsw)/float64(fl.ok), "gen-wakeups/dgram")
	b.ReportMetric(float64(fl.ok)/wall.Seconds(), "dgram/s")
}

type floorReq struct {
	buf   []byte
	nonce int64
}

// floorLoad is BenchmarkCycleFloor's load on the cycle.
type floorLoad struct {
	cy                *udpCycle
	reqs              []floorReq
	next              int
	ok, failed, limit int
}

func (f *floorLoad) over(time.Time) bool { return f.ok >= f.limit }
func (f *floorLoad) more() bool          { return true }
func (f *floorLoad) wake() time.Time     { return time.Time{} }
func (f *floorLoad) sent(int)            {}
func (f *floorLoad) phase(int) string    { return krb5.PhasePreauthRequired }

func (f *floorLoad) fill(c *udpCycle, _ time.Time) {
	for i := range c.slots {
		if !c.slots[i].busy {
			q := &f.reqs[f.next%len(f.reqs)]
			f.next++
			c.ask(i, q.buf, q.nonce)
		}
	}
}

func (f *floorLoad) finish(i int, _ time.Time, err error) {
	f.cy.end(i)
	if err != nil {
		f.failed++
	} else {
		f.ok++
	}
}

func (f *floorLoad) reply(b []byte, at time.Time) {
	if i := f.cy.oldest(); i >= 0 {
		f.finish(i, at, nil)
	}
}

// BenchmarkRawSleep is the CPU one wake-up costs this thread: rawSleep
// (nanosleep, its P kept) of 1 ms, b.N times (-test.benchtime 1000x),
// CPU by getrusage of the thread. On the project's VM (2 vCPUs, Linux 6.18) 17.7-20.9 µs each,
// from 50 µs to 2 ms and with or without another process on the CPU,
// about as much for ppoll, epoll_wait and a futex wait (a loop of
// each, 3 December): what the
// cycle's one sleep per batch costs, and sysmon's 100 wake-ups a second.
func BenchmarkRawSleep(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var a, z syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_THREAD, &a)
	for b.Loop() {
		rawSleep(time.Millisecond)
	}
	syscall.Getrusage(syscall.RUSAGE_THREAD, &z)
	cpu := z.Utime.Nano() - a.Utime.Nano() + z.Stime.Nano() - a.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(z.Nvcsw-a.Nvcsw)/float64(b.N), "switches/op")
}
