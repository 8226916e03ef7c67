package prober

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestKDCProxyCPU measures, in one run, the CPU time per login of the
// probe's engine through the harness's KDC proxy against MIT kinit -k
// through the same proxy, and the proxy's (gunicorn's) and the KDC's own
// CPU per login on each side. Off by default (a load): KDCPROXY_CPU_LOGINS=200
// runs 200 logins a side, in 10 alternating rounds; the clients' figures
// are the medians of the rounds, the servers' (from /proc, in 10 ms
// ticks) the means over all rounds. Pin it to see no migration costs:
//
//	KDCPROXY_CPU_LOGINS=200 taskset -c 1 go test -count=1 -run TestKDCProxyCPU -v ./prober/
//
// The probe logs in as the daemon does at its 15 s interval: a fresh TLS
// connection for each login (kinit opens one per round trip).
func TestKDCProxyCPU(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KDCPROXY_CPU_LOGINS"))
	if n <= 0 {
		t.Skip("set KDCPROXY_CPU_LOGINS=200 to measure")
	}
	realmtest.RequireKDCProxy(t)
	r := upRealm(t, realm.Options{KDCProxy: true})
	p := r.KDCProxy
	mod := proxyModule(r)
	mod.Service = ""
	creds, err := ModuleCredentials(&mod)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTarget(p.URL, &mod, creds, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()

	dir := t.TempDir()
	conf := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(conf, []byte(r.KDCProxyKrb5Conf(p.URL, p.CA)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "KRB5_CONFIG="+conf, "KRB5CCNAME=FILE:"+filepath.Join(dir, "cc"))

	const rounds = 10
	per := max(n/rounds, 1)
	var probeCPU, kinitCPU, proxyProbe, proxyKinit, kdcProbe, kdcKinit []float64
	for round := 0; round < rounds; round++ {
		// The probe's side: this process's CPU (the engine, net/http,
		// crypto/tls, the Go runtime), nothing else running in it.
		px, kd := pidsCPU(t, r.KDCProxyPids()), pidsCPU(t, r.KDCPids())
		self := selfCPU()
		for i := 0; i < per; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := tg.client.Login(ctx)
			cancel()
			if err != nil {
				t.Fatalf("probe login %d: %v", i, err)
			}
			tg.client.Close() // the next login opens its own TLS connection
		}
		probeCPU = append(probeCPU, (selfCPU()-self)/float64(per))
		proxyProbe = append(proxyProbe, (pidsCPU(t, r.KDCProxyPids())-px)/float64(per))
		kdcProbe = append(kdcProbe, (pidsCPU(t, r.KDCPids())-kd)/float64(per))

		// kinit's side: each child's own rusage.
		px, kd = pidsCPU(t, r.KDCProxyPids()), pidsCPU(t, r.KDCPids())
		var kc float64
		for i := 0; i < per; i++ {
			cmd := exec.Command("kinit", "-k", "-t", r.ProbeKeytab, r.ProbePrincipal)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kinit %d: %v: %s", i, err, out)
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			kc += tv(ru.Utime) + tv(ru.Stime)
		}
		kinitCPU = append(kinitCPU, kc/float64(per))
		proxyKinit = append(proxyKinit, (pidsCPU(t, r.KDCProxyPids())-px)/float64(per))
		kdcKinit = append(kdcKinit, (pidsCPU(t, r.KDCPids())-kd)/float64(per))
	}
	ms := func(v []float64) float64 { return median(v) * 1e3 }
	ratio := make([]float64, rounds)
	for i := range ratio {
		ratio[i] = probeCPU[i] / kinitCPU[i]
	}
	t.Logf("%d logins a side in %d rounds; CPU ms per login, median of rounds (min-max):", per*rounds, rounds)
	t.Logf("probe engine %.2f (%.2f-%.2f), kinit %.2f (%.2f-%.2f), ratio probe/kinit %.2f (%.2f-%.2f)",
		ms(probeCPU), 1e3*slices.Min(probeCPU), 1e3*slices.Max(probeCPU), ms(kinitCPU), 1e3*slices.Min(kinitCPU), 1e3*slices.Max(kinitCPU),
		median(ratio), slices.Min(ratio), slices.Max(ratio))
	// /proc counts in clock ticks (10 ms): the servers' figures are the
	// totals over every round.
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v)) * 1e3
	}
	t.Logf("the proxy (gunicorn+kdcproxy) per login, over all rounds: %.2f for the probe's, %.2f for kinit's; the KDC: %.2f and %.2f",
		mean(proxyProbe), mean(proxyKinit), mean(kdcProbe), mean(kdcKinit))
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		t.Logf("load average: %s", l)
	}
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return tv(ru.Utime) + tv(ru.Stime)
}

// pidsCPU sums the CPU seconds of processes from /proc.
func pidsCPU(t *testing.T, pids []int) float64 {
	t.Helper()
	var s float64
	for _, pid := range pids {
		p, err := procfs.NewProc(pid)
		if err != nil {
			continue
		}
		st, err := p.Stat()
		if err != nil {
			continue
		}
		s += st.CPUTime()
	}
	return s
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
