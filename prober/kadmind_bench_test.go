package prober

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// BenchmarkKadmindProbes: the CPU one probe costs the exporter, kadmind and
// the KDC, beside MIT's own clients doing the nearest thing in the same
// run: kinit -S kadmin/changepw (the login kpasswd makes) and kadmin
// getprivs (one authenticated admin RPC: an RPCSEC_GSS session).
// MIT's clients are separate processes: their CPU is the child's rusage.
func BenchmarkKadmindProbes(b *testing.B) {
	r := realmtest.Realm(b, realm.Options{DisableLastSuccess: true})
	cfg := kadmindConfig(r, "127.0.0.1:1")
	meter := func(b *testing.B, op func() time.Duration) {
		cpu := func(pid int) time.Duration {
			d, err := testutil.ProcCPU(pid)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
		kdc, kadmind := r.KDCPids()[0], r.KadmindPid()
		self0, kdc0, adm0 := testutil.SelfCPU(), cpu(kdc), cpu(kadmind)
		var child time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			child += op()
		}
		b.StopTimer()
		n := float64(b.N)
		b.ReportMetric(float64((testutil.SelfCPU()-self0+child).Microseconds())/n, "client-cpu-us/op")
		b.ReportMetric(float64((cpu(kdc)-kdc0).Microseconds())/n, "kdc-cpu-us/op")
		b.ReportMetric(float64((cpu(kadmind)-adm0).Microseconds())/n, "kadmind-cpu-us/op")
	}
	probe := func(name, address string) {
		b.Run(name, func(b *testing.B) {
			mod := cfg.Modules[name]
			creds := mustCreds(b, &mod)
			t, err := NewTarget(address, &mod, creds, log.NewNopLogger())
			if err != nil {
				b.Fatal(err)
			}
			defer t.Close()
			meter(b, func() time.Duration {
				if o := t.Run(context.Background()); !o.Success() {
					b.Fatalf("probe failed: %v %v %v", o.ASErr, o.KpasswdErr, o.RPCErr)
				}
				return 0
			})
		})
	}
	mit := func(name string, args ...string) {
		b.Run(name, func(b *testing.B) {
			meter(b, func() time.Duration {
				cmd := exec.Command(args[0], args[1:]...)
				cmd.Env = append(os.Environ(), r.Env()...)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %v %s", args, err, out)
				}
				u := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				return time.Duration(u.Utime.Nano() + u.Stime.Nano())
			})
		})
	}
	probe("kpasswd", cfg.Probes[0].Address)
	mit("kinit_changepw", "kinit", "-k", "-t", r.ProbeKeytab, "-c", "MEMORY:", "-S", "kadmin/changepw", r.ProbePrincipal)
	probe("kadmin", r.KadmindAddr)
	mit("kadmin_getprivs", "kadmin", "-k", "-t", r.AdminKeytab, "-p", r.AdminPrincipal, "-q", "getprivs")
}

func mustCreds(b *testing.B, m *config.ProbeModule) *krb5.Credentials {
	if m.EffectiveProber() == config.ProberKadmin {
		return nil
	}
	c, err := ModuleCredentials(m)
	if err != nil {
		b.Fatal(err)
	}
	return c
}
