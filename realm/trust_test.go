package realm

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestTrust: Up with Options.Trust makes a trust that MIT's clients walk
// both ways (a user of each realm gets a ticket of the other's service,
// so both cross-realm keys are the same in both databases), Load finds the
// trusted realm, and Down stops and removes both.
func TestTrust(t *testing.T) {
	t.Parallel()
	needMIT(t)
	dir := t.TempDir() + "/a"
	a, err := Up(context.Background(), Options{Dir: dir, Realm: "A.TEST", Domain: "a.test", Users: 1, Services: 1, Fillers: -1, NoKadmind: true, Trust: "B.TEST"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Down()
	b := a.Trusted
	if b == nil || b.Dir != a.TrustDir() || b.Peer == nil || b.Peer.Realm != "A.TEST" || a.Peer.Realm != "B.TEST" {
		t.Fatalf("trusted realm %+v", b)
	}
	for _, dir := range [][2]*Realm{{a, b}, {b, a}} {
		from, to := dir[0], dir[1]
		cc := "FILE:" + t.TempDir() + "/cc"
		env := append(os.Environ(), "KRB5_CONFIG="+from.Krb5Conf, "KRB5CCNAME="+cc)
		for _, args := range [][]string{{"kinit", "-k", "-t", from.ProbeKeytab, from.ProbePrincipal}, {"kvno", to.Service(1)}} {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s to %s: %s: %v %s", from.Realm, to.Realm, args[0], err, out)
			}
		}
	}
	for _, r := range []*Realm{a, b} {
		conf, _ := os.ReadFile(r.Krb5Conf)
		for _, want := range []string{"[capaths]", "\t.b.test = B.TEST\n", "\t.a.test = A.TEST\n", "\t\tB.TEST = .\n", "\t\tA.TEST = .\n"} {
			if !strings.Contains(string(conf), want) {
				t.Errorf("%s's krb5.conf lacks %q:\n%s", r.Realm, want, conf)
			}
		}
		state, _ := os.ReadFile(r.path(stateFile))
		if strings.Contains(string(state), "-pw") || strings.Contains(string(state), "addprinc") {
			t.Errorf("%s's state file holds the trust's commands:\n%s", r.Realm, state)
		}
	}
	l, err := Load(dir)
	if err != nil || l.Trusted == nil || l.Trusted.Realm != "B.TEST" {
		t.Fatalf("Load: %v %+v", err, l)
	}
	pid := b.KDCPids()
	if err := l.Down(); err != nil {
		t.Fatal(err)
	}
	if len(pid) == 0 || alive(pid[0], "krb5kdc") {
		t.Errorf("the trusted realm's KDC %v still runs after Down", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Down left %s", dir)
	}
}

func TestTrustOptions(t *testing.T) {
	for _, o := range []Options{{Dir: "d", Realm: "A.TEST", Trust: "A.TEST"}, {Dir: "d", Trust: "b/../x"}} {
		if _, err := o.withDefaults(); err == nil || !strings.Contains(err.Error(), "trusted realm") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// A trusted realm removed by hand does not keep the first one from
// loading and going down.
func TestTrustGoneBeforeDown(t *testing.T) {
	t.Parallel()
	needMIT(t)
	dir := t.TempDir() + "/a"
	a, err := Up(context.Background(), Options{Dir: dir, Users: -1, Services: -1, Fillers: -1, NoKadmind: true, Trust: "B.TEST"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Down()
	if err := a.Trusted.Down(); err != nil {
		t.Fatal(err)
	}
	l, err := Load(dir)
	if err != nil || l.Trusted != nil {
		t.Fatalf("Load without the trusted realm's directory: %v %+v", err, l)
	}
	if err := l.Down(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Down left %s", dir)
	}
}
