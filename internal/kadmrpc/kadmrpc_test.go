package kadmrpc

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

func words(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.BigEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// TestParseReply: each kind of reply RFC 5531 allows, and garbage, gets
// its class; only an accepted SUCCESS and an AUTH_ERROR prove a server.
func TestParseReply(t *testing.T) {
	const xid = 0x1234
	for _, tc := range []struct {
		name  string
		b     []byte
		reply string
		class string
	}{
		{"kadmind's AUTH_TOOWEAK", words(xid, 1, 1, 1, 5), "AUTH_TOOWEAK", krb5.ClassSuccess},
		{"accepted", words(xid, 1, 0, 0, 0, 0), "accepted", krb5.ClassSuccess},
		{"accepted with a verifier", append(words(xid, 1, 0, 6, 5), append([]byte("abcde\x00\x00\x00"), words(0)...)...), "accepted", krb5.ClassSuccess},
		{"prog unavail", words(xid, 1, 0, 0, 0, 1), "", "RPC_PROG_UNAVAIL"},
		{"prog mismatch", words(xid, 1, 0, 0, 0, 2, 3, 4), "", "RPC_PROG_MISMATCH"},
		{"rpc mismatch", words(xid, 1, 1, 0, 2, 2), "", ClassRPCMismatch},
		{"other xid", words(xid+1, 1, 1, 1, 5), "", krb5.ClassMalformedReply},
		{"a call", words(xid, 0, 2, 2112, 2, 0), "", krb5.ClassMalformedReply},
		{"truncated", words(xid, 1, 1, 1), "", krb5.ClassMalformedReply},
		{"verifier beyond", words(xid, 1, 0, 0, 400), "", krb5.ClassMalformedReply},
		{"huge verifier", words(xid, 1, 0, 0, 0xfffffffd), "", krb5.ClassMalformedReply},
		{"bad accept_stat", words(xid, 1, 0, 0, 0, 9), "", krb5.ClassMalformedReply},
		{"bad auth_stat", words(xid, 1, 1, 1, 99), "", krb5.ClassMalformedReply},
		{"bad reply_stat", words(xid, 1, 2), "", krb5.ClassMalformedReply},
		{"empty", nil, "", krb5.ClassMalformedReply},
	} {
		reply, err := parseReply(tc.b, xid)
		if reply != tc.reply || krb5.Classify(err) != tc.class {
			t.Errorf("%s: reply %q class %s (%v), want %q %s", tc.name, reply, krb5.Classify(err), err, tc.reply, tc.class)
		}
	}
}

// TestEndlessEmptyFragments: a fake kadmind on loopback that answers the
// call with empty fragments that are never the last, as fast as it can
// for up to 5 s: the probe refuses the first one (malformed_reply) and
// closes, having taken a few bytes of them, not seconds of CPU.
func TestEndlessEmptyFragments(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sent := make(chan int64, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			sent <- -1
			return
		}
		defer conn.Close()
		conn.Read(make([]byte, 64)) // the call
		chunk := make([]byte, 4096) // 1,024 empty fragments, not last
		var n int64
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
			conn.SetWriteDeadline(end)
			m, err := conn.Write(chunk)
			if n += int64(m); err != nil {
				break
			}
		}
		sent <- n
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Ping(ctx, &net.Dialer{}, l.Addr().String())
	if krb5.Classify(err) != krb5.ClassMalformedReply {
		t.Errorf("endless empty fragments: %v (class %s), want %s", err, krb5.Classify(err), krb5.ClassMalformedReply)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("the probe read for %s", d)
	}
	t.Logf("the fake server wrote %d bytes before the probe closed", <-sent)
}
