package kdclog

// StatusMorePreauth is the status label of an AS_REQ that MIT logs as
// PREAUTH_FAILED with "More preauthentication data is required": the
// KDC's answer was KDC_ERR_MORE_PREAUTH_DATA_REQUIRED, a normal step of
// every SPAKE login, not a failed login. Counting it apart keeps
// status="PREAUTH_FAILED" an error signal.
const StatusMorePreauth = "MORE_PREAUTH_DATA_REQUIRED"

// knownStatuses are the status strings of MIT krb5 1.8-1.21 (kdc_util.c,
// do_as_req.c, do_tgs_req.c, tgs_policy.c, kdc_preauth.c; checked against
// `strings /usr/sbin/krb5kdc` of 1.20). They are label values as they are.
// Any other status takes one of maxDynamicStatuses slots, then "other".
var knownStatuses = []string{
	"ISSUE",
	"NEEDED_PREAUTH",
	StatusMorePreauth,
	"PREAUTH_FAILED",
	"CLIENT_NOT_FOUND",
	"LOOKING_UP_SERVER",
	"LOOKING_UP_CLIENT",
	"SERVER_NOT_FOUND",
	"UNKNOWN_SERVER",
	"BAD_ENCRYPTION_TYPE",
	"TKT_EXPIRED",
	"PROCESS_TGS",
	"CLIENT EXPIRED",
	"CLIENT KEY EXPIRED",
	"CLIENT LOCKED OUT", // allow_tix cleared (modprinc -allow_tix)
	"LOCKED_OUT",        // lockout policy: pw_max_fail reached (the kdb module's status)
	"REQUIRED PWCHANGE",
	"SERVICE EXPIRED",
	"SERVICE LOCKED OUT",
	"SERVICE NOT ALLOWED",
	"SERVER LOCKED OUT",
	"SERVER NOT ALLOWED",
	"POSTDATE NOT ALLOWED",
	"INVALID AS OPTIONS",
	"ANONYMOUS NOT ALLOWED",
	"NO PREAUTH",
	"NO HW PREAUTH",
	"NEEDED_HW_PREAUTH",
	"HIGHER_AUTHENTICATION_REQUIRED",
	"TGT BASED NOT ALLOWED",
	"TGT NOT FORWARDABLE",
	"TGT NOT POSTDATABLE",
	"TGT NOT PROXIABLE",
	"TICKET NOT RENEWABLE",
	"TICKET NOT VALID",
	"VALIDATE VALID TICKET",
	"DUP_SKEY DISALLOWED",
	"BAD TGS SERVER INSTANCE",
	"BAD TGS SERVER NAME",
	"INVALID LINEAGE",
	"INVALID S4U2SELF OPTIONS",
	"NOT_YET_VALID",
	"UNKNOWN_REASON",
	"HANDLE_AUTHDATA",
	"GET_AUTH_INDICATORS",
	"GET_LOCAL_TGT",
	"FIND_FAST",
	"READ_COOKIE",
	"KDC_RETURN_PADATA",
	"KDC_RETURN_ENC_PADATA",
	"DECRYPT_CLIENT_KEY",
	"CANT_FIND_CLIENT_KEY",
	"FINDING_SERVER_KEY",
	"HOT_LIST",
	"ADD_TO_TRANSITED_LIST",
	"BAD_TRANSIT",
	"BAD_ETYPE_IN_2ND_TKT",
	"NO_2ND_TKT",
	"NULL_CLIENT",
	"NULL_SERVER",
	"REFERRAL",
	"NOT_CROSS_REALM_REQUEST",
	"NOT_ALLOWED_TO_DELEGATE",
	"EVIDENCE_TICKET_MISMATCH",
	"EVIDENCE_TKT_NOT_FORWARDABLE",
	"XREALM_EVIDENCE_TICKET_MISMATCH",
	"DECODE_PA_FOR_USER",
	"DECODE_PA_S4U_X509_USER",
	"INVALID_S4U2PROXY_OPTIONS",
	"INVALID_S4U2SELF_CHECKSUM",
	"INVALID_S4U2SELF_REQUEST",
	"INVALID_S4U2SELF_REQUEST_SERVER_MISMATCH",
	"INVALID_XREALM_S4U2SELF_REQUEST",
	"LOOKING_UP_S4U2SELF_PRINCIPAL",
	"UNKNOWN_S4U2SELF_PRINCIPAL",
	"UNSUPPORTED_S4U2PROXY_REQUEST",
	"RBCD_PAC_PRINC",
	"S4U2PROXY_CROSS_STKT_PAC",
	"S4U2PROXY_HEADER_PAC",
	"S4U2PROXY_LOCAL_STKT_PAC",
	"S4U2PROXY_NO_HEADER_PAC",
	"S4U2PROXY_NO_STKT_PAC",
	"S4U2SELF_CLIENT_NOT_OURS",
	"S4U2SELF_FOREIGN_PAC_CLIENT",
	"S4U2SELF_LOCAL_PAC_CLIENT",
	"S4U2SELF_NO_PAC",
	"VALIDATE_ANONYMOUS_PRINCIPAL",
	"VALIDATE_MESSAGE_TYPE",
	"VALIDATE_TRANSIT_TYPE",
	// Before 1.12.
	"UNPARSING CLIENT",
	"UNPARSING SERVER",
	"NON_UNIQUE_PRINCIPAL",
	"TIME_OF_DAY",
	"2ND_TKT_SERVER",
	"2ND_TKT_DECRYPT",
	"SERVER_NOMATCH",
	"MAKE_RANDOM_KEY",
	"ENCRYPT_TICKET",
	"ENCODE_KDC_REP",
	"GET_SESSION_KEY",
	"DECRYPT_SERVER_KEY",
}

