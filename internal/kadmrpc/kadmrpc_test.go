package kadmrpc

import (
	"encoding/binary"
	"testing"

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
