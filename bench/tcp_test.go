package bench

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/loadgen"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Why the tcp load opens a connection per round trip: MIT's KDC answers
// one length-prefixed request per TCP connection and then closes it, so
// a second request written on the same connection (pipelined or after
// the first reply) is never answered.
func TestKDCAnswersOneRequestPerTCPConnection(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true})
	sys := RealmSystem(r)
	if err := sys.validate(); err != nil {
		t.Fatal(err)
	}
	f := &fleet{sys: sys}
	c, err := f.client(1, krb5.TCP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn, err := net.DialTimeout("tcp", sys.KDC, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	// Two first round trips of a login, written back to back.
	var out []byte
	for range 2 {
		req, _, err := c.EncodeLogin(nil, false)
		if err != nil {
			t.Fatal(err)
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(req)))
		out = append(out, req...)
	}
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}
	replies := 0
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Fatalf("after %d replies: %v (want the KDC to close the connection)", replies, err)
			}
			break
		}
		msg := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(conn, msg); err != nil {
			t.Fatal(err)
		}
		if _, pre, err := c.OpenLoginReply(msg); err != nil || !pre {
			t.Fatalf("reply %d: preauth required %v, %v", replies+1, pre, err)
		}
		replies++
	}
	if replies != 1 {
		t.Fatalf("the KDC answered %d of 2 requests on one TCP connection; the tcp load assumes 1", replies)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "read"
}

// The suite's tcp test on the batched generator (the default), with
// encrypted timestamp and with SPAKE: the report's tcp load has logins
// and no errors, over tcp with loadgen.TCPMaxInflight in flight, and
// names the method the logins used (loadgen's TestBatchedTCP checks the
// load itself against the KDC's log and the kernel's counts).
func TestBatchedTCP(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true})
	sys := RealmSystem(r)
	if err := sys.validate(); err != nil {
		t.Fatal(err)
	}
	for _, preauth := range []krb5.PreauthMode{krb5.PreauthEncTimestamp, krb5.PreauthSPAKE} {
		s := small("tcp")
		s.Preauth = string(preauth)
		rep := runSuite(t, sys, s)
		if st := test(rep, "tcp"); st.Status == "error" {
			t.Fatalf("%s: %+v", preauth, st)
		}
		l := rep.TCP.Load
		if l.Requests-l.Errors < 1 || l.Errors > 0 {
			t.Fatalf("%s: %d logins, %d errors: %v", preauth, l.Requests, l.Errors, l.ErrorTexts)
		}
		if l.Transport != "tcp" || l.Clients != loadgen.TCPMaxInflight {
			t.Errorf("%s: transport %s, %d in flight; want tcp, %d", preauth, l.Transport, l.Clients, loadgen.TCPMaxInflight)
		}
		if !strings.Contains(rep.System.Preauth, string(preauth)) {
			t.Errorf("%s: report says the generator used %q", preauth, rep.System.Preauth)
		}
	}
}
