package realm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proxyRealm starts a realm of users users with its KDC proxy (the test
// skipped without gunicorn and python3-kdcproxy), run in parallel, and
// writes a krb5.conf that reaches the KDC through the proxy only.
func proxyRealm(t *testing.T, users int) (r *Realm, krb5conf string) {
	t.Parallel()
	if err := KDCProxyAvailable(); err != nil {
		t.Skip(err)
	}
	r, err := Up(context.Background(), Options{Dir: filepath.Join(t.TempDir(), "r"), Users: users, Services: 1, Fillers: -1, NoKadmind: true, KDCProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	krb5conf = filepath.Join(t.TempDir(), "krb5.conf")
	if err := os.WriteFile(krb5conf, []byte(r.KDCProxyKrb5Conf(r.KDCProxy.URL, r.KDCProxy.CA)), 0o600); err != nil {
		t.Fatal(err)
	}
	return r, krb5conf
}

// TestKDCProxy: the harness's proxy serves MIT kinit and kvno (kdc =
// https://... in krb5.conf, the CA as http_anchors) through to the
// realm's KDC, whose log shows the requests arriving over TCP from the
// proxy; its keys are mode 0600; Down stops gunicorn and every worker.
func TestKDCProxy(t *testing.T) {
	r, conf := proxyRealm(t, 2)
	p := r.KDCProxy
	for _, f := range []string{p.CAKey, p.Key} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v mode %v, want 0600", f, err, fi.Mode().Perm())
		}
	}
	env := append(os.Environ(), "KRB5_CONFIG="+conf, "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "cc"))
	for _, args := range [][]string{{"kinit", "-k", "-t", r.UserKeytab, r.User(1)}, {"kvno", r.Service(1)}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s through the proxy: %v: %s\nproxy log: %s", args[0], err, out, logTail(p.Log))
		}
	}
	log, _ := os.ReadFile(r.KDCLog)
	if !strings.Contains(string(log), "AS_REQ") || !strings.Contains(string(log), "TGS_REQ") {
		t.Fatalf("KDC log has no AS_REQ and TGS_REQ:\n%s", log)
	}
	pids := r.KDCProxyPids()
	if len(pids) != 3 {
		t.Fatalf("gunicorn processes %v, want the master and 2 workers", pids)
	}
	// Without its pid file the proxy is still found by its command line.
	if err := os.Remove(p.PidFile); err != nil {
		t.Fatal(err)
	}
	if got := r.KDCProxyPid(); got != pids[0] {
		t.Errorf("without the pid file: master %d, want %d", got, pids[0])
	}
	if err := r.StopKDCProxy(); err != nil {
		t.Fatal(err)
	}
	if anyAlive(pids, gunicornComm) {
		t.Fatalf("gunicorn %v still running after StopKDCProxy", pids)
	}
}

// TestKDCProxyStopsWithRequestInFlight: a request the proxy is holding
// for a KDC that does not answer (stopped with SIGSTOP; kdcproxy waits
// up to its own 17 s) does not hold up StopKDCProxy past gunicorn's
// graceful timeout: it returns nil, every process gone, well within its
// 10 s. Before --graceful-timeout the master waited for the worker (30 s
// by default) and StopKDCProxy killed it and failed (alerts' TestEndToEnd,
// which stops the KDC while the probes go through the proxy).
func TestKDCProxyStopsWithRequestInFlight(t *testing.T) {
	r, conf := proxyRealm(t, 1)
	kdcs := r.KDCPids()
	for _, p := range kdcs {
		syscall.Kill(p, syscall.SIGSTOP)
	}
	t.Cleanup(func() {
		for _, p := range kdcs {
			syscall.Kill(p, syscall.SIGCONT)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kinit := exec.CommandContext(ctx, "kinit", "-k", "-t", r.UserKeytab, r.User(1))
	kinit.Env = append(os.Environ(), "KRB5_CONFIG="+conf, "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "cc"))
	if err := kinit.Start(); err != nil {
		t.Fatal(err)
	}
	defer kinit.Wait()
	defer kinit.Process.Kill()
	// The request is in a worker once the stopped KDC holds a connection
	// from the proxy in its accept queue.
	deadline := time.Now().Add(10 * time.Second)
	for !proxyWaitsOnKDC(t, r) {
		if time.Now().After(deadline) {
			t.Fatalf("no connection from the proxy reached the KDC's port; proxy log: %s", logTail(r.KDCProxy.Log))
		}
		time.Sleep(20 * time.Millisecond)
	}
	pids := r.KDCProxyPids()
	start := time.Now()
	if err := r.StopKDCProxy(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("StopKDCProxy took %v with a request in flight", took.Round(time.Millisecond))
	}
	if anyAlive(pids, gunicornComm) {
		t.Fatalf("gunicorn %v still running after StopKDCProxy", pids)
	}
}

// proxyWaitsOnKDC reports whether a request waits at the stopped KDC:
// a datagram queued on its UDP socket, or a connection in its TCP
// listener's accept queue (the kernel completes the handshake for it).
func proxyWaitsOnKDC(t *testing.T, r *Realm) bool {
	local := fmt.Sprintf(":%04X", r.KDCPort)
	for _, f := range []string{"/proc/net/udp", "/proc/net/tcp"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx_queue:rx_queue ...
			if x := strings.Fields(l); len(x) > 4 && strings.HasSuffix(x[1], local) && !strings.HasSuffix(x[4], ":00000000") {
				return true
			}
		}
	}
	return false
}
