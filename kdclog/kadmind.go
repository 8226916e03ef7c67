package kdclog

import "bytes"

// KadminResult is the outcome of a kadmind operation, from the error text
// MIT logs (kadm5 error table); a fixed set, so no message becomes a label.
type KadminResult uint8

// kadmind results; label values in kadminResultNames.
const (
	KadminSuccess KadminResult = iota
	KadminError                // any other error text
	KadminUnauthorized
	KadminPrincipalNotFound
	KadminPolicyNotFound
	KadminAlreadyExists
	KadminPasswordQuality
	KadminPasswordMinLife
	KadminProtectedPrincipal
	KadminPolicyInUse
	KadminKeysLocked
	KadminInitialTicketRequired
	numKadminResults
)

var kadminResultNames = [numKadminResults]string{
	"success", "error", "unauthorized", "principal_not_found", "policy_not_found", "already_exists",
	"password_quality", "password_min_life", "protected_principal", "policy_in_use", "keys_locked",
	"initial_ticket_required",
}

func classifyKadmin(msg []byte) KadminResult {
	switch string(msg) {
	case "success":
		return KadminSuccess
	case "Principal does not exist":
		return KadminPrincipalNotFound
	case "Policy does not exist":
		return KadminPolicyNotFound
	case "Principal or policy already exists":
		return KadminAlreadyExists
	case "Password is too short", "Password does not contain enough character classes",
		"Password is in the password dictionary", "Cannot reuse password",
		"Unspecified password quality failure":
		return KadminPasswordQuality
	case "Current password's minimum life has not expired":
		return KadminPasswordMinLife
	case "Cannot change protected principal":
		return KadminProtectedPrincipal
	case "Policy is in use":
		return KadminPolicyInUse
	case "Principal keys are locked down":
		return KadminKeysLocked
	case "Operation requires initial ticket":
		return KadminInitialTicketRequired
	case "Insufficient authorization for operation":
		return KadminUnauthorized
	}
	if bytes.HasPrefix(msg, []byte("Operation requires ``")) && bytes.HasSuffix(msg, []byte("'' privilege")) {
		return KadminUnauthorized
	}
	return KadminError
}

// knownKadminOps are the RPC names kadmind logs (server_stubs.c), plus the
// kpasswd service's chpw/setpw.
var knownKadminOps = []string{
	"kadm5_init",
	"kadm5_create_principal", "kadm5_delete_principal", "kadm5_modify_principal",
	"kadm5_rename_principal", "kadm5_get_principal", "kadm5_get_principals",
	"kadm5_chpass_principal", "kadm5_setkey_principal", "kadm5_randkey_principal",
	"kadm5_setv4key_principal", "kadm5_purgekeys", "kadm5_get_principal_keys",
	"kadm5_get_strings", "kadm5_set_string",
	"kadm5_create_policy", "kadm5_delete_policy", "kadm5_modify_policy",
	"kadm5_get_policy", "kadm5_get_policies", "kadm5_get_privs",
	"kadm5_create_alias",
	"chpw", "setpw",
}

const maxDynamicOps = 8

var (
	prefixRequest      = []byte("Request: ")
	prefixUnauthorized = []byte("Unauthorized request: ")
	sepClient          = []byte(", client=")
	sepComma           = []byte(", ")
)

// parseKadmind reads the message part of a kadmind line into e.
func parseKadmind(m []byte, e *Event) Reason {
	switch {
	case bytes.HasPrefix(m, prefixRequest):
		// "Request: OP, TARGET, RESULT, client=..., service=..., addr=..."
		m = m[len(prefixRequest):]
		i := bytes.Index(m, sepComma)
		c := bytes.Index(m, sepClient)
		if i <= 0 || c < i || !validLabel(m[:i], identChar) {
			return ReasonMalformed
		}
		e.Op = m[:i]
		// The result is the last ", "-separated field before ", client=":
		// a target may contain ", " (never seen) but an error text rarely does.
		body := m[:c]
		r := bytes.LastIndex(body, sepComma)
		if r < i {
			return ReasonMalformed
		}
		e.Kind = KindKadmin
		e.Result = classifyKadmin(body[r+2:])
		return ReasonNone
	case bytes.HasPrefix(m, prefixUnauthorized):
		m = m[len(prefixUnauthorized):]
		i := bytes.Index(m, sepComma)
		if i <= 0 || !validLabel(m[:i], identChar) {
			return ReasonMalformed
		}
		e.Kind, e.Op, e.Result = KindKadmin, m[:i], KadminUnauthorized
		return ReasonNone
	case bytes.HasPrefix(m, []byte("chpw request from ")), bytes.HasPrefix(m, []byte("setpw request from ")):
		// "chpw request from ADDR for PRINC: RESULT"
		i := bytes.LastIndex(m, sepColon)
		if i < 0 {
			return ReasonMalformed
		}
		e.Kind, e.Op, e.Result = KindKadmin, m[:bytes.IndexByte(m, ' ')], classifyKadmin(m[i+2:])
		return ReasonNone
	case bytes.HasPrefix(m, []byte("Authentication attempt failed: ")),
		bytes.HasPrefix(m, []byte("authentication attempt failed: ")):
		e.Kind = KindKadminAuthFailure
		return ReasonNone
	}
	switch string(m) {
	case "starting":
		e.Kind, e.Lifecycle = KindLifecycle, LifecycleStarted
		return ReasonNone
	case "finished, exiting":
		e.Kind, e.Lifecycle = KindLifecycle, LifecycleStopping
		return ReasonNone
	case "No dictionary file specified, continuing without one.", "setting up network...",
		"Got signal to reset", "Got signal to request exit", "too many connections":
		e.Kind = KindInfo
		return ReasonNone
	}
	switch {
	case isNetInfo(m), bytes.HasPrefix(m, []byte("kadmind: starting")):
		e.Kind = KindInfo
		return ReasonNone
	}
	return ReasonUnknownMessage
}
