package realm

import (
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/messages"
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

// TestMoveKDCClock: a MovableClock KDC's own replies (the server time of
// its KRB-ERROR) move with MoveKDCClock, and back, without a restart.
func TestMoveKDCClock(t *testing.T) {
	t.Parallel()
	needMIT(t)
	if _, err := fakeTimeLib(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	r, err := Up(context.Background(), Options{Dir: t.TempDir() + "/r", Users: 1, Services: 1, Fillers: -1, NoKadmind: true, MovableClock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Down()
	pids := r.KDCPids()
	for _, offset := range []time.Duration{0, 10 * time.Minute, 0} {
		if err := r.MoveKDCClock(offset); err != nil {
			t.Fatal(err)
		}
		// libfaketime reads the file again within a second.
		var off time.Duration
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			off = kdcClockOffset(t, r)
			if (off - offset).Abs() < 3*time.Second {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("KDC clock %v away after MoveKDCClock(%v)", off, offset)
			}
		}
	}
	if got := r.KDCPids(); !slices.Equal(got, pids) {
		t.Errorf("KDC pids %v, then %v: restarted", pids, got)
	}
	if err := r.RestartKDCShifted(context.Background(), time.Minute); err == nil {
		t.Error("RestartKDCShifted on a movable clock: no error")
	}
}

// kdcClockOffset is how far r's KDC's clock is from this one: the server
// time of its KRB-ERROR to an AS-REQ without pre-authentication.
func kdcClockOffset(t *testing.T, r *Realm) time.Duration {
	t.Helper()
	req, err := ASRequest(r.Realm, ReadyPrincipal)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", r.KDCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	sent := time.Now()
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var ke messages.KRBError
	if err := ke.Unmarshal(buf[:n]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	return ke.STime.Sub(sent)
}
