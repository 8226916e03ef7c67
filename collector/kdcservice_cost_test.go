package collector

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/loadgen"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// costEnv runs TestKDCServiceCost (about a minute of full-speed load: not
// part of make test).
const costEnv = "KRB5_EXPORTER_KDCSERVICE_COST"

// TestKDCServiceCost measures what the kdcservice program costs the KDC:
// the bench's batched generator (internal/loadgen, 32 requests in flight)
// drives a single-process harness KDC pinned to CPU 0 at full speed, as
// logins and tgs tickets, with the program detached and attached in turn
// (5 rounds of 1.5 s each way per kind, alternated so that the machine's
// own load falls on both), and compares the KDC's CPU time per answered
// request (schedstat run time, which includes the BPF programs run in its
// context). The median with the program must be within 2 % of the median
// without.
func TestKDCServiceCost(t *testing.T) {
	if os.Getenv(costEnv) == "" {
		t.Skip("set " + costEnv + "=1 to measure the kdcservice collector's cost (about a minute)")
	}
	r := realmtest.Realm(t, realm.Options{Users: 200, Services: 20, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	_, ks, _ := serviceCollector(t, r) // skips where BPF is not permitted
	ks.Close()
	kdc := r.KDCPids()[0]
	if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", strconv.Itoa(kdc)).CombinedOutput(); err != nil {
		t.Fatalf("taskset: %v %s", err, out)
	}
	cfg := costConfig(t, r)
	runNS := func() float64 {
		ss, err := procOf(t, kdc).Schedstat()
		if err != nil {
			t.Fatal(err)
		}
		return float64(ss.RunningNanoseconds)
	}
	// With the program on, the KDC's median service time beside the
	// clients' median round trip, per kind.
	var svcMedian, rttMedian = map[string][]float64{}, map[string][]float64{}
	measure := func(kind string, on bool) float64 {
		var tr *kdcbpf.Tracer
		if on {
			var err error
			if tr, err = kdcbpf.Load(); err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if err := tr.Watch([]int{kdc}); err != nil {
				t.Fatal(err)
			}
		}
		var before, after float64
		c := cfg
		marks := 0
		c.Measure = func() {
			if marks++; marks == 1 {
				before = runNS()
			} else {
				after = runNS()
			}
		}
		res, err := loadgen.Batched(context.Background(), c, kind, 32, 1500*time.Millisecond, 0)
		if err != nil {
			t.Fatal(err)
		}
		ok := 0
		for _, rec := range res.Records {
			if rec.Class == krb5.ClassSuccess {
				ok++
			}
		}
		if ok == 0 {
			t.Fatalf("%s: no request answered", kind)
		}
		if tr != nil {
			var snap kdcbpf.Snapshot
			if err := tr.Read(&snap); err != nil {
				t.Fatal(err)
			}
			req := kdcbpf.RequestTGS
			if kind == loadgen.KindAS {
				req = kdcbpf.RequestAS
			}
			svcMedian[kind] = append(svcMedian[kind], median(snap.Service[req][kdcbpf.TransportUDP]))
			var lat []float64
			for _, rec := range res.Records {
				if rec.Class == krb5.ClassSuccess {
					lat = append(lat, rec.Latency.Seconds())
				}
			}
			slices.Sort(lat)
			rttMedian[kind] = append(rttMedian[kind], lat[len(lat)/2])
		}
		return (after - before) / float64(ok) / 1e3 // µs per request
	}
	for _, kind := range []string{loadgen.KindAS, loadgen.KindTGS} {
		var off, on []float64
		for range 5 {
			off = append(off, measure(kind, false))
			on = append(on, measure(kind, true))
		}
		slices.Sort(off)
		slices.Sort(on)
		ratio := on[2] / off[2]
		t.Logf("%s: KDC CPU per request %.1f µs without the program (%s), %.1f µs with it (%s): %+.1f %%", kind, off[2], fmtList(off), on[2], fmtList(on), 100*(ratio-1))
		s, l := svcMedian[kind], rttMedian[kind]
		slices.Sort(s)
		slices.Sort(l)
		t.Logf("%s: with %d in flight, the KDC's median service time at most %.3g ms (its histogram bucket's bound), the clients' median round trip %.3g ms (medians of %d rounds)", kind, 32, s[len(s)/2]*1e3, l[len(l)/2]*1e3, len(s))
		if ratio > 1.02 {
			t.Errorf("%s: the kdcservice program costs the KDC %.1f %% more CPU per request, want at most 2 %%", kind, 100*(ratio-1))
		}
	}
}

func fmtList(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.1f", x)
	}
	return s
}

// costConfig is the generator's configuration against r, as the bench
// makes it: r's users from their keytab, its services.
func costConfig(t *testing.T, r *realm.Realm) loadgen.Config {
	t.Helper()
	ps := make([]krb5.Principal, r.Opts.Users)
	for i := range ps {
		p, err := krb5.ParsePrincipal(r.User(i+1), r.Realm)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	creds, err := krb5.NewKeytabCredentialsFor(r.UserKeytab, ps)
	if err != nil {
		t.Fatal(err)
	}
	return loadgen.Config{
		KDC:   r.KDCAddr,
		Users: len(ps),
		Client: func(i int, tr krb5.Transport) (*krb5.Client, error) {
			u := (i - 1) % len(ps)
			return krb5.NewClient(krb5.Options{KDC: r.KDCAddr, Transport: tr, Client: ps[u], Credentials: creds[u], UDPRetransmit: time.Second})
		},
		Services: r.Opts.Services,
		Service: func(c *krb5.Client, i int) *krb5.Service {
			p, err := krb5.ParsePrincipal(r.Service((i-1)%r.Opts.Services+1), r.Realm)
			if err != nil {
				t.Fatal(err)
			}
			return c.PrepareService(p)
		},
		Timeout: 5 * time.Second,
	}
}
