package bench

import (
	"context"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The latency load keeps its schedule whatever the KDC does, and
// measures from it (no coordinated omission): with the KDC stopped
// (SIGSTOP) for a while in the middle, every session is still started
// (rate × duration of them), every session due during the stall has a
// login latency that includes the rest of the stall, although only as
// many logins as there are clients can be sent during it; the generator
// says it fell behind. The KDC's log witnesses the counts.
func TestOpenLoopKeepsScheduleThroughStall(t *testing.T) {
	for _, gen := range []string{GeneratorBatched, GeneratorBlocking} {
		t.Run(gen, func(t *testing.T) {
			r := upRealm(t, realm.Options{NoKadmind: true})
			sys := RealmSystem(r)
			s := small("latency")
			s.Generator = gen
			s.LoginRate = 50
			s.TGSPerLogin = 1
			s.Duration = 3 * time.Second
			s.Timeout = 10 * time.Second // the stall is a slow answer, not a failure
			from := testutil.LogSize(t, r.KDCLog)

			// Stop the KDC once it has issued ten logins of the load (well
			// inside the schedule), for stall.
			const stall = 500 * time.Millisecond
			stalled := make(chan time.Duration, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				defer close(stalled)
				re := regexp.MustCompile(realmtest.ASIssue)
				for ctx.Err() == nil {
					b, err := os.ReadFile(r.KDCLog)
					if err == nil && len(re.FindAll(b[from:], -1)) >= 10 {
						break
					}
					time.Sleep(5 * time.Millisecond) // polling the log file for the event
				}
				pids := r.KDCPids()
				for _, p := range pids {
					syscall.Kill(p, syscall.SIGSTOP)
				}
				t0 := time.Now()
				time.Sleep(stall) // the stall itself is the stimulus
				d := time.Since(t0)
				for _, p := range pids {
					syscall.Kill(p, syscall.SIGCONT)
				}
				stalled <- d
			}()
			rep := runSuite(t, sys, s)
			cancel()
			d, ok := <-stalled
			if !ok {
				t.Fatal("the KDC was never stopped")
			}
			ol := rep.Latency
			if ol == nil {
				t.Fatalf("no latency result: %+v", test(rep, "latency"))
			}
			want := int(s.LoginRate * s.Duration.Seconds())
			if ol.Sessions != want || ol.Logins.Requests != want {
				t.Errorf("sessions %d, logins %d; want %d", ol.Sessions, ol.Logins.Requests, want)
			}
			if ol.Logins.Errors > 0 || ol.Tickets.Errors > 0 {
				t.Errorf("errors: logins %v, tickets %v", ol.Logins.ErrorTexts, ol.Tickets.ErrorTexts)
			}
			if got, ok := testutil.LogCount(t, r.KDCLog, from, realmtest.ASIssue), ol.Logins.Requests-ol.Logins.Errors; got != ok {
				t.Errorf("logins: report %d, KDC log %d", ok, got)
			}
			// Sessions due in the first stall−100 ms of the stall cannot
			// have been answered within 100 ms of their schedule.
			slow := 0
			for _, rc := range ol.Logins.Records {
				if rc.Kind == kindAS && rc.Latency >= 100*time.Millisecond {
					slow++
				}
			}
			if min := int(s.LoginRate*(d-100*time.Millisecond).Seconds()) - 1; slow < min {
				t.Errorf("%d logins took 100 ms or more from their schedule; the KDC stalled %v at %g sessions/s: at least %d", slow, d, s.LoginRate, min)
			}
			if ol.Logins.Latency.MaxMS < float64((d - 50*time.Millisecond).Milliseconds()) {
				t.Errorf("the slowest login took %.1f ms, the KDC stalled %v", ol.Logins.Latency.MaxMS, d)
			}
			// 8 clients, 25 sessions due in the stall: the rest start late.
			if ol.Behind == 0 || ol.MaxBehindMS < 100 {
				t.Errorf("the generator says it was behind %d times (worst %.1f ms) through a %v stall", ol.Behind, ol.MaxBehindMS, d)
			}
		})
	}
}
