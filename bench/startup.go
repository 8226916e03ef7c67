package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// startupTry is how often a login is tried while the KDC starts.
const startupTry = 10 * time.Millisecond

// startup stops the KDC, starts it, and times the first successful login
// (a login is tried every 10 ms), StartupRounds times.
func (r *run) startup(ctx context.Context) error {
	if r.sys.StopKDC == nil || r.sys.StartKDC == nil {
		return skip("no way to stop and start this KDC (configure its commands)")
	}
	if !r.sys.AllowWrites {
		return skip("restarts the KDC: allow it with --allow-writes")
	}
	c, err := r.fleet.client(1, krb5.UDP)
	if err != nil {
		return err
	}
	defer c.Close()
	st := &Startup{}
	r.rep.Startup = st
	for round := 0; round < r.set.StartupRounds; round++ {
		if err := r.sys.StopKDC(); err != nil {
			return fmt.Errorf("stopping the KDC: %w", err)
		}
		started := make(chan error, 1)
		go func() { started <- r.sys.StartKDC(ctx) }()
		tries, took, err := firstLogin(ctx, c, r.set.Timeout, started)
		if err != nil {
			return err
		}
		st.RoundsMS = append(st.RoundsMS, ms(took))
		st.Tries = append(st.Tries, tries)
	}
	var sum float64
	for _, v := range st.RoundsMS {
		sum += v
		st.MaxMS = max(st.MaxMS, v)
	}
	st.AvgMS = sum / float64(len(st.RoundsMS))
	r.metric("startup", "startup_seconds", "Startup time (first ticket)", "ms", st.AvgMS, "<=", r.set.Targets.StartupMaxMS, 1e-3)
	return nil
}

// firstLogin tries a login every startupTry from now until one succeeds,
// and returns the tries and the time from the call to that success. A
// start that fails (started delivers an error) ends it with that error;
// the start must deliver on started exactly once, and firstLogin waits
// for it before returning so no start runs on behind the caller.
func firstLogin(ctx context.Context, c *krb5.Client, timeout time.Duration, started <-chan error) (int, time.Duration, error) {
	t0 := time.Now()
	tick := time.NewTicker(startupTry)
	defer tick.Stop()
	startDone := false
	var startErr error
	// The KDC must answer within the harness's own start timeout.
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tries := 0
	for {
		tries++
		rctx, cancel := context.WithTimeout(ctx, min(timeout, time.Second))
		_, err := c.Login(rctx)
		cancel()
		if err == nil {
			took := time.Since(t0)
			if !startDone {
				startErr = <-started
			}
			if startErr != nil {
				return tries, took, fmt.Errorf("starting the KDC: %w", startErr)
			}
			return tries, took, nil
		}
		select {
		case <-ctx.Done():
			if !startDone {
				<-started
			}
			return tries, 0, ctx.Err()
		case startErr = <-started:
			startDone = true
			if startErr != nil {
				return tries, 0, fmt.Errorf("starting the KDC: %w", startErr)
			}
		case <-deadline.C:
			if !startDone {
				<-started
			}
			return tries, 0, fmt.Errorf("no login succeeded within 60 s of starting the KDC: %v", err)
		case <-tick.C:
		}
	}
}
