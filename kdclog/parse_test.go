package kdclog

import (
	"strings"
	"testing"
)

// Lines from MIT krb5 1.20 (field notes and the harness realm) and the
// pre-1.18 numeric etype format (kdc_util.c of 1.8-1.17).
const (
	etypes4   = "4 etypes {aes256-cts-hmac-sha384-192(20), aes128-cts-hmac-sha256-128(19), aes256-cts-hmac-sha1-96(18), aes128-cts-hmac-sha1-96(17)}"
	fileHdr   = "Nov 30 06:15:23 vm krb5kdc[7559](info): "
	issueReps = "etypes {rep=aes256-cts-hmac-sha384-192(20), tkt=aes256-cts-hmac-sha384-192(20), ses=aes256-cts-hmac-sha384-192(20)}"
)

type want struct {
	ok         bool
	kind       Kind
	reason     Reason
	prog       Program
	pid        int
	req        Request
	status     string
	more       bool
	offered    int
	weak       int
	rep        Etype
	tkt        Etype
	ses        Etype
	client     string
	addr       string
	method     string
	preauth    PreauthReason
	retrans    Retransmit
	life       Lifecycle
	workers    int
	op         string
	result     KadminResult
	s4u        S4U
	issuedWeak bool
}

var parseCases = []struct {
	name string
	line string
	want want
}{
	{"as needed preauth", fileHdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: NEEDED_PREAUTH: user1@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, Additional pre-authentication required",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "NEEDED_PREAUTH", offered: 4, client: "user1@PERF.TEST", addr: "127.0.0.1"}},
	{"as issue", fileHdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: ISSUE: authtime 1795986400, " + issueReps + ", user1@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "ISSUE", offered: 4, rep: 20, tkt: 20, ses: 20, client: "user1@PERF.TEST", addr: "127.0.0.1"}},
	{"tgs issue", fileHdr + "TGS_REQ (" + etypes4 + ") 127.0.0.1: ISSUE: authtime 1795986400, " + issueReps + ", user1@PERF.TEST for HTTP/web0001.perf.test@PERF.TEST",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestTGS, status: "ISSUE", offered: 4, rep: 20, tkt: 20, ses: 20, client: "user1@PERF.TEST", addr: "127.0.0.1"}},
	{"client not found", fileHdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: CLIENT_NOT_FOUND: nosuchuser@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, Client not found in Kerberos database",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "CLIENT_NOT_FOUND", offered: 4, client: "nosuchuser@PERF.TEST", addr: "127.0.0.1"}},
	{"preauth failed", fileHdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: PREAUTH_FAILED: pwuser@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, Preauthentication failed",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "PREAUTH_FAILED", offered: 4, client: "pwuser@PERF.TEST", addr: "127.0.0.1"}},
	{"spake round trip", fileHdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: PREAUTH_FAILED: user1@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, More preauthentication data is required",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "PREAUTH_FAILED", more: true, offered: 4, client: "user1@PERF.TEST", addr: "127.0.0.1"}},
	{"unknown server", fileHdr + "TGS_REQ (" + etypes4 + ") 127.0.0.1: LOOKING_UP_SERVER: authtime 0, etypes {rep=UNSUPPORTED:(0)} user1@PERF.TEST for HTTP/nosuch.perf.test@PERF.TEST, Server not found in Kerberos database",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestTGS, status: "LOOKING_UP_SERVER", offered: 4, client: "user1@PERF.TEST", addr: "127.0.0.1"}},
	{"locked out", fileHdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: CLIENT LOCKED OUT: user6@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, Client's credentials have been revoked",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "CLIENT LOCKED OUT", offered: 4, client: "user6@PERF.TEST", addr: "127.0.0.1"}},
	{"rc4 only", fileHdr + "AS_REQ (1 etypes {DEPRECATED:arcfour-hmac(23)}) 127.0.0.1: BAD_ENCRYPTION_TYPE: user1@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, KDC has no support for encryption type",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "BAD_ENCRYPTION_TYPE", offered: 1, weak: 1, client: "user1@PERF.TEST", addr: "127.0.0.1"}},
	{"rc4 issued", fileHdr + "AS_REQ (8 etypes {aes256-cts-hmac-sha1-96(18), aes128-cts-hmac-sha1-96(17), aes256-cts-hmac-sha384-192(20), aes128-cts-hmac-sha256-128(19), DEPRECATED:des3-cbc-sha1(16), DEPRECATED:arcfour-hmac(23), camellia128-cts-cmac(25), camellia256-cts-cmac(26)}) 127.0.0.1: ISSUE: authtime 1796019323, etypes {rep=DEPRECATED:arcfour-hmac(23), tkt=aes256-cts-hmac-sha384-192(20), ses=aes256-cts-hmac-sha1-96(18)}, rc4user@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "ISSUE", offered: 8, weak: 2, rep: 23, tkt: 20, ses: 18, issuedWeak: true, client: "rc4user@PERF.TEST", addr: "127.0.0.1"}},
	{"required pwchange", fileHdr + "AS_REQ (" + etypes4 + ") 127.0.0.1: REQUIRED PWCHANGE: needchg@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, Password has expired",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "REQUIRED PWCHANGE", offered: 4, client: "needchg@PERF.TEST", addr: "127.0.0.1"}},
	{"ipv6 address", fileHdr + "AS_REQ (" + etypes4 + ") fe80::1: CLIENT EXPIRED: old@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, Client's entry in database has expired",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestAS, status: "CLIENT EXPIRED", offered: 4, client: "old@PERF.TEST", addr: "fe80::1"}},
	{"server nomatch form", fileHdr + "TGS_REQ 10.1.2.3: SERVER_NOMATCH: authtime 0, user1@R for HTTP/a@R, 2nd tkt client user2@R",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 7559, req: RequestTGS, status: "SERVER_NOMATCH", client: "user1@R", addr: "10.1.2.3"}},

	// Before 1.18: numeric etypes; a failed TGS has an empty rep list.
	{"numeric issue", "Nov  9 08:01:02 kdc1 krb5kdc[812](info): AS_REQ (4 etypes {18 17 16 23}) 10.0.0.5: ISSUE: authtime 1700000000, etypes {rep=18 tkt=18 ses=23}, alice@EXAMPLE.COM for krbtgt/EXAMPLE.COM@EXAMPLE.COM",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 812, req: RequestAS, status: "ISSUE", offered: 4, weak: 2, rep: 18, tkt: 18, ses: 23, issuedWeak: true, client: "alice@EXAMPLE.COM", addr: "10.0.0.5"}},
	{"numeric tgs failure", "Nov 09 08:01:02 kdc1 krb5kdc[812](info): TGS_REQ (7 etypes {18 17 16 23 1 3 2}) 10.0.0.5: UNKNOWN_SERVER: authtime 0,  alice@EXAMPLE.COM for host/x@EXAMPLE.COM, Server not found in Kerberos database",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 812, req: RequestTGS, status: "UNKNOWN_SERVER", offered: 7, weak: 5, client: "alice@EXAMPLE.COM", addr: "10.0.0.5"}},
	{"numeric tgs issue", "Nov 09 08:01:02 kdc1 krb5kdc[812](info): TGS_REQ (4 etypes {18 17 16 23}) 10.0.0.5: ISSUE: authtime 1700000000, etypes {rep=18 tkt=18 ses=18}, alice@EXAMPLE.COM for host/x@EXAMPLE.COM",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 812, req: RequestTGS, status: "ISSUE", offered: 4, weak: 2, rep: 18, tkt: 18, ses: 18, client: "alice@EXAMPLE.COM", addr: "10.0.0.5"}},
	{"numeric truncated list", "Nov 09 08:01:02 kdc1 krb5kdc[812](info): AS_REQ (40 etypes {18 17 16 23 1 3 2 18 17 16 23 1 3 2 18 17 16 23 1 3 2 18 17 16 23 1 3 2 18 17 16 23 1 3 2 18...}) 10.0.0.5: NEEDED_PREAUTH: bob@EXAMPLE.COM for krbtgt/EXAMPLE.COM@EXAMPLE.COM, Additional pre-authentication required",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 812, req: RequestAS, status: "NEEDED_PREAUTH", offered: 40, weak: 25, client: "bob@EXAMPLE.COM", addr: "10.0.0.5"}},
	{"old lower-case status", "Nov 09 08:01:02 kdc1 krb5kdc[812](info): TGS_REQ (4 etypes {18 17 16 23}) 10.0.0.5: making state: authtime 0,  <unknown client> for <unknown server>, Cannot allocate memory",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 812, req: RequestTGS, status: "making state", offered: 4, weak: 2, client: "<unknown client>", addr: "10.0.0.5"}},

	// Syslog forms.
	{"rfc3164 file", "Nov 29 21:00:00 kdc1 krb5kdc[1234]: AS_REQ (" + etypes4 + ") 10.0.0.1: CLIENT_NOT_FOUND: x@R for krbtgt/R@R, Client not found in Kerberos database",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 1234, req: RequestAS, status: "CLIENT_NOT_FOUND", offered: 4, client: "x@R", addr: "10.0.0.1"}},
	{"rfc3164 pri", "<38>Nov  2 21:00:00 kdc1 krb5kdc[1234]: AS_REQ (" + etypes4 + ") 10.0.0.1: CLIENT_NOT_FOUND: x@R for krbtgt/R@R, Client not found in Kerberos database",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 1234, req: RequestAS, status: "CLIENT_NOT_FOUND", offered: 4, client: "x@R", addr: "10.0.0.1"}},
	{"journal short-precise", "Nov 29 21:00:00.123456 kdc1 krb5kdc[1234]: shutting down",
		want{ok: true, kind: KindLifecycle, prog: ProgramKDC, pid: 1234, life: LifecycleStopping}},
	{"rfc3339 rsyslog", "2024-11-29T21:00:00.123456+01:00 kdc1 krb5kdc[1234]: TGS_REQ (" + etypes4 + ") 10.0.0.1: ISSUE: authtime 1, " + issueReps + ", a@R for b@R",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 1234, req: RequestTGS, status: "ISSUE", offered: 4, rep: 20, tkt: 20, ses: 20, client: "a@R", addr: "10.0.0.1"}},
	{"rfc5424", "<38>1 2024-11-29T21:00:00.003Z kdc1 krb5kdc 1234 - - TGS_REQ (" + etypes4 + ") 10.0.0.1: ISSUE: authtime 1, " + issueReps + ", a@R for b@R",
		want{ok: true, kind: KindRequest, prog: ProgramKDC, pid: 1234, req: RequestTGS, status: "ISSUE", offered: 4, rep: 20, tkt: 20, ses: 20, client: "a@R", addr: "10.0.0.1"}},
	{"rfc5424 sd and bom", "<38>1 2024-11-29T21:00:00Z kdc1 krb5kdc - - [meta x=\"a\\]b\"][o y=\"1\"] \xef\xbb\xbfcommencing operation",
		want{ok: true, kind: KindLifecycle, prog: ProgramKDC, life: LifecycleStarted}},
	{"syslog no pid", "Nov 29 21:00:00 kdc1 krb5kdc: commencing operation",
		want{ok: true, kind: KindLifecycle, prog: ProgramKDC, life: LifecycleStarted}},
	{"path as tag", "Nov 29 21:00:00 kdc1 /usr/sbin/krb5kdc[9]: shutting down",
		want{ok: true, kind: KindLifecycle, prog: ProgramKDC, pid: 9, life: LifecycleStopping}},
	{"crlf", fileHdr + "shutting down\r", want{ok: true, kind: KindLifecycle, prog: ProgramKDC, pid: 7559, life: LifecycleStopping}},

	// Other KDC lines.
	{"spake verify failure", fileHdr + "preauth (spake) verify failure: Preauthentication failed",
		want{ok: true, kind: KindPreauthFailure, prog: ProgramKDC, pid: 7559, method: "spake", preauth: PreauthFailed}},
	{"spake more data", fileHdr + "preauth (spake) verify failure: More preauthentication data is required",
		want{ok: true, kind: KindPreauthFailure, prog: ProgramKDC, pid: 7559, method: "spake", preauth: PreauthMoreData}},
	{"encts failure", fileHdr + "preauth (encrypted_timestamp) verify failure: Preauthentication failed",
		want{ok: true, kind: KindPreauthFailure, prog: ProgramKDC, pid: 7559, method: "encrypted_timestamp", preauth: PreauthFailed}},
	{"dispatch resent", fileHdr + "DISPATCH: repeated (retransmitted?) request from 10.0.0.9, resending previous response",
		want{ok: true, kind: KindRetransmit, prog: ProgramKDC, pid: 7559, addr: "10.0.0.9", retrans: RetransmitResent}},
	{"dispatch dropped", fileHdr + "DISPATCH: repeated (retransmitted?) request from 10.0.0.9 during request processing, dropping repeated request",
		want{ok: true, kind: KindRetransmit, prog: ProgramKDC, pid: 7559, addr: "10.0.0.9", retrans: RetransmitDropped}},
	{"too many connections", fileHdr + "too many connections", want{ok: true, kind: KindTooManyConns, prog: ProgramKDC, pid: 7559}},
	{"workers", "Nov 30 06:15:55 vm krb5kdc[7877](info): creating 2 worker processes",
		want{ok: true, kind: KindLifecycle, prog: ProgramKDC, pid: 7877, life: LifecycleWorkersCreated, workers: 2}},
	{"worker exited", "Nov 30 06:15:56 vm krb5kdc[7877](Error): worker 7879 exited with status 9",
		want{ok: true, kind: KindLifecycle, prog: ProgramKDC, pid: 7877, life: LifecycleWorkerExited}},
	{"supervisor signal", "Nov 30 06:15:56 vm krb5kdc[7877](info): signal 15 received in supervisor",
		want{ok: true, kind: KindLifecycle, prog: ProgramKDC, pid: 7877, life: LifecycleSupervisorSignal}},
	{"spake init", fileHdr + "preauth spake failed to initialize: No SPAKE preauth groups configured",
		want{ok: true, kind: KindLifecycle, prog: ProgramKDC, pid: 7559, life: LifecyclePreauthInitFailed}},
	{"s4u", fileHdr + "... PROTOCOL-TRANSITION s4u-client=user1@PERF.TEST",
		want{ok: true, kind: KindS4U, prog: ProgramKDC, pid: 7559, s4u: S4UProtocolTransition}},
	{"closing fd", fileHdr + "closing down fd 11", want{ok: true, kind: KindInfo, prog: ProgramKDC, pid: 7559}},
	{"setting up", fileHdr + "setting up network...", want{ok: true, kind: KindInfo, prog: ProgramKDC, pid: 7559}},

	// kadmind.
	{"kadmin success", "Nov 30 06:16:02 vm kadmind[7561](Notice): Request: kadm5_create_principal, batch248@PERF.TEST, success, client=admin/admin@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1",
		want{ok: true, kind: KindKadmin, prog: ProgramKadmind, pid: 7561, op: "kadm5_create_principal", result: KadminSuccess}},
	{"kadmin exists", "Nov 30 06:16:02 vm kadmind[7561](Notice): Request: kadm5_create_principal, newp1@PERF.TEST, Principal or policy already exists, client=admin/admin@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1",
		want{ok: true, kind: KindKadmin, prog: ProgramKadmind, pid: 7561, op: "kadm5_create_principal", result: KadminAlreadyExists}},
	{"kadmin init", "Nov 30 06:16:02 vm kadmind[7561](Notice): Request: kadm5_init, admin/admin@PERF.TEST, success, client=admin/admin@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1, vers=4, flavor=6",
		want{ok: true, kind: KindKadmin, prog: ProgramKadmind, pid: 7561, op: "kadm5_init", result: KadminSuccess}},
	{"kadmin rename", "Nov 30 06:16:02 vm kadmind[7561](Notice): Request: kadm5_rename_principal, newp1@PERF.TEST to newp2@PERF.TEST, success, client=admin/admin@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1",
		want{ok: true, kind: KindKadmin, prog: ProgramKadmind, pid: 7561, op: "kadm5_rename_principal", result: KadminSuccess}},
	{"kadmin no policy", "Nov 30 06:16:02 vm kadmind[7561](Notice): Request: kadm5_get_policy, default, Policy does not exist, client=admin/admin@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1",
		want{ok: true, kind: KindKadmin, prog: ProgramKadmind, pid: 7561, op: "kadm5_get_policy", result: KadminPolicyNotFound}},
	{"kadmin unauthorized", "Nov 30 06:16:03 vm kadmind[7561](Notice): Unauthorized request: kadm5_get_principal, user2@PERF.TEST, client=user1@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1",
		want{ok: true, kind: KindKadmin, prog: ProgramKadmind, pid: 7561, op: "kadm5_get_principal", result: KadminUnauthorized}},
	{"kadmin privilege", "Nov 30 06:16:03 vm kadmind[7561](Notice): Request: kadm5_get_principal, user2@PERF.TEST, Operation requires ``get'' privilege, client=user1@PERF.TEST, service=kadmin/admin@PERF.TEST, addr=127.0.0.1",
		want{ok: true, kind: KindKadmin, prog: ProgramKadmind, pid: 7561, op: "kadm5_get_principal", result: KadminUnauthorized}},
	{"chpw", "Nov 30 06:16:03 vm kadmind[7561](Notice): chpw request from 127.0.0.1 for user1@PERF.TEST: success",
		want{ok: true, kind: KindKadmin, prog: ProgramKadmind, pid: 7561, op: "chpw", result: KadminSuccess}},
	{"chpw quality", "Nov 30 06:16:03 vm kadmind[7561](Notice): chpw request from 127.0.0.1 for user1@PERF.TEST: Password is too short",
		want{ok: true, kind: KindKadmin, prog: ProgramKadmind, pid: 7561, op: "chpw", result: KadminPasswordQuality}},
	{"kadmind starting", "Nov 30 06:15:19 vm kadmind[7561](info): starting",
		want{ok: true, kind: KindLifecycle, prog: ProgramKadmind, pid: 7561, life: LifecycleStarted}},
	{"kadmind exiting", "Nov 30 06:16:03 vm kadmind[7561](info): finished, exiting",
		want{ok: true, kind: KindLifecycle, prog: ProgramKadmind, pid: 7561, life: LifecycleStopping}},
	{"kadmin.local in admin log", "Nov 30 06:15:18 vm kadmin.local[7557](info): No dictionary file specified, continuing without one.",
		want{ok: true, kind: KindInfo, prog: ProgramAdminTool, pid: 7557}},

	// Not understood.
	{"empty", "", want{reason: ReasonNoHeader}},
	{"no header", "AS_REQ (4 etypes {18}) 1.2.3.4: ISSUE: x", want{reason: ReasonNoHeader}},
	{"other program", "Nov 29 21:00:00 host sshd[77]: Accepted publickey for root", want{reason: ReasonOtherProgram, prog: ProgramOther, pid: 77}},
	{"unknown kdc message", fileHdr + "something new in 1.22", want{reason: ReasonUnknownMessage, prog: ProgramKDC, pid: 7559}},
	{"cut as line", fileHdr + "AS_REQ (4 etypes {18 17", want{reason: ReasonMalformed, prog: ProgramKDC, pid: 7559}},
	{"as without status", fileHdr + "AS_REQ (1 etypes {18}) 1.2.3.4", want{reason: ReasonMalformed, prog: ProgramKDC, pid: 7559}},
	{"bad authtime", fileHdr + "TGS_REQ (1 etypes {18}) 1.2.3.4: ISSUE: authtime x, a for b", want{reason: ReasonMalformed, prog: ProgramKDC, pid: 7559}},
	{"bad pid", "Nov 29 21:00:00 host krb5kdc[x1](info): shutting down", want{reason: ReasonNoHeader}},
	{"bare tgs prefix", fileHdr + "TGS_REQ ", want{reason: ReasonUnknownMessage, prog: ProgramKDC, pid: 7559}},
	{"bare as prefix", fileHdr + "AS_REQ (", want{reason: ReasonUnknownMessage, prog: ProgramKDC, pid: 7559}},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			var e Event
			ok := Parse([]byte(tc.line), &e)
			w := tc.want
			got := want{
				ok: ok, kind: e.Kind, reason: e.Reason, prog: e.Program, pid: e.PID, req: e.Request,
				status: string(e.Status), more: e.MorePreauth, offered: e.Offered, weak: e.OfferedWeak,
				rep: e.Rep, tkt: e.Tkt, ses: e.Ses, client: string(e.Client), addr: string(e.Addr),
				method: string(e.Method), preauth: e.PreauthReason, retrans: e.Retransmit, life: e.Lifecycle,
				workers: e.Workers, op: string(e.Op), result: e.Result, s4u: e.S4U, issuedWeak: e.IssuedWeak(),
			}
			if !ok {
				// Not understood: only the reason and the tag matter.
				got = want{reason: e.Reason, prog: e.Program, pid: e.PID}
			}
			if got != w {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tc.line, got, w)
			}
		})
	}
}

