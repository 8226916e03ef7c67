package realm

import (
	"context"
	"fmt"
	"os"
	"strings"
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
	if err := KpropdAvailable(); err != nil {
		t.Skip(err)
	}
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
