package realm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/ulog"
)

// smallPrimary is a primary realm with a handful of principals.
func smallPrimary(t *testing.T) *Realm {
	t.Helper()
	needMIT(t)
	p, err := Up(context.Background(), Options{Dir: t.TempDir() + "/primary", Users: 5, Services: 2, Fillers: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Down() })
	return p
}

// TestReplicaFollows: a replica gets the primary's database by a full
// resync, then follows additions by iprop; with its kpropd stopped it
// falls behind, and catches up when kpropd runs again.
func TestReplicaFollows(t *testing.T) {
	t.Parallel()
	needKpropd(t)
	p := smallPrimary(t)
	ctx := context.Background()
	r, err := UpReplica(ctx, p, Options{Dir: t.TempDir() + "/replica"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	// The replica's KDC knows the primary's users: a login against it alone.
	only := onlyKDC(t, r)
	run(t, r, "env", "KRB5_CONFIG="+only, "kinit", "-k", "-t", p.UserKeytab, p.User(1))

	before := header(t, p.IpropLog)
	var adds []string
	for i := 0; i < 20; i++ {
		adds = append(adds, fmt.Sprintf("addprinc -randkey -clearpolicy new%02d", i))
	}
	if _, err := p.KadminLocal(ctx, adds...); err != nil {
		t.Fatal(err)
	}
	after := header(t, p.IpropLog)
	if after.LastSerial != before.LastSerial+20 {
		t.Fatalf("primary serial %d -> %d after 20 additions", before.LastSerial, after.LastSerial)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.WaitSerial(wctx, p.IpropLog); err != nil {
		t.Fatalf("replica did not catch up: %v; kpropd: %s", err, logTail(r.Replica.Log))
	}
	// The replica's KDC serves the new principal (the TGT from above).
	if out := run(t, r, "env", "KRB5_CONFIG="+only, "kvno", "new19@"+p.Realm); !strings.Contains(out, "kvno = 1") {
		t.Errorf("kvno new19 at the replica: %s", out)
	}

	// Stopped, it falls behind.
	if err := r.StopKpropd(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.KadminLocal(ctx, "addprinc -randkey -clearpolicy late"); err != nil {
		t.Fatal(err)
	}
	if got, want := header(t, r.IpropLog).LastSerial, header(t, p.IpropLog).LastSerial; got != want-1 {
		t.Fatalf("stopped replica at serial %d, primary %d", got, want)
	}
	if err := r.StartKpropd(ctx); err != nil {
		t.Fatal(err)
	}
	wctx2, cancel2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel2()
	if err := r.WaitSerial(wctx2, p.IpropLog); err != nil {
		t.Fatalf("restarted replica did not catch up: %v", err)
	}
}

func header(t *testing.T, path string) ulog.Header {
	t.Helper()
	h, err := ulog.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// onlyKDC writes a krb5.conf that lists the replica's KDC alone.
func onlyKDC(t *testing.T, r *Realm) string {
	t.Helper()
	conf := strings.Replace(r.krb5Conf(), r.primaryKDC(), "", 1)
	path := t.TempDir() + "/krb5.conf"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReplicaResyncDiagnostics: the primary's kdb5_util dump and kprop,
// which kadmind runs with their output on /dev/null, write to the resync
// log (kprop's own SUCCEEDED line); the replica's kpropd gets the short
// iprop_resync_timeout; and a kpropd whose listener died is reported by
// WaitSerial at once, not when its context ends.
func TestReplicaResyncDiagnostics(t *testing.T) {
	t.Parallel()
	needKpropd(t)
	p := smallPrimary(t)
	ctx := context.Background()
	r, err := UpReplica(ctx, p, Options{Dir: t.TempDir() + "/replica"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	b, err := os.ReadFile(p.resyncLog())
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, want := range []string{" kdb5_util -r " + p.Realm + " dump -i", " kprop -r " + p.Realm, "SUCCEEDED"} {
		if !strings.Contains(log, want) {
			t.Errorf("resync log lacks %q:\n%s", want, log)
		}
	}
	conf, err := os.ReadFile(r.KDCConf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "iprop_resync_timeout = "+ResyncTimeout) {
		t.Errorf("replica kdc.conf without iprop_resync_timeout:\n%s", conf)
	}

	// The listener dies: the replica would never receive another full
	// resync, and kpropdRunning says so.
	if err := r.kpropdRunning(); err != nil {
		t.Fatal(err)
	}
	pid := r.KpropdPid()
	kids := children(pid, "kpropd")
	if len(kids) != 1 {
		t.Fatalf("kpropd %d has listeners %v", pid, kids)
	}
	if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for alive(kids[0], "kpropd") { // until it is a zombie: kpropd does not reap it
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.kpropdRunning(); err == nil || !strings.Contains(err.Error(), "no full-propagation listener") {
		t.Fatalf("kpropd with a dead listener: %v", err)
	}

	// Without its listener, and not scheduled (SIGSTOP), kpropd cannot
	// catch up: WaitSerial tolerates the missing listener for a while
	// (kpropd forks it again itself around a full resync), then fails
	// without waiting for its context.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, err := p.KadminLocal(ctx, "addprinc -randkey -clearpolicy while-stopped"); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, listenerGrace/2)
	err = r.WaitSerial(sctx, p.IpropLog)
	scancel()
	if err == nil || strings.Contains(err.Error(), "listener") {
		t.Errorf("WaitSerial within the grace for the listener: %v", err)
	}
	sctx, scancel = context.WithTimeout(ctx, 3*listenerGrace)
	err = r.WaitSerial(sctx, p.IpropLog)
	if err == nil || !strings.Contains(err.Error(), "no full-propagation listener") || sctx.Err() != nil {
		t.Errorf("WaitSerial past the grace for the listener: %v (context: %v)", err, sctx.Err())
	}
	scancel()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// kpropd stopped, the replica behind: WaitSerial fails now, not when
	// its context ends.
	if err := r.StopKpropd(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.KadminLocal(ctx, "addprinc -randkey -clearpolicy after-kpropd"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = r.WaitSerial(wctx, p.IpropLog)
	if err == nil || !strings.Contains(err.Error(), "kpropd is not running") {
		t.Fatalf("WaitSerial without kpropd: %v", err)
	}
	if wctx.Err() != nil {
		t.Fatalf("WaitSerial waited for its context: %v", err)
	}
}

// TestReplicaResyncRetried: the first full resync is lost (a directory
// holds the dump file's name: kprop cannot send it), as a dump or kprop
// that fails under load is; kpropd asks again after iprop_resync_timeout
// and UpReplica still brings the replica up, well within its wait (MIT's
// default timeout, 5m, would not).
func TestReplicaResyncRetried(t *testing.T) {
	t.Parallel()
	needKpropd(t)
	p := smallPrimary(t)
	if err := os.Mkdir(p.DumpFile, 0o700); err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() {
		// A line after the dump's command line (kprop's, which kadmind
		// runs once the dump exited): the first resync has used the
		// directory and fails; it goes, and the next resync works.
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			b, _ := os.ReadFile(p.resyncLog())
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) >= 2 && strings.Contains(lines[0], " dump ") {
				failed <- os.Remove(p.DumpFile)
				return
			}
		}
		failed <- fmt.Errorf("no failed dump in %s", p.resyncLog())
	}()
	r, err := UpReplica(context.Background(), p, Options{Dir: t.TempDir() + "/replica"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	if err := <-failed; err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p.resyncLog())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), " dump -i"); n < 2 {
		t.Errorf("%d dumps; want the failed one and a retry:\n%s", n, b)
	}
	t.Logf("resync log:\n%s", b)
}
