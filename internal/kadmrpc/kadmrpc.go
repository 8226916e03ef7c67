// Package kadmrpc is the liveness probe of kadmind's admin RPC (port 749):
// one ONC RPC call (RFC 5531) over TCP with record marking to kadmind's
// program, KADM 2112 version 2 (MIT src/lib/kadm5/kadm_rpc.h), procedure 0
// (NULL) with AUTH_NONE. kadmind's dispatcher (src/kadmin/server/
// kadm_rpc_svc.c, kadm_1) refuses every call that is not AUTH_GSSAPI or
// RPCSEC_GSS before it looks at the procedure: it logs "Authentication
// attempt failed: <addr>, RPC authentication flavor 0" and replies
// MSG_DENIED / AUTH_ERROR / AUTH_TOOWEAK. Any well-formed reply to our xid
// that is an accepted SUCCESS or an AUTH_ERROR proves a serving RPC
// service; the other replies (PROG_UNAVAIL, PROG_MISMATCH, ...: another
// program on the port), garbage, a refused connection or silence fail, each
// its own class. The probe carries no credential and changes nothing.
// XDR is big-endian 32-bit words: encoding/binary is all it needs.
package kadmrpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// kadmind's RPC program and the version it registers.
const (
	Program = 2112
	Version = 2
)

// Phase is the exchange's phase in errors.
const Phase = "kadmin_rpc"

// RPC constants (RFC 5531).
const (
	msgCall       = 0
	msgReply      = 1
	msgAccepted   = 0
	msgDenied     = 1
	acceptSuccess = 0
	rejectRPCMis  = 0
	rejectAuthErr = 1
	authNone      = 0
	rpcVersion    = 2
)

// Classes of RPC-level replies that do not prove kadmind: a bounded set of
// result label values.
var acceptNames = map[uint32]string{
	1: "RPC_PROG_UNAVAIL",
	2: "RPC_PROG_MISMATCH",
	3: "RPC_PROC_UNAVAIL",
	4: "RPC_GARBAGE_ARGS",
	5: "RPC_SYSTEM_ERR",
}

// ClassRPCMismatch is the class of MSG_DENIED / RPC_MISMATCH.
const ClassRPCMismatch = "RPC_MISMATCH"

// Classes are every class Ping returns besides the network ones: pre-created
// series.
var Classes = []string{"RPC_PROG_UNAVAIL", "RPC_PROG_MISMATCH", "RPC_PROC_UNAVAIL", "RPC_GARBAGE_ARGS", "RPC_SYSTEM_ERR", ClassRPCMismatch}

// authStatNames name the auth_stat of an AUTH_ERROR reply, for the log.
var authStatNames = map[uint32]string{
	1: "AUTH_BADCRED", 2: "AUTH_REJECTEDCRED", 3: "AUTH_BADVERF", 4: "AUTH_REJECTEDVERF",
	5: "AUTH_TOOWEAK", 6: "AUTH_INVALIDRESP", 7: "AUTH_FAILED",
}

// maxReply bounds the reply read: kadmind's answer is 24 to 28 bytes.
const maxReply = 4 << 10

// Result describes one successful call.
type Result struct {
	Duration time.Duration
	// Reply is "accepted" or the auth_stat of an AUTH_ERROR refusal
	// ("AUTH_TOOWEAK" from kadmind).
	Reply string
}

// Ping calls the NULL procedure of kadmind's program at addr. Errors are
// *krb5.Error with Phase "kadmin_rpc".
func Ping(ctx context.Context, d *net.Dialer, addr string) (Result, error) {
	start := time.Now()
	reply, err := ping(ctx, d, addr)
	return Result{Duration: time.Since(start), Reply: reply}, err
}

func ping(ctx context.Context, d *net.Dialer, addr string) (string, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", netError(ctx, err)
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	xid := rand.Uint32()
	var call [44]byte
	binary.BigEndian.PutUint32(call[0:], 0x80000000|40) // last fragment, 40 bytes
	for i, v := range []uint32{xid, msgCall, rpcVersion, Program, Version, 0, authNone, 0, authNone, 0} {
		binary.BigEndian.PutUint32(call[4+4*i:], v)
	}
	if _, err := conn.Write(call[:]); err != nil {
		return "", netError(ctx, err)
	}
	msg, err := readRecord(conn)
	if err != nil {
		return "", netError(ctx, err)
	}
	return parseReply(msg, xid)
}

