package kdclog

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The oracle counts a KDC log with regular expressions, a method
// independent of the byte scanner, so that the end-to-end and fixture
// tests compare every counter with a second reading of the same lines.
// Its label tables (kadmind results, preauth reasons) are its own, written
// from MIT's messages and docs/metrics.md: nothing is shared with the code
// under test.

var (
	oHeader  = regexp.MustCompile(`^[A-Z][a-z]{2} [ 0-9][0-9] \d\d:\d\d:\d\d \S+ ([a-z0-9_.]+)\[(\d+)\]\(\w+\): (.*)$`)
	oRequest = regexp.MustCompile(`^(AS|TGS)_REQ \((\d+) etypes \{(.*?)\}\) (\S+): ([^:]+): (.*)$`)
	oIssue   = regexp.MustCompile(`^authtime \d+, etypes \{rep=[^,]*?\((-?\d+)\), tkt=[^,]*?\((-?\d+)\), ses=[^,]*?\((-?\d+)\)\}, (.*?) for `)
	oIssueN  = regexp.MustCompile(`^authtime \d+, etypes \{rep=(-?\d+) tkt=(-?\d+) ses=(-?\d+)\}, (.*?) for `)
	oTGSFail = regexp.MustCompile(`^authtime \d+, (?:etypes \{rep=UNSUPPORTED:\(0\)\})? *(.*?) for `)
	oASFail  = regexp.MustCompile(`^(.*?) for `)
	oNumber  = regexp.MustCompile(`^(?:.*\()?(-?\d+)\)?$`)
	oPreauth = regexp.MustCompile(`^preauth \(([^)]+)\) verify failure: (.*)$`)
	oKadmin  = regexp.MustCompile(`^Request: ([a-z0-9_]+), .*, ([^,]+), client=`)
	oUnauth  = regexp.MustCompile(`^Unauthorized request: ([a-z0-9_]+), `)
	oS4U     = regexp.MustCompile(`^\.\.\. (PROTOCOL-TRANSITION|CONSTRAINED-DELEGATION) `)
	oWorkers = regexp.MustCompile(`^creating \d+ worker processes$`)
	// "preauth spake failed to initialize: No SPAKE preauth groups configured"
	oPreauthInit = regexp.MustCompile(`^preauth [a-z0-9_]+ failed to initialize: `)
)

// series is a flat view of metrics: "name{k=v,...}" -> value.
type series map[string]float64

func key(name string, kv ...string) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", kv[i], kv[i+1])
	}
	b.WriteByte('}')
	return b.String()
}

func (s series) add(name string, kv ...string) { s[key(name, kv...)]++ }

// oracleFamilies are the log-derived families the oracle predicts.
var oracleFamilies = []string{
	"krb5_kdc_requests_total", "krb5_kdc_log_probe_requests_total", "krb5_kdc_issued_etypes_total",
	"krb5_kdc_weak_etype_requests_total", "krb5_kdc_preauth_verify_failures_total",
	"krb5_kdc_preauth_failures_recovered_total", "krb5_kdc_retransmits_total",
	"krb5_kdc_lifecycle_events_total", "krb5_kdc_s4u_requests_total", "krb5_kadmind_requests_total",
	"krb5_kadmind_lifecycle_events_total", "krb5_kdc_too_many_connections_total",
}

func isProbe(client string, probes []string) bool {
	for _, p := range probes {
		if client == p || (!strings.Contains(p, "@") && strings.HasPrefix(client, p+"@")) {
			return true
		}
	}
	return false
}

// The oracle's own classification, from MIT's names and messages and
// the documented label values, not from the code under test.

// oEtypes are MIT's names of the enctypes (RFC 3961, 3962, 4757, 6803,
// 8009) and whether docs/metrics.md calls them weak (single DES, 3DES,
// RC4); any other number is "other".
var oEtypes = map[int]struct {
	name string
	weak bool
}{
	1: {"des-cbc-crc", true}, 2: {"des-cbc-md4", true}, 3: {"des-cbc-md5", true}, 4: {"des-cbc-raw", true},
	5: {"des3-cbc-md5", true}, 6: {"des3-cbc-raw", true}, 8: {"des-hmac-sha1", true}, 16: {"des3-cbc-sha1", true},
	17: {"aes128-cts-hmac-sha1-96", false}, 18: {"aes256-cts-hmac-sha1-96", false},
	19: {"aes128-cts-hmac-sha256-128", false}, 20: {"aes256-cts-hmac-sha384-192", false},
	23: {"arcfour-hmac", true}, 24: {"arcfour-hmac-exp", true},
	25: {"camellia128-cts-cmac", false}, 26: {"camellia256-cts-cmac", false},
}