func TestParseAllocatesNothing(t *testing.T) {
	var e Event
	for _, tc := range parseCases {
		line := []byte(tc.line)
		if n := testing.AllocsPerRun(100, func() { Parse(line, &e) }); n != 0 {
			t.Errorf("%s: %v allocations per line", tc.name, n)
		}
	}
}

func TestEtypes(t *testing.T) {
	for _, c := range []struct {
		e    Etype
		name string
		weak bool
	}{
		{17, "aes128-cts-hmac-sha1-96", false}, {18, "aes256-cts-hmac-sha1-96", false},
		{19, "aes128-cts-hmac-sha256-128", false}, {20, "aes256-cts-hmac-sha384-192", false},
		{23, "arcfour-hmac", true}, {16, "des3-cbc-sha1", true}, {3, "des-cbc-md5", true},
		{1, "des-cbc-crc", true}, {25, "camellia128-cts-cmac", false},
		{99, "other", false}, {-133, "other", true}, {0, "other", false},
	} {
		if got := etypeName(etypeLabel(c.e)); got != c.name {
			t.Errorf("etype %d: name %q, want %q", c.e, got, c.name)
		}
		if got := c.e.IsWeak(); got != c.weak {
			t.Errorf("etype %d: weak %v, want %v", c.e, got, c.weak)
		}
	}
}

func TestBoundedLabels(t *testing.T) {
	b := newBoundedLabels([]string{"A", "B"}, 2, statusChar)
	if b.index([]byte("B")) != 1 {
		t.Fatal("known value not found")
	}
	x, y := b.index([]byte("X")), b.index([]byte("Y"))
	if x != 2 || y != 3 || b.index([]byte("X")) != 2 {
		t.Fatalf("dynamic values: X=%d Y=%d", x, y)
	}
	if z := b.index([]byte("Z")); z != b.other() || b.name(z) != "other" {
		t.Fatalf("over the bound: %d %q", z, b.name(z))
	}
	for _, bad := range []string{"", "\x00", "ü", strings.Repeat("A", maxLabelLen+1)} {
		if i := b.index([]byte(bad)); i != b.other() {
			t.Errorf("%q took slot %d", bad, i)
		}
	}
	if b.size() != 5 || b.name(3) != "Y" {
		t.Fatalf("size %d, name(3) %q", b.size(), b.name(3))
	}
}
