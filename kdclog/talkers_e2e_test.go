package kdclog

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// talkerTruth is the top talkers read from a KDC log with regular
// expressions (the oracle's header and request shapes), apart from the
// byte scanner and the Space-Saving summaries: "metric{by,request}" ->
// name as logged -> requests. A login is one request: an AS line of a
// client from an address that has a login going on (after its
// NEEDED_PREAUTH or a SPAKE round trip, unbounded here) goes on it.
type talkerTruth map[string]map[string]float64

var (
	tClientServer = regexp.MustCompile(`^(?:authtime \d+, )?(?:etypes \{[^}]*\},? )?(.*?) for ([^,]*)`)
	tDispatch     = regexp.MustCompile(`^DISPATCH: repeated \(retransmitted\?\) request from ([^ ,]+)`)
	tEscape       = regexp.MustCompile(`\\(\\|x[0-9a-f]{2}|.|$)`)
)

func (tt talkerTruth) add(list, name string) {
	if tt[list] == nil {
		tt[list] = map[string]float64{}
	}
	tt[list][name]++
}

func readTalkerTruth(t *testing.T, path string, probes []string) talkerTruth {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tt := talkerTruth{}
	open := map[[2]string]int{} // logins going on by address and client
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		h := oHeader.FindStringSubmatch(sc.Text())
		if h == nil || h[1] != "krb5kdc" {
			continue
		}
		if d := tDispatch.FindStringSubmatch(h[3]); d != nil {
			tt.add("retransmits", d[1])
			continue
		}
		m := oRequest.FindStringSubmatch(h[3])
		if m == nil {
			continue
		}
		req, addr, status, rest := strings.ToLower(m[1]), m[4], m[5], m[6]
		cs := tClientServer.FindStringSubmatch(rest)
		if cs == nil {
			t.Fatalf("no client in %q", sc.Text())
		}
		if isProbe(cs[1], probes) {
			continue
		}
		round := status == "PREAUTH_FAILED" && strings.HasSuffix(rest, ", More preauthentication data is required")
		login := [2]string{addr, cs[1]}
		newRequest := true
		switch {
		case req == "tgs":
		case status == "NEEDED_PREAUTH":
			open[login]++
		case open[login] > 0 && round:
			newRequest = false
		case open[login] > 0:
			open[login]--
			newRequest = false
		case round:
			open[login]++
		}
		if newRequest {
			tt.add("requests{address,"+req+"}", addr)
			tt.add("requests{client,"+req+"}", cs[1])
		}
		if req == "tgs" {
			tt.add("requests{service,tgs}", cs[2])
		}
		if status == "ISSUE" || status == "NEEDED_PREAUTH" || round {
			continue
		}
		tt.add("failures{address}", addr)
		tt.add("failures{client}", cs[1])
		if req == "tgs" {
			tt.add("failures{service}", cs[2])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return tt
}

// unescape reads an exported name back to the bytes logged (\\ and
// \xNN), apart from the exporter's escaping: a backslash before anything
// else, or a cut name, is no name logged.
func unescape(t *testing.T, v string) string {
	t.Helper()
	return tEscape.ReplaceAllStringFunc(v, func(e string) string {
		switch {
		case e == `\\`:
			return `\`
		case len(e) == 4:
			b, err := strconv.ParseUint(e[2:], 16, 8)
			if err != nil {
				t.Fatal(err)
			}
			return string([]byte{byte(b)})
		}
		t.Errorf("%q: %q is no escape", v, e)
		return e
	})
}

// exportedTalkers is the same view of a scrape's top series.
func exportedTalkers(t *testing.T, s *testutil.Scrape) talkerTruth {
	tt := talkerTruth{}
	for _, f := range []string{MetricTopRequests, MetricTopFailures, MetricTopRetransmits} {
		mf := s.MFs[f]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			list := "retransmits"
			switch f {
			case MetricTopRequests:
				list = "requests{" + l["by"] + "," + l["request"] + "}"
			case MetricTopFailures:
				list = "failures{" + l["by"] + "}"
			}
			if tt[list] == nil {
				tt[list] = map[string]float64{}
			}
			tt[list][unescape(t, l["name"])] = m.GetGauge().GetValue()
		}
	}
	return tt
}

// setTalkersClock makes the top talkers' clock stand at now.
func setTalkersClock(tm *testManager, now time.Time) {
	s := tm.m.counts.talkers
	s.mu.Lock()
	s.now = func() time.Time { return now }
	s.mu.Unlock()
}

// TestTopTalkersRealKDC drives a harness KDC with the project's client
// from four loopback addresses (logins and service tickets of several
// principals, in different numbers each), wrong passwords from a fifth,
// tickets for a service the realm lacks, MIT kinit and kvno loops, and
// datagrams sent twice (retransmits); then, its window closed, every
// top-talkers series must be what the KDC's own log says, counted with
// regular expressions, and the window's totals its request lines.
func TestTopTalkersRealKDC(t *testing.T) {
	needMIT(t)
	r, tm := followedRealm(t, realm.Options{Users: 12, Services: 6, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	t0 := time.Now().Truncate(time.Minute)
	setTalkersClock(tm, t0)
	src := config.LogSource{Path: r.KDCLog, Type: "kdc", StartAt: "beginning", PollInterval: 20 * time.Millisecond,
		ProbePrincipals: []string{realm.ReadyPrincipal}}
	// k above the names the load uses: every name is exported, and must
	// be exact (the window holds fewer than 4k names).
	if err := tm.m.ApplyConfig(&config.Config{Logs: []config.LogSource{src}, TopTalkers: config.TopTalkers{TopK: 30}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(user, from string, creds *krb5.Credentials) *krb5.Client {
		t.Helper()
		p, err := krb5.ParsePrincipal(user, r.Realm)
		if err != nil {
			t.Fatal(err)
		}
		if creds == nil {
			if creds, err = krb5.NewKeytabCredentials(r.UserKeytab, p); err != nil {
				t.Fatal(err)
			}
		}
		c, err := krb5.NewClient(krb5.Options{KDC: r.KDCAddr, Client: p, Credentials: creds, LocalAddr: netip.MustParseAddr(from)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	service := func(c *krb5.Client, name string) error {
		p, err := krb5.ParsePrincipal(name, r.Realm)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ServiceTicket(ctx, c.PrepareService(p))
		return err
	}
	// Address 127.0.0.(1+a) logs in 3a times as users a and a+4 in turn,
	// each login with a ticket for services 1..a.
	for a := 1; a <= 4; a++ {
		from := fmt.Sprintf("127.0.0.%d", 1+a)
		cs := []*krb5.Client{client(r.User(a), from, nil), client(r.User(a+4), from, nil)}
		for n := range 3 * a {
			c := cs[n%2]
			if _, err := c.Login(ctx); err != nil {
				t.Fatal(err)
			}
			for s := 1; s <= a; s++ {
				if err := service(c, r.Service(s)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// A stale password: user 9 failing from 127.0.0.6.
	p9, _ := krb5.ParsePrincipal(r.User(9), r.Realm)
	stale := client(r.User(9), "127.0.0.6", krb5.NewPasswordCredentials("stale", p9))
	for range 5 {
		if _, err := stale.Login(ctx); err == nil {
			t.Fatal("a wrong password succeeded")
		}
	}
	// A principal the realm lacks, its name not ASCII: exported escaped.
	pg, _ := krb5.ParsePrincipal("zo\u00eb", r.Realm)
	ghost := client("zo\u00eb", "127.0.0.7", krb5.NewPasswordCredentials("x", pg))
	for range 2 {
		if _, err := ghost.Login(ctx); err == nil {
			t.Fatal("a principal the realm lacks logged in")
		}
	}
	// A job asking for a service the realm lacks, from 127.0.0.3.
	job := client(r.User(10), "127.0.0.3", nil)
	if _, err := job.Login(ctx); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := service(job, "HTTP/gone.example"); err == nil {
			t.Fatal("a ticket for a service the realm lacks")
		}
	}
	// MIT's clients from the default address, and retransmits.
	mit := clients{t: t, r: r}
	for range 3 {
		mit.ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(11))
		mit.ok("", "kvno", "--no-store", r.Service(5), r.Service(6))
	}
	for range 3 {
		sendTwice(t, r, r.User(12))
	}

	waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
	truth := readTalkerTruth(t, r.KDCLog, src.ProbePrincipals)
	// The window still open: nothing yet.
	if got := testutil.Gather(t, tm.reg); got.Count(MetricTopRequests) != 0 {
		t.Errorf("%d top series before the first window ended", got.Count(MetricTopRequests))
	}
	setTalkersClock(tm, t0.Add(time.Minute+time.Second))
	got := testutil.Gather(t, tm.reg)
	exported := exportedTalkers(t, got)
	lists := map[string]bool{}
	for l := range truth {
		lists[l] = true
	}
	for l := range exported {
		lists[l] = true
	}
	for l := range lists {
		if fmt.Sprint(sortedTalkers(truth[l])) != fmt.Sprint(sortedTalkers(exported[l])) {
			t.Errorf("%s:\n exported %v\n log says %v", l, sortedTalkers(exported[l]), sortedTalkers(truth[l]))
		}
	}
	// The load's shape is in the truth: the counts are not all alike.
	if n := len(truth["requests{address,tgs}"]); n != 5 {
		t.Errorf("TGS requests from %d addresses in the log, want 5: %v", n, truth["requests{address,tgs}"])
	}
	if v := truth["failures{client}"][r.User(9)]; v != 5 {
		t.Errorf("the log has %v failures of %s, want 5", v, r.User(9))
	}
	if v := truth["failures{service}"]["HTTP/gone.example@"+r.Realm]; v != 4 {
		t.Errorf("the log has %v failures of the missing service, want 4", v)
	}
	if v := truth["retransmits"]["127.0.0.1"]; v != 3 {
		t.Errorf("the log has %v retransmits, want 3", v)
	}
	// A login is one request whatever its lines, as the load made them:
	// 3a logins from 127.0.0.(1+a) (and the job's one from 127.0.0.3),
	// each with a ticket for a services; MIT's 3 kinit and 6 kvno
	// tickets; 5 stale passwords, 2 logins of a missing principal, 3
	// requests sent twice and never answered.
	for k, want := range map[[2]string]float64{
		{"requests{address,as}", "127.0.0.2"}: 3, {"requests{address,as}", "127.0.0.3"}: 7,
		{"requests{address,as}", "127.0.0.4"}: 9, {"requests{address,as}", "127.0.0.5"}: 12,
		{"requests{address,tgs}", "127.0.0.5"}: 48, {"requests{address,as}", "127.0.0.6"}: 5,
		{"requests{address,as}", "127.0.0.7"}: 2, {"requests{client,as}", "zo\u00eb@" + r.Realm}: 2,
		{"requests{client,as}", r.User(11)}: 3, {"requests{client,tgs}", r.User(11)}: 6,
		{"requests{client,as}", r.User(9)}: 5, {"failures{client}", r.User(9)}: 5,
		{"requests{client,as}", strings.Replace(r.User(12), "@", `\@`, 1) + "@" + r.Realm}: 3, // a name of one component with an @, as sendTwice makes it
	} {
		if v := exported[k[0]][k[1]]; v != want {
			t.Errorf("%s %s: %v exported, the load made %v (%v)", k[0], k[1], v, want, exported[k[0]])
		}
	}
	// ... of more lines than that: the round trips are in the log.
	if n := countLines(t, r.KDCLog, regexp.MustCompile(`AS_REQ .*: (NEEDED_PREAUTH|PREAUTH_FAILED): `+regexp.QuoteMeta(r.User(11))+` for .*(required)$`)); n != 6 {
		t.Errorf("%d NEEDED_PREAUTH and SPAKE round-trip lines of MIT's 3 kinit, want 6", n)
	}
	// The window's totals are its requests.
	for _, req := range []string{"as", "tgs"} {
		var sum float64
		for _, v := range truth["requests{address,"+req+"}"] {
			sum += v
		}
		if v := got.Value(MetricTopWindowRequests, "request", req); v != sum {
			t.Errorf("window requests %s = %v, the log has %v", req, v, sum)
		}
	}
	// Two windows on with nothing read: an empty last window.
	setTalkersClock(tm, t0.Add(3*time.Minute+time.Second))
	if got := testutil.Gather(t, tm.reg); got.Count(MetricTopRequests) != 0 || got.Value(MetricTopWindowRequests, "request", "as") != 0 {
		t.Errorf("an idle window has %d top series, %v AS requests", got.Count(MetricTopRequests), got.Value(MetricTopWindowRequests, "request", "as"))
	}
}

func sortedTalkers(m map[string]float64) []string {
	var out []string
	for n, v := range m {
		out = append(out, fmt.Sprintf("%s=%v", n, v))
	}
	sort.Strings(out)
	return out
}

// countLines counts the lines of path that re matches.
func countLines(t *testing.T, path string, re *regexp.Regexp) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if re.MatchString(l) {
			n++
		}
	}
	return n
}

// TestTopTalkersLoginsRealKDC: MIT kinit and kvno against a harness KDC
// with SPAKE (a login is NEEDED_PREAUTH, a round trip and ISSUE: 3 AS
// lines) and one without (encrypted timestamp: 2 AS lines): n logins and
// n service tickets are n AS and n TGS requests, in the client's and the
// address's series and the window's totals.
func TestTopTalkersLoginsRealKDC(t *testing.T) {
	needMIT(t)
	const n = 4
	for _, c := range []struct {
		name    string
		noSPAKE bool
		lines   int // AS lines of a login
	}{{"spake", false, 3}, {"encrypted timestamp", true, 2}} {
		t.Run(c.name, func(t *testing.T) {
			r, tm := followedRealm(t, realm.Options{Users: 1, Services: 1, Fillers: -1, NoKadmind: true, DisableLastSuccess: true, NoSPAKE: c.noSPAKE})
			t0 := time.Now().Truncate(time.Minute)
			setTalkersClock(tm, t0)
			mit := clients{t: t, r: r}
			for range n {
				mit.ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(1))
				mit.ok("", "kvno", "--no-store", r.Service(1))
			}
			waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
			if got := countLines(t, r.KDCLog, regexp.MustCompile(`AS_REQ .* `+regexp.QuoteMeta(r.User(1))+` for `)); got != c.lines*n {
				t.Fatalf("%d AS lines of %s in the log, want %d", got, r.User(1), c.lines*n)
			}
			setTalkersClock(tm, t0.Add(time.Minute+time.Second))
			got := testutil.Gather(t, tm.reg)
			for _, req := range []string{"as", "tgs"} {
				for _, v := range []float64{
					got.Value(MetricTopRequests, "by", "client", "request", req, "name", r.User(1)),
					got.Value(MetricTopRequests, "by", "address", "request", req, "name", "127.0.0.1"),
					got.Value(MetricTopWindowRequests, "request", req),
				} {
					if v != n {
						t.Errorf("%s: %v requests, want %d", req, v, n)
					}
				}
			}
		})
	}
}