func etypeLabelOf(s string) string {
	n, _ := strconv.Atoi(s)
	if e, ok := oEtypes[n]; ok {
		return e.name
	}
	return "other"
}

func weakEtype(s string) bool {
	n, _ := strconv.Atoi(s)
	return oEtypes[n].weak
}

// oKadminResults maps kadm5 error messages (MIT's kadm_err.et) to the
// documented result labels; anything else is "error".
var oKadminResults = map[string]string{
	"success":                                            "success",
	"Principal does not exist":                           "principal_not_found",
	"Policy does not exist":                              "policy_not_found",
	"Principal or policy already exists":                 "already_exists",
	"Password is too short":                              "password_quality",
	"Password does not contain enough character classes": "password_quality",
	"Password is in the password dictionary":             "password_quality",
	"Cannot reuse password":                              "password_quality",
	"Unspecified password quality failure":               "password_quality",
	"Current password's minimum life has not expired":    "password_min_life",
	"Cannot change protected principal":                  "protected_principal",
	"Policy is in use":                                   "policy_in_use",
	"Principal keys are locked down":                     "keys_locked",
	"Operation requires initial ticket":                  "initial_ticket_required",
	"Insufficient authorization for operation":           "unauthorized",
}

func kadminResult(msg string) string {
	if r, ok := oKadminResults[msg]; ok {
		return r
	}
	if strings.HasPrefix(msg, "Operation requires ``") && strings.HasSuffix(msg, "'' privilege") {
		return "unauthorized"
	}
	return "error"
}

// oPreauthReasons maps the KDC's preauth error messages to the documented
// reason labels; anything else is "other".
var oPreauthReasons = map[string]string{
	"Preauthentication failed":                "preauth_failed",
	"More preauthentication data is required": "more_data_required",
	"Clock skew too great":                    "clock_skew",
	"Decrypt integrity check failed":          "integrity_check_failed",
	"KDC has no support for encryption type":  "bad_etype",
}

func preauthReason(msg string) string {
	if r, ok := oPreauthReasons[msg]; ok {
		return r
	}
	return "other"
}

// oRecoverWindow: "within the next 1,024 AS lines" (docs/metrics.md).
const oRecoverWindow = 1024

