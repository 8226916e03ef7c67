package krb5

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// changepwClient is a Client of the realm's probe principal that logs in
// for kadmin/changepw, as kpasswd does.
func changepwClient(t testing.TB, r *realm.Realm) *Client {
	t.Helper()
	p := mustPrincipal(t, r.ProbePrincipal)
	creds, err := NewKeytabCredentials(r.ProbeKeytab, p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Options{KDC: r.KDCAddr, Client: p, Credentials: creds,
		ASService: Principal{Components: []string{"kadmin", "changepw"}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKpasswdProbeChangesNothing: over both transports, kadmind verifies
// the AP-REQ (its AP-REP decrypts with our session key) and refuses the
// empty KRB-PRIV with HARDERROR; 1,000 probes leave the probe principal's
// kvno, last modification and last password change as kadmin.local read
// them before.
func TestKpasswdProbeChangesNothing(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{})
	before := realmtest.KeyState(t, r, r.ProbePrincipal)
	// The oracle runs however the probes went.
	defer func() {
		if after := realmtest.KeyState(t, r, r.ProbePrincipal); after != before {
			t.Errorf("the probe principal changed:\nbefore\n%safter\n%s", before, after)
		}
	}()
	kp := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KpasswdPort))
	c := changepwClient(t, r)
	ctx := testCtx(t, 60e9)
	if _, err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		tr := UDP
		if i%2 == 1 {
			tr = TCP
		}
		if i%100 == 0 {
			// A fresh ticket now and then, as each probe logs in.
			if _, err := c.Login(ctx); err != nil {
				t.Fatal(err)
			}
		}
		res, err := c.Kpasswd(ctx, kp, tr)
		if err != nil {
			t.Fatalf("probe %d over %s: %v", i, tr, err)
		}
		if res.Code != KpasswdHardError || res.Text != "Failed decrypting request" {
			t.Fatalf("probe %d: result %d %q", i, res.Code, res.Text)
		}
	}
}

// TestKpasswdReplyMutations: kadmind's real reply, cut at every length and
// with every byte flipped, is refused with a bounded class and never
// read as healthy or crashes the parser (what a hostile server on port
// 464 can send).
func TestKpasswdReplyMutations(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{})
	c := changepwClient(t, r)
	// A fixed clock: the authenticator's time, which the AP-REP must echo,
	// is known to the checks below.
	sent := time.Now()
	c.now = func() time.Time { return sent }
	ctx := testCtx(t, 30e9)
	if _, err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	// A relay that keeps kadmind's reply.
	front, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	replies := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 65536)
		n, from, err := front.ReadFrom(buf)
		if err != nil {
			return
		}
		back, err := net.Dial("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KpasswdPort)))
		if err != nil {
			return
		}
		defer back.Close()
		back.Write(buf[:n])
		m, err := back.Read(buf)
		if err != nil {
			return
		}
		replies <- append([]byte(nil), buf[:m]...)
		front.WriteTo(buf[:m], from)
	}()
	if _, err := c.Kpasswd(ctx, front.LocalAddr().String(), UDP); err != nil {
		t.Fatalf("through the relay: %v", err)
	}
	reply := <-replies
	allowed := map[string]bool{ClassMalformedReply: true, ClassDecrypt: true}
	for code := range 8 {
		allowed[KpasswdResultName(code)] = true
	}
	allowed["KPASSWD_UNKNOWN"] = true
	et := lookupEtype(c.tgt.keyType)
	var res KpasswdResult
	if err := c.acceptKpasswdReply(reply, et, sent, &res); err != nil || res.Code != KpasswdHardError {
		t.Fatalf("the reply as it came: %v, result %d", err, res.Code)
	}
	check := func(what string, b []byte) {
		var res KpasswdResult
		err := c.acceptKpasswdReply(b, et, sent, &res)
		if err == nil || !allowed[Classify(err)] {
			t.Errorf("%s: %v (class %s)", what, err, Classify(err))
		}
	}
	for n := range len(reply) {
		check("cut at "+strconv.Itoa(n), reply[:n])
	}
	for i := range reply {
		b := append([]byte(nil), reply...)
		b[i] ^= 0x41
		check("byte "+strconv.Itoa(i)+" flipped", b)
	}
	t.Logf("%d-byte reply, %d mutations refused", len(reply), 2*len(reply))
}

// TestKpasswdAuthError: kadmind that cannot verify the AP-REQ answers a
// KRB-ERROR carrying KRB5_KPASSWD_AUTHERROR, which the probe reports as
// that class: an authenticator 10 minutes off kadmind's clock, and a
// ticket whose kadmin/changepw key was replaced (cpw -randkey, no old key
// kept) after it was issued.
func TestKpasswdAuthError(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{})
	kp := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KpasswdPort))
	ctx := testCtx(t, 30e9)

	c := changepwClient(t, r)
	if _, err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return time.Now().Add(10 * time.Minute) }
	_, err := c.Kpasswd(ctx, kp, UDP)
	if e := wantClass(t, err, "KPASSWD_AUTHERROR"); e.Text != "Failed reading application request" {
		t.Errorf("skewed authenticator: text %q", e.Text)
	}

	c = changepwClient(t, r)
	if _, err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	realmtest.Kadmin(t, r, "cpw -randkey kadmin/changepw")
	_, err = c.Kpasswd(ctx, kp, TCP)
	wantClass(t, err, "KPASSWD_AUTHERROR")
}