// readRecord reads one record (fragments up to the last, none empty
// before it) of at most maxReply bytes.
func readRecord(r io.Reader) ([]byte, error) {
	var msg []byte
	for {
		var h [4]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return nil, err
		}
		v := binary.BigEndian.Uint32(h[:])
		n := int(v & 0x7fffffff)
		if n == 0 && v&0x80000000 == 0 {
			// Legal in RFC 5531 but never sent by kadmind: endless ones
			// would keep the probe reading for nothing. With it, a record
			// is at most maxReply fragments.
			return nil, malformed("empty fragment before the last")
		}
		if len(msg)+n > maxReply {
			return nil, malformed("record of more than %d bytes", maxReply)
		}
		frag := make([]byte, n)
		if _, err := io.ReadFull(r, frag); err != nil {
			return nil, err
		}
		msg = append(msg, frag...)
		if v&0x80000000 != 0 {
			return msg, nil
		}
	}
}

// parseReply checks a reply message to the call xid.
func parseReply(b []byte, xid uint32) (string, error) {
	word := func() (uint32, bool) {
		if len(b) < 4 {
			return 0, false
		}
		v := binary.BigEndian.Uint32(b)
		b = b[4:]
		return v, true
	}
	short := malformed("reply truncated")
	x, ok := word()
	if !ok {
		return "", short
	}
	if x != xid {
		return "", malformed("reply to xid %#x, the call was %#x", x, xid)
	}
	if t, ok := word(); !ok || t != msgReply {
		return "", malformed("not an RPC reply")
	}
	stat, ok := word()
	if !ok {
		return "", short
	}
	switch stat {
	case msgAccepted:
		if _, ok := word(); !ok { // verifier flavor
			return "", short
		}
		n, ok := word()
		if !ok || n > 400 || uint32(len(b)) < (n+3)&^3 {
			return "", short
		}
		b = b[(n+3)&^3:]
		as, ok := word()
		if !ok {
			return "", short
		}
		if as == acceptSuccess {
			return "accepted", nil
		}
		if name, ok := acceptNames[as]; ok {
			return "", &krb5.Error{Class: name, Phase: Phase, Err: errors.New("kadmind's program did not accept the call")}
		}
		return "", malformed("accept_stat %d", as)
	case msgDenied:
		rs, ok := word()
		if !ok {
			return "", short
		}
		switch rs {
		case rejectRPCMis:
			return "", &krb5.Error{Class: ClassRPCMismatch, Phase: Phase, Err: errors.New("the server does not speak RPC version 2")}
		case rejectAuthErr:
			st, ok := word()
			if !ok {
				return "", short
			}
			if name, ok := authStatNames[st]; ok {
				return name, nil
			}
			return "", malformed("auth_stat %d", st)
		}
		return "", malformed("reject_stat %d", rs)
	}
	return "", malformed("reply_stat %d", stat)
}

func malformed(format string, args ...any) *krb5.Error {
	return &krb5.Error{Class: krb5.ClassMalformedReply, Phase: Phase, Err: fmt.Errorf(format, args...)}
}

// netError classifies a socket failure; ctx's own state wins.
func netError(ctx context.Context, err error) error {
	var pe *krb5.Error
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(ctx.Err(), context.Canceled):
		return &krb5.Error{Class: krb5.ClassCanceled, Phase: Phase, Err: ctx.Err()}
	case ctx.Err() != nil:
		return &krb5.Error{Class: krb5.ClassTimeout, Phase: Phase, Err: ctx.Err()}
	case errors.Is(err, io.ErrUnexpectedEOF):
		// Part of a reply, then nothing: garbage. A close before any byte
		// (io.EOF) is the network class, as a reset is.
		return &krb5.Error{Class: krb5.ClassMalformedReply, Phase: Phase, Err: fmt.Errorf("connection closed inside the reply: %w", err)}
	}
	return &krb5.Error{Class: krb5.Classify(err), Phase: Phase, Err: err}
}
