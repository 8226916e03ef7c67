package realm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKDCProxy: the harness's proxy serves MIT kinit and kvno (kdc =
// https://... in krb5.conf, the CA as http_anchors) through to the
// realm's KDC, whose log shows the requests arriving over TCP from the
// proxy; its keys are mode 0600; Down stops gunicorn and every worker.
func TestKDCProxy(t *testing.T) {
	t.Parallel()
	if err := KDCProxyAvailable(); err != nil {
		t.Skip(err)
	}
	r, err := Up(context.Background(), Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 2, Services: 1, Fillers: -1, NoKadmind: true, KDCProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	p := r.KDCProxy
	for _, f := range []string{p.CAKey, p.Key} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v mode %v, want 0600", f, err, fi.Mode().Perm())
		}
	}
	conf := filepath.Join(t.TempDir(), "krb5.conf")
	if err := os.WriteFile(conf, []byte(r.KDCProxyKrb5Conf(p.URL, p.CA)), 0o600); err != nil {
		t.Fatal(err)
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
