package krb5

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/jcmturner/gokrb5/v8/iana/errorcode"

	"github.com/krb5-exporter/krb5-exporter/internal/record"
)

// Error classes: the bounded set of `result` label values besides the KDC
// error names (KDC_ERR_PREAUTH_FAILED, KRB_AP_ERR_SKEW, ...).
const (
	ClassSuccess           = record.ClassSuccess  // the class in bench records too
	ClassTimeout           = "timeout"            // no reply before the deadline
	ClassConnectionRefused = "connection_refused" // nothing listens (TCP RST or ICMP port unreachable)
	ClassNetwork           = "network"            // any other socket or name resolution failure
	ClassDecrypt           = "decrypt"            // the reply did not decrypt: the client's key is wrong
	ClassMalformedReply    = "malformed_reply"    // the reply did not parse or does not answer the request
	ClassKeytab            = "keytab"             // no usable key: keytab or password file unreadable, no key for the etype
	ClassCanceled          = "canceled"           // the caller gave up (shutdown, reload); never recorded as a probe result
	classKDCUnknown        = "KRB_ERR_UNKNOWN"    // a KDC error code without a registered name
)

// Error is a failed exchange. Every error the engine returns is an *Error.
type Error struct {
	Class string // one of the Class constants or a KDC error name
	Code  int32  // the KDC error code when the KDC answered with KRB-ERROR
	Phase string // the round trip that failed: "preauth_required", "as_rep" or "tgs_rep"
	Text  string // the KDC's e-text, if any
	Err   error  // the underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Phase)
	if e.Err == nil || !strings.HasPrefix(e.Err.Error(), e.Class+":") {
		b.WriteString(": ")
		b.WriteString(e.Class)
	}
	if e.Text != "" {
		b.WriteString(": ")
		b.WriteString(e.Text)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Classify returns the class of err: ClassSuccess for nil, the Class of an
// *Error, otherwise a class derived from the error chain.
func Classify(err error) string {
	if err == nil {
		return ClassSuccess
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Class
	}
	return classifyNetwork(err)
}

// classifyNetwork maps transport failures onto the bounded classes.
func classifyNetwork(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ClassTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassConnectionRefused
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ClassTimeout
	}
	return ClassNetwork
}

// kdcError builds the error for a KRB-ERROR reply.
func kdcError(phase string, code int32, text string) *Error {
	return &Error{Class: KDCErrorName(code), Code: code, Phase: phase, Text: text}
}

// KDCErrorName returns the RFC 4120 name of a KDC error code, for example
// KDC_ERR_PREAUTH_FAILED, or KRB_ERR_UNKNOWN for an unregistered code, so the
// set of label values stays bounded.
func KDCErrorName(code int32) string {
	if n, ok := kdcErrorNames[code]; ok {
		return n
	}
	return classKDCUnknown
}

// kdcErrorNames is taken from gokrb5's registry plus the codes it lacks.
var kdcErrorNames = func() map[int32]string {
	m := map[int32]string{
		90:  "KDC_ERR_PREAUTH_EXPIRED",
		91:  "KDC_ERR_MORE_PREAUTH_DATA_REQUIRED",
		92:  "KDC_ERR_PREAUTH_BAD_AUTHENTICATION_SET",
		93:  "KDC_ERR_UNKNOWN_CRITICAL_FAST_OPTIONS",
		100: "KDC_ERR_NO_ACCEPTABLE_KDF",
	}
	for code := int32(0); code < 90; code++ {
		s := errorcode.Lookup(code) // "(24) KDC_ERR_PREAUTH_FAILED Pre-authentication ..."
		if strings.HasPrefix(s, "Unknown") {
			continue
		}
		f := strings.Fields(s)
		if len(f) >= 2 {
			m[code] = f[1]
		}
	}
	return m
}()

func errorf(class, phase string, format string, args ...any) *Error {
	return &Error{Class: class, Phase: phase, Err: fmt.Errorf(format, args...)}
}

func wrapError(class, phase string, err error) *Error {
	return &Error{Class: class, Phase: phase, Err: err}
}