// Indexes of the statuses counted most, matched without a map lookup.
const (
	idxIssue          = 0
	idxNeededPreauth  = 1
	idxMorePreauth    = 2
	idxPreauthFailed  = 3
	idxClientNotFound = 4
	idxLookingUpSrv   = 5
)

// maxDynamicStatuses bounds the statuses not in knownStatuses that get a
// series of their own (kdcpolicy plugins, releases after 1.21).
const maxDynamicStatuses = 16

// coreStatuses are exported at zero from the start for a KDC log, so that
// rate() and absent-series alerts work before the first such line.
var coreStatuses = [...]struct {
	req    Request
	status string
}{
	{RequestAS, "ISSUE"},
	{RequestAS, "NEEDED_PREAUTH"},
	{RequestAS, "PREAUTH_FAILED"},
	{RequestAS, "CLIENT_NOT_FOUND"},
	{RequestTGS, "ISSUE"},
	{RequestTGS, "LOOKING_UP_SERVER"},
}

// knownPreauthMethods are MIT's kdcpreauth module names ("timestamp" before 1.11).
var knownPreauthMethods = []string{
	"encrypted_timestamp", "spake", "encrypted_challenge", "pkinit", "otp", "timestamp",
}

const maxDynamicMethods = 8

// PreauthReason classifies the error text of a preauth verify failure.
type PreauthReason uint8

// The preauth failure reasons; the message texts are krb5's error table.
const (
	PreauthOther     PreauthReason = iota // any other text
	PreauthFailed                         // "Preauthentication failed": wrong key, or a SPAKE group the KDC lacks
	PreauthMoreData                       // "More preauthentication data is required": a SPAKE round trip
	PreauthClockSkew                      // "Clock skew too great"
	PreauthIntegrity                      // "Decrypt integrity check failed": wrong key, releases before 1.11
	PreauthBadEtype                       // "KDC has no support for encryption type"
	numPreauthReasons
)

var preauthReasonNames = [numPreauthReasons]string{
	"other", "preauth_failed", "more_data_required", "clock_skew", "integrity_check_failed", "bad_etype",
}

func classifyPreauth(msg []byte) PreauthReason {
	switch string(msg) {
	case "Preauthentication failed":
		return PreauthFailed
	case "More preauthentication data is required":
		return PreauthMoreData
	case "Clock skew too great":
		return PreauthClockSkew
	case "Decrypt integrity check failed":
		return PreauthIntegrity
	case "KDC has no support for encryption type":
		return PreauthBadEtype
	}
	return PreauthOther
}
