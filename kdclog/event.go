// Package kdclog turns MIT krb5kdc and kadmind log lines (FILE: targets,
// syslog RFC 3164 and RFC 5424, journald's short formats; MIT 1.8-1.21)
// into Prometheus counters: requests by type and status, issued and weak
// encryption types, preauth failures, retransmits, daemon lifecycle and
// kadmind operations. The parser is a byte scanner that allocates nothing;
// label values come from fixed tables or a small bounded set, never from a
// principal, service or address, but for the attack signals' k worst
// offenders (kdclog/attack: escaped, cut, k per signal).
package kdclog

// Kind says what a line is.
type Kind uint8

// Line kinds.
const (
	KindUnknown           Kind = iota // not understood: see Event.Reason
	KindRequest                       // AS_REQ/TGS_REQ with a status
	KindPreauthFailure                // preauth (method) verify failure: msg
	KindRetransmit                    // DISPATCH: repeated (retransmitted?) request
	KindTooManyConns                  // too many connections (TCP/RPC limit reached)
	KindS4U                           // ... PROTOCOL-TRANSITION / CONSTRAINED-DELEGATION
	KindLifecycle                     // start, stop, workers
	KindKadmin                        // kadmind Request:/Unauthorized request:/chpw/setpw
	KindKadminAuthFailure             // kadmind Authentication attempt failed
	KindInfo                          // understood, nothing to count
)

// Program is the daemon that wrote a line.
type Program uint8

// Programs.
const (
	ProgramOther Program = iota
	ProgramKDC
	ProgramKadmind
	ProgramAdminTool // kadmin.local, kdb5_util: they log to kadmind's target
)

// Reason says why a line was not understood.
type Reason uint8

// Reasons a line is not understood; label values in reasonNames.
const (
	ReasonNone           Reason = iota
	ReasonNoHeader              // no FILE:/syslog prefix with a program tag
	ReasonOtherProgram          // a tag of another program (or of the other daemon)
	ReasonUnknownMessage        // a krb5kdc/kadmind message this parser does not know
	ReasonMalformed             // a known message that does not have its usual shape
	ReasonTooLong               // longer than the tailer's line limit (set by the caller)
	numReasons
)

var reasonNames = [numReasons]string{"", "no_header", "other_program", "unknown_message", "malformed", "too_long"}

// Request is the KDC request type.
type Request uint8

// Request types.
const (
	RequestAS Request = iota
	RequestTGS
	numRequests
)

var requestNames = [numRequests]string{"as", "tgs"}

// Retransmit is what the KDC did with a repeated request.
type Retransmit uint8

// Retransmit actions.
const (
	RetransmitResent  Retransmit = iota // "resending previous response"
	RetransmitDropped                   // "during request processing, dropping repeated request" (1.13+)
	numRetransmits
)

var retransmitNames = [numRetransmits]string{"resent", "dropped"}

// S4U is the kind of an S4U annotation line.
type S4U uint8

// S4U kinds.
const (
	S4UProtocolTransition S4U = iota
	S4UConstrainedDelegation
	numS4U
)

var s4uNames = [numS4U]string{"protocol_transition", "constrained_delegation"}

// Lifecycle is a daemon start/stop event.
type Lifecycle uint8

// Lifecycle events; label values in lifecycleNames.
const (
	LifecycleStarted           Lifecycle = iota // krb5kdc "commencing operation", kadmind "starting"
	LifecycleStopping                           // krb5kdc "shutting down", kadmind "finished, exiting"
	LifecycleWorkersCreated                     // "creating N worker processes"
	LifecycleWorkerExited                       // "worker N exited with status N"
	LifecycleSupervisorSignal                   // "signal N received in supervisor"
	LifecyclePreauthInitFailed                  // "preauth X failed to initialize: ..."
	numLifecycle
)

var lifecycleNames = [numLifecycle]string{
	"started", "stopping", "workers_created", "worker_exited", "supervisor_signal", "preauth_init_failed",
}

// Event is what one line says. Byte slices point into the line: they are
// valid only until the caller reuses the line's buffer.
type Event struct {
	Kind    Kind
	Program Program
	Reason  Reason // for KindUnknown

	// KindRequest.
	Request     Request
	Status      []byte // as logged ("CLIENT LOCKED OUT"), see StatusLabel
	MorePreauth bool   // PREAUTH_FAILED that was KDC_ERR_MORE_PREAUTH_DATA_REQUIRED
	Offered     int    // number of etypes the client offered
	OfferedWeak int    // how many of them are weak
	Rep         Etype  // reply, ticket and session key etypes: ISSUE lines only
	Tkt         Etype
	Ses         Etype
	Client      []byte // client principal as logged (to tell probe traffic apart)
	Addr        []byte
	AfterClient []byte // the rest after Client: " for SERVER[, TEXT]" (attack signals)

	// KindPreauthFailure.
	Method        []byte
	PreauthReason PreauthReason

	Retransmit Retransmit
	S4U        S4U
	Lifecycle  Lifecycle
	Workers    int // LifecycleWorkersCreated

	// KindKadmin.
	Op     []byte // kadm5_create_principal, chpw, setpw
	Result KadminResult

	PID int // process id in the tag, 0 if absent

	issue bool // Status is ISSUE (the parser compares it anyway)
}

// reset clears e for the next line without allocating.
func (e *Event) reset() { *e = Event{} }

// IssuedWeak reports whether an ISSUE line used a weak type for the reply,
// the ticket or the session key.
func (e *Event) IssuedWeak() bool {
	return e.Rep.IsWeak() || e.Tkt.IsWeak() || e.Ses.IsWeak()
}
