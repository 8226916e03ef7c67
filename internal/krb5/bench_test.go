//go:build linux

package krb5

import (
	"bufio"
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gokrb5client "github.com/jcmturner/gokrb5/v8/client"
	krb5config "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/iana/errorcode"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Benchmarks of one AS exchange (a full two-round-trip login) and one TGS
// exchange against a real MIT KDC with last_success writes disabled (else
// every login waits for an fsync). Besides ns/op and allocs/op they report
// the client's CPU time per request (this whole process, from getrusage),
// the KDC's (from /proc/<pid>/stat of its processes) and their ratio.
//
// BENCH_KDC_CPU=N pins the KDC to CPU N (run the test binary pinned to
// another CPU with taskset; internal/krb5/testdata/bench-cpu.sh does both).

func benchRealm(b *testing.B) *realm.Realm {
	r := upRealm(b, realm.Options{Users: 2, Services: 2, DisableLastSuccess: true})
	if cpu := os.Getenv("BENCH_KDC_CPU"); cpu != "" {
		n, err := strconv.Atoi(cpu)
		if err != nil {
			b.Fatalf("BENCH_KDC_CPU=%q", cpu)
		}
		var set unix.CPUSet
		set.Set(n)
		for _, pid := range r.KDCPids() {
			if err := unix.SchedSetaffinity(pid, &set); err != nil {
				b.Fatalf("pin KDC pid %d to CPU %d: %v", pid, n, err)
			}
		}
	}
	return r
}

// cpuMeter reads the CPU time of this process and of the KDC's processes.
type cpuMeter struct {
	kdcPids       []int
	self0, kdc0   time.Duration
	selfNs, kdcNs float64
}

func newCPUMeter(b *testing.B, r *realm.Realm) *cpuMeter {
	m := &cpuMeter{kdcPids: r.KDCPids()}
	if len(m.kdcPids) == 0 {
		b.Fatal("no KDC pid")
	}
	return m
}

func selfCPU() time.Duration { return testutil.SelfCPU() }

func (m *cpuMeter) kdcCPU(b *testing.B) time.Duration {
	var total time.Duration
	for _, pid := range m.kdcPids {
		d, err := testutil.ProcCPU(pid)
		if err != nil {
			b.Fatalf("KDC stat: %v", err)
		}
		total += d
	}
	return total
}

func (m *cpuMeter) start(b *testing.B) {
	m.self0, m.kdc0 = selfCPU(), m.kdcCPU(b)
}

func (m *cpuMeter) stop(b *testing.B) {
	self, kdc := selfCPU()-m.self0, m.kdcCPU(b)-m.kdc0
	m.selfNs = float64(self.Nanoseconds()) / float64(b.N)
	m.kdcNs = float64(kdc.Nanoseconds()) / float64(b.N)
	b.ReportMetric(m.selfNs, "client-cpu-ns/op")
	b.ReportMetric(m.kdcNs, "kdc-cpu-ns/op")
	if m.kdcNs > 0 {
		b.ReportMetric(m.selfNs/m.kdcNs, "client/kdc")
	}
}

// BenchmarkASExchange logs in with each pre-authentication method against
// the same kind of KDC (one offering SPAKE, as realm.Up's default): spake
// takes three round trips, encrypted_timestamp two.
func BenchmarkASExchange(b *testing.B) {
	for _, mode := range []PreauthMode{PreauthSPAKE, PreauthEncTimestamp} {
		b.Run(string(mode), func(b *testing.B) {
			benchSequential(b, func(b *testing.B, r *realm.Realm, tr Transport) func(context.Context) error {
				c := userClient(b, r, 1, Options{Transport: tr, Preauth: mode})
				return func(ctx context.Context) error { _, err := c.Login(ctx); return err }
			})
		})
	}
}

func BenchmarkTGSExchange(b *testing.B) {
	benchSequential(b, func(b *testing.B, r *realm.Realm, tr Transport) func(context.Context) error {
		c := userClient(b, r, 1, Options{Transport: tr})
		svc := c.PrepareService(mustPrincipal(b, r.Service(1)))
		return func(ctx context.Context) error { _, err := c.ServiceTicket(ctx, svc); return err }
	})
}

// benchSequential runs one exchange after the other over UDP and over TCP;
// the first one, untimed, derives the key schedules and warms the KDC.
func benchSequential(b *testing.B, newOp func(*testing.B, *realm.Realm, Transport) func(context.Context) error) {
	r := benchRealm(b)
	for _, tr := range []Transport{UDP, TCP} {
		b.Run(tr.String(), func(b *testing.B) {
			op := newOp(b, r, tr)
			if err := op(context.Background()); err != nil {
				b.Fatal(err)
			}
			m := newCPUMeter(b, r)
			b.ReportAllocs()
			b.ResetTimer()
			m.start(b)
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := op(ctx)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			m.stop(b)
		})
	}
}

// The parallel variants drive the KDC as a load generator does: several
// clients in flight (4 per GOMAXPROCS), each with its own Client.
func BenchmarkASExchangeParallel(b *testing.B) {
	for _, mode := range []PreauthMode{PreauthSPAKE, PreauthEncTimestamp} {
		b.Run(string(mode), func(b *testing.B) {
			benchParallel(b, func(b *testing.B, r *realm.Realm) func(context.Context) error {
				c := userClient(b, r, 1, Options{Preauth: mode})
				return func(ctx context.Context) error { _, err := c.Login(ctx); return err }
			})
		})
	}
}

func BenchmarkTGSExchangeParallel(b *testing.B) {
	benchParallel(b, func(b *testing.B, r *realm.Realm) func(context.Context) error {
		c := userClient(b, r, 1, Options{})
		svc := c.PrepareService(mustPrincipal(b, r.Service(1)))
		if _, err := c.ServiceTicket(context.Background(), svc); err != nil {
			b.Fatal(err)
		}
		return func(ctx context.Context) error { _, err := c.ServiceTicket(ctx, svc); return err }
	})
}

func benchParallel(b *testing.B, newOp func(*testing.B, *realm.Realm) func(context.Context) error) {
	r := benchRealm(b)
	const perProc = 4
	ops := make(chan func(context.Context) error, perProc*runtime.GOMAXPROCS(0))
	for i := 0; i < cap(ops); i++ {
		ops <- newOp(b, r)
	}
	m := newCPUMeter(b, r)
	b.SetParallelism(perProc)
	b.ReportAllocs()
	b.ResetTimer()
	m.start(b)
	b.RunParallel(func(pb *testing.PB) {
		op := <-ops
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := op(ctx)
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	m.stop(b)
}

// BenchmarkLatency compares what a user waits for: a login then a service
// ticket, by the engine and by `kinit -k` + `kvno` (a fresh ccache per
// login, so kvno always asks the KDC), on a realm without SPAKE so that both
// log in the same way (encrypted timestamp, two round trips; last_success
// written). It reports p50/p99 per exchange in milliseconds;
// kinit and kvno include their process start, as a check_kerberos-style
// shell-out does. Run with -benchtime=Nx.
func BenchmarkLatency(b *testing.B) {
	r := upRealm(b, realm.Options{Users: 2, Services: 2, NoSPAKE: true})
	b.Run("engine", func(b *testing.B) {
		c := userClient(b, r, 1, Options{})
		svc := c.PrepareService(mustPrincipal(b, r.Service(1)))
		var as, tgs []time.Duration
		for i := 0; i < b.N; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			a, err := c.Login(ctx)
			if err != nil {
				b.Fatal(err)
			}
			t, err := c.ServiceTicket(ctx, svc)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			as, tgs = append(as, a.Duration), append(tgs, t.Duration)
		}
		reportPercentiles(b, "as", as)
		reportPercentiles(b, "tgs", tgs)
	})
	b.Run("kinit+kvno", func(b *testing.B) {
		kinit, err1 := exec.LookPath("kinit")
		kvno, err2 := exec.LookPath("kvno")
		if err1 != nil || err2 != nil {
			b.Skip("kinit/kvno not installed")
		}
		env := append(os.Environ(), r.Env()...)
		run := func(name string, args ...string) time.Duration {
			cmd := exec.Command(name, args...)
			cmd.Env = env
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%s %v: %v\n%s", name, args, err, out)
			}
			return time.Since(start)
		}
		var as, tgs []time.Duration
		for i := 0; i < b.N; i++ {
			as = append(as, run(kinit, "-k", "-t", r.UserKeytab, r.User(1)))
			tgs = append(tgs, run(kvno, "-q", r.Service(1)))
		}
		reportPercentiles(b, "as", as)
		reportPercentiles(b, "tgs", tgs)
	})
}

func reportPercentiles(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	at := func(p float64) float64 {
		return float64(d[int(p*float64(len(d)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.5), name+"-p50-ms")
	b.ReportMetric(at(0.99), name+"-p99-ms")
}

// BenchmarkASMessages and BenchmarkTGSMessages measure the engine's own work
// per exchange without the network: building the requests and handling the
// replies MIT krb5kdc 1.20 sent (the captured fuzz seeds, etype 20), crypto
// included.
func BenchmarkASMessages(b *testing.B) {
	c := fuzzClient(b)
	in := readSeed(b, filepath.Join("testdata", "fuzz", "FuzzASReply", "ok-preauth-required-20"))
	preauth := in[4:]
	in = readSeed(b, filepath.Join("testdata", "fuzz", "FuzzASReply", "ok-as-rep-20"))
	nonce, asRep := int64(binary.BigEndian.Uint32(in)), in[4:]
	var res ASResult
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.patch(&c.asBody, now)
		if err := c.buildASReq(nil, now); err != nil {
			b.Fatal(err)
		}
		if err := c.checkASReply(preauth, errorcode.KDC_ERR_PREAUTH_REQUIRED, PhasePreauthRequired, &res, now, 0); err != nil {
			b.Fatal(err)
		}
		choice, err := c.choosePreauth(PhasePreauthRequired)
		if err != nil {
			b.Fatal(err)
		}
		c.patch(&c.asBody, now)
		if err := c.buildASReq(&choice, now); err != nil {
			b.Fatal(err)
		}
		c.asNonce = nonce
		if err := c.checkASReply(asRep, 0, PhaseASRep, &res, now, 0); err != nil {
			b.Fatal(err)
		}
		if err := c.acceptASRep(asRep, &choice, PhaseASRep, &res); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTGSMessages(b *testing.B) {
	c := fuzzClient(b)
	svc := c.PrepareService(mustPrincipal(b, "HTTP/web0001.perf.test"))
	nonce, kt, key, reply, _ := tgsInput(readSeed(b, filepath.Join("testdata", "fuzz", "FuzzTGSReply", "ok-tgs-rep-20")))
	c.tgt = tgtState{ok: true, ticket: testTicket(b, kt), keyType: kt, key: key}
	if err := c.tgt.schedules(); err != nil {
		b.Fatal(err)
	}
	var res TGSResult
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.patch(&svc.body, now)
		if err := c.buildTGSReq(svc, now); err != nil {
			b.Fatal(err)
		}
		if err := c.acceptTGSRep(reply, nonce, svc, &res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUDPRoundTrip is the floor under every exchange: one datagram of a
// TGS-REQ's size through the engine's UDP socket to an echo server in its own
// process (pinned like the KDC under BENCH_KDC_CPU), and the answer back. Its
// client-cpu-ns/op is what the kernel (here: gVisor's netstack) charges per
// round trip before any Kerberos work.
func BenchmarkUDPRoundTrip(b *testing.B) {
	// The echo answers at once, or after about as long as the KDC takes to
	// issue a ticket: a client that waits longer goes idle, and waking up
	// costs CPU too.
	for _, delay := range []string{"0s", "300us"} {
		b.Run("reply-after-"+delay, func(b *testing.B) { benchUDPRoundTrip(b, delay) })
	}
}

func benchUDPRoundTrip(b *testing.B, delay string) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), echoServerEnv+"="+delay)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	ap, err := netip.ParseAddrPort(strings.TrimSpace(line))
	if err != nil {
		b.Fatal(err)
	}
	if cpu := os.Getenv("BENCH_KDC_CPU"); cpu != "" {
		n, _ := strconv.Atoi(cpu)
		var set unix.CPUSet
		set.Set(n)
		if err := unix.SchedSetaffinity(cmd.Process.Pid, &set); err != nil {
			b.Fatal(err)
		}
	}
	s, err := dialUDPSocket(netip.Addr{}, ap)
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	req, buf := make([]byte, 700), make([]byte, udpBufSize)
	var st exchangeStats
	self0 := selfCPU()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := s.exchange(ctx, req, buf, 0, &st)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((selfCPU()-self0).Nanoseconds())/float64(b.N), "client-cpu-ns/op")
}

// BenchmarkGokrb5 runs the same exchanges with gokrb5's client package, the
// reference the issue names (1.5-2x the KDC's CPU per login), against the same
// kind of realm in the same run: a new client per login (a reused one skips
// the first round trip), and TGSREQGenerateAndExchange with the TGT from
// ASExchange for TGS (GetServiceTicket would answer from its cache).
func BenchmarkGokrb5(b *testing.B) {
	r := benchRealm(b)
	cfg, err := krb5config.Load(r.Krb5Conf)
	if cfg == nil {
		b.Fatal(err) // an UnsupportedDirective error comes with a usable config
	}
	cfg.LibDefaults.DefaultTktEnctypeIDs = DefaultEtypes
	cfg.LibDefaults.DefaultTGSEnctypeIDs = DefaultEtypes
	cfg.LibDefaults.PermittedEnctypeIDs = DefaultEtypes
	kt, err := keytab.Load(r.UserKeytab)
	if err != nil {
		b.Fatal(err)
	}
	user := "user0001"
	b.Run("as", func(b *testing.B) {
		m := newCPUMeter(b, r)
		b.ReportAllocs()
		m.start(b)
		for i := 0; i < b.N; i++ {
			cl := gokrb5client.NewWithKeytab(user, r.Realm, kt, cfg, gokrb5client.DisablePAFXFAST(true))
			if err := cl.Login(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		m.stop(b)
	})
	b.Run("tgs", func(b *testing.B) {
		cl := gokrb5client.NewWithKeytab(user, r.Realm, kt, cfg, gokrb5client.DisablePAFXFAST(true))
		req, err := messages.NewASReqForTGT(r.Realm, cfg, types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, user))
		if err != nil {
			b.Fatal(err)
		}
		rep, err := cl.ASExchange(r.Realm, req, 0)
		if err != nil {
			b.Fatal(err)
		}
		spn := types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, strings.TrimSuffix(r.Service(1), "@"+r.Realm))
		m := newCPUMeter(b, r)
		b.ReportAllocs()
		b.ResetTimer()
		m.start(b)
		for i := 0; i < b.N; i++ {
			if _, _, err := cl.TGSREQGenerateAndExchange(spn, r.Realm, rep.Ticket, rep.DecryptedEncPart.Key, false); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		m.stop(b)
	})
}