// oracle counts the lines of files the way the metrics should.
func oracle(t *testing.T, probes []string, files ...string) series {
	t.Helper()
	want := series{}
	type failure struct {
		seq    int
		method string
	}
	pending := map[string][]failure{} // client+addr -> its real PREAUTH_FAILEDs
	lastMethod := map[string]string{}
	asSeq := 0
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			h := oHeader.FindStringSubmatch(sc.Text())
			if h == nil {
				continue
			}
			prog, pid, msg := h[1], h[2], h[3]
			switch prog {
			case "kadmind":
				switch {
				case oKadmin.MatchString(msg):
					m := oKadmin.FindStringSubmatch(msg)
					want.add("krb5_kadmind_requests_total", "operation", m[1], "result", kadminResult(m[2]))
				case oUnauth.MatchString(msg):
					want.add("krb5_kadmind_requests_total", "operation", oUnauth.FindStringSubmatch(msg)[1], "result", "unauthorized")
				case msg == "starting":
					want.add("krb5_kadmind_lifecycle_events_total", "event", "started")
				case msg == "finished, exiting":
					want.add("krb5_kadmind_lifecycle_events_total", "event", "stopping")
				}
				continue
			case "krb5kdc":
			default:
				continue
			}
			switch {
			case msg == "commencing operation":
				want.add("krb5_kdc_lifecycle_events_total", "event", "started")
			case msg == "shutting down":
				want.add("krb5_kdc_lifecycle_events_total", "event", "stopping")
			case oWorkers.MatchString(msg):
				want.add("krb5_kdc_lifecycle_events_total", "event", "workers_created")
			case strings.HasPrefix(msg, "worker ") && strings.Contains(msg, " exited with status "):
				want.add("krb5_kdc_lifecycle_events_total", "event", "worker_exited")
			case strings.HasPrefix(msg, "signal ") && strings.HasSuffix(msg, " received in supervisor"):
				want.add("krb5_kdc_lifecycle_events_total", "event", "supervisor_signal")
			case oPreauthInit.MatchString(msg):
				want.add("krb5_kdc_lifecycle_events_total", "event", "preauth_init_failed")
			case strings.HasPrefix(msg, "DISPATCH: repeated"):
				if strings.HasSuffix(msg, "dropping repeated request") {
					want.add("krb5_kdc_retransmits_total", "action", "dropped")
				} else {
					want.add("krb5_kdc_retransmits_total", "action", "resent")
				}
			case msg == "too many connections":
				want.add("krb5_kdc_too_many_connections_total")
			case oS4U.MatchString(msg):
				kind := map[string]string{"PROTOCOL-TRANSITION": "protocol_transition", "CONSTRAINED-DELEGATION": "constrained_delegation"}[oS4U.FindStringSubmatch(msg)[1]]
				want.add("krb5_kdc_s4u_requests_total", "kind", kind)
			case oPreauth.MatchString(msg):
				m := oPreauth.FindStringSubmatch(msg)
				want.add("krb5_kdc_preauth_verify_failures_total", "method", m[1], "reason", preauthReason(m[2]))
				lastMethod[pid] = m[1]
			case oRequest.MatchString(msg):
				m := oRequest.FindStringSubmatch(msg)
				req, offered, list, addr, status, rest := strings.ToLower(m[1]), m[2], m[3], m[4], m[5], m[6]
				var client string
				var etypes []string
				switch {
				case status == "ISSUE" && oIssue.MatchString(rest):
					im := oIssue.FindStringSubmatch(rest)
					etypes, client = im[1:4], im[4]
				case status == "ISSUE" && oIssueN.MatchString(rest):
					im := oIssueN.FindStringSubmatch(rest)
					etypes, client = im[1:4], im[4]
				case req == "tgs":
					client = oTGSFail.FindStringSubmatch(rest)[1]
				default:
					client = oASFail.FindStringSubmatch(rest)[1]
				}
				if status == "PREAUTH_FAILED" && req == "as" && strings.HasSuffix(rest, ", More preauthentication data is required") {
					status = "MORE_PREAUTH_DATA_REQUIRED" // the documented status label
				}
				if isProbe(client, probes) {
					want.add("krb5_kdc_log_probe_requests_total", "request", req, "status", status)
					continue
				}
				want.add("krb5_kdc_requests_total", "request", req, "status", status)
				weak := 0
				for _, item := range strings.FieldsFunc(list, func(r rune) bool { return r == ' ' || r == ',' }) {
					if n := oNumber.FindStringSubmatch(item); n != nil {
						if weakEtype(n[1]) {
							weak++
						}
					}
				}
				if weak > 0 {
					want.add("krb5_kdc_weak_etype_requests_total", "kind", "offered", "request", req)
					if strconv.Itoa(weak) == offered {
						want.add("krb5_kdc_weak_etype_requests_total", "kind", "only_weak", "request", req)
					}
				}
				if etypes != nil {
					anyWeak := false
					for i, part := range []string{"reply", "ticket", "session"} {
						want.add("krb5_kdc_issued_etypes_total", "etype", etypeLabelOf(etypes[i]), "key", part, "request", req)
						if weakEtype(etypes[i]) {
							anyWeak = true
						}
					}
					if anyWeak {
						want.add("krb5_kdc_weak_etype_requests_total", "kind", "issued", "request", req)
					}
				}
				if req == "as" {
					asSeq++
					id := client + "\x00" + addr
					switch status {
					case "PREAUTH_FAILED":
						method := lastMethod[pid]
						if method == "" {
							method = "other"
						}
						pending[id] = append(pending[id], failure{asSeq, method})
					case "ISSUE":
						// Every failure this ISSUE follows within the window.
						for _, p := range pending[id] {
							if asSeq-p.seq <= oRecoverWindow {
								want.add("krb5_kdc_preauth_failures_recovered_total", "method", p.method)
							}
						}
						delete(pending, id)
					}
					// The process's verify failure line belongs to
					// this AS line alone.
					delete(lastMethod, pid)
				}
			}
		}
		f.Close()
	}
	return want
}

// gather flattens the oracle families of g.
func gather(t *testing.T, g prometheus.Gatherer) series {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return flatten(mfs)
}

// scrape reads the oracle families from a /metrics endpoint, as
// Prometheus does.
func scrape(t *testing.T, url string) series {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	var mfs []*dto.MetricFamily
	for _, mf := range fams {
		mfs = append(mfs, mf)
	}
	return flatten(mfs)
}

func flatten(mfs []*dto.MetricFamily) series {
	fams := map[string]bool{}
	for _, f := range oracleFamilies {
		fams[f] = true
	}
	got := series{}
	for _, mf := range mfs {
		if !fams[mf.GetName()] {
			continue
		}
		for _, m := range mf.GetMetric() {
			var kv []string
			lps := m.GetLabel()
			sort.Slice(lps, func(i, j int) bool { return lps[i].GetName() < lps[j].GetName() })
			for _, lp := range lps {
				kv = append(kv, lp.GetName(), lp.GetValue())
			}
			got[key(mf.GetName(), kv...)] = m.GetCounter().GetValue()
		}
	}
	return got
}

// compareSeries reports every series whose value differs; zero-valued
// series the oracle does not name are fine (initialised at zero).
func compareSeries(t *testing.T, got, want series) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s = %v, the log says %v", k, got[k], want[k])
		}
	}
}
