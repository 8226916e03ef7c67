package kdclog

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/journaldtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// What an entry without path or journal follows, for each way kdc.conf
// and krb5.conf can say where the daemons log (MIT's rules: the entity's
// specs, else default's; a FILE wins, syslog and stderr are the journal;
// nothing valid is syslog), garbage included.
func TestFromKDCConf(t *testing.T) {
	host := &config.JournalSource{Directory: "/host/journal"}
	for name, c := range map[string]struct {
		kdc, krb5 string
		journal   *config.JournalSource
		types     []string
		want      string // the keys followed, then "|" and the unresolved types
		bad       int
	}{
		"Debian: no [logging]":    {"[realms]\n", "", host, []string{"kdc", "kadmind"}, "journal:/host/journal:krb5kdc journal:/host/journal:kadmind|", 0},
		"RHEL: FILE in krb5.conf": {"[realms]\n", "[logging]\n default = FILE:/var/log/krb5libs.log\n kdc = FILE:/var/log/krb5kdc.log\n admin_server = FILE:/var/log/kadmind.log\n", host, []string{"kdc", "kadmind"}, "/var/log/krb5kdc.log /var/log/kadmind.log|", 0},
		"FILE= (truncating)":      {"[logging]\n\tkdc = FILE=/srv/k.log\n", "", host, []string{"kdc"}, "/srv/k.log|", 0},
		"file before syslog":      {"[logging]\n\tkdc = SYSLOG:INFO:AUTH\n\tkdc = FILE:/srv/k.log\n", "", host, []string{"kdc"}, "/srv/k.log|", 0},
		"syslog only":             {"[logging]\n\tkdc = SYSLOG:INFO:DAEMON\n", "", host, []string{"kdc"}, "journal:/host/journal:krb5kdc|", 0},
		"stderr":                  {"[logging]\n\tkdc = STDERR\n", "", host, []string{"kdc"}, "journal:/host/journal:krb5kdc|", 0},
		"syslog, no journal":      {"", "", nil, []string{"kdc"}, "|kdc", 0},
		"console":                 {"[logging]\n\tkdc = CONSOLE\n\tkdc = DEVICE=/dev/tty9\n", "", host, []string{"kdc"}, "|kdc", 0},
		"garbage falls to syslog": {"[logging]\n\tkdc = FILE\n\tkdc = /var/log/krb5kdc.log\n", "", host, []string{"kdc"}, "journal:/host/journal:krb5kdc|", 2},
		"one default, both":       {"[logging]\n\tdefault = FILE:/var/log/krb5.log\n", "", host, []string{"kdc", "kadmind"}, "/var/log/krb5.log|", 0},
		"kpropd: always syslog":   {"[logging]\n\tdefault = FILE:/var/log/krb5.log\n", "", host, []string{"kpropd"}, "journal:/host/journal:kpropd|", 0},
		"unparsable kdc.conf":     {"[realms\n", "", host, []string{"kdc"}, "|kdc", 0},
		"no kdc.conf at all":      {"-", "", host, []string{"kdc"}, "journal:/host/journal:krb5kdc|", 0},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			kdc := filepath.Join(dir, "kdc.conf")
			if c.kdc != "-" {
				testutil.WriteFile(t, dir, "kdc.conf", c.kdc)
			}
			o := &Config{KDCProfile: kdc, Krb5Profile: testutil.WriteFile(t, dir, "krb5.conf", c.krb5), HostJournal: c.journal}
			var logs []config.LogSource
			for _, typ := range c.types {
				logs = append(logs, config.LogSource{Type: typ, StartAt: "beginning"})
			}
			out, chosen, unresolved := o.resolveKDCConf(logs)
			var keys, types []string
			for _, l := range out {
				keys = append(keys, l.Key())
				if l.StartAt != "beginning" {
					t.Errorf("%s: the entry's settings lost: %+v", l.Key(), l)
				}
				// The journal read is the host's, with journal: {}'s
				// trust rule: identifiers by type, root only, no unit.
				if l.Journal != nil && (!reflect.DeepEqual(*l.Journal, *host) || l.Journal == host) {
					t.Errorf("%s: journal %+v, want a copy of the host's %+v", l.Key(), l.Journal, host)
				}
			}
			bad := 0
			for _, r := range append(chosen, unresolved...) {
				bad += len(r.bad)
				if r.why == "" {
					t.Errorf("%s: no reason given", r.src.Key())
				}
			}
			for _, r := range unresolved {
				types = append(types, r.src.Type)
				if !strings.Contains(r.why, ": ") {
					t.Errorf("unresolved %s: %q names no fix", r.src.Type, r.why)
				}
			}
			if got := strings.Join(keys, " ") + "|" + strings.Join(types, " "); got != c.want || bad != c.bad {
				t.Errorf("got %q (%d invalid specs), want %q (%d)", got, bad, c.want, c.bad)
			}
			if c.want == "/var/log/krb5.log|" && len(out) == 1 && out[0].Type != "any" {
				t.Errorf("one file for both daemons: type %q, want any (each line once)", out[0].Type)
			}
		})
	}
}

// A source that does not open within the grace period is warned about
// once, with the fix, and krb5_kdc_log_source_missing says so; it goes
// back to 0 once the file appears. An entry kdc.conf gives nothing to
// follow is reported at once, with an empty path.
func TestSourceMissing(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "krb5kdc.log")
	kdc := testutil.WriteFile(t, dir, "kdc.conf", "[logging]\n\tkdc = FILE:"+logPath+"\n\tadmin_server = CONSOLE\n")
	buf := &testutil.LockedBuffer{}
	tm := startManagerOpts(t, log.NewLogfmtLogger(buf), Config{KDCProfile: kdc, Krb5Profile: "/nonexistent", OpenGrace: 300 * time.Millisecond},
		config.LogSource{Type: "kdc", PollInterval: 20 * time.Millisecond}, config.LogSource{Type: "kadmind"})
	if v := value(t, tm.reg, "krb5_kdc_log_source_missing", "path", "", "type", "kadmind"); v != 1 {
		t.Errorf("kadmind to the console: missing = %v, want 1", v)
	}
	if v := value(t, tm.reg, "krb5_kdc_log_source_missing", "path", logPath, "type", "kdc"); v != 0 {
		t.Errorf("missing = %v before the grace period", v)
	}
	waitValue(t, tm.reg, 1, "krb5_kdc_log_source_missing", "path", logPath, "type", "kdc")
	time.Sleep(200 * time.Millisecond) // more ticks: still one warning
	out := buf.String()
	if n := strings.Count(out, "log source not open"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, out)
	}
	for _, want := range []string{`msg="log source chosen from kdc.conf" type=kdc source=` + logPath + ` why="[logging] kdc = FILE:` + logPath + " (" + kdc + ":2)",
		`fix="the file kdc.conf names does not exist`, `msg="no log source for this type`, "admin_server = FILE:/var/log/kadmind.log"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	writeLines(t, logPath, asIssue("u@R"))
	waitValue(t, tm.reg, 0, "krb5_kdc_log_source_missing", "path", logPath, "type", "kdc")
	waitValue(t, tm.reg, 1, "krb5_kdc_requests_total", "request", "as", "status", "ISSUE")
}

// A real KDC and kadmind whose kdc.conf logs to files (the harness
// realm's [logging], as RHEL's): entries that name no path follow those
// files, and count what the KDC wrote there.
func TestKDCConfFileRealm(t *testing.T) {
	needMIT(t)
	r, err := realm.Up(context.Background(), realm.Options{Dir: filepath.Join(t.TempDir(), "realm"), Users: 3, Services: 2, Fillers: -1, DisableLastSuccess: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	tm := startManagerOpts(t, log.NewNopLogger(), Config{KDCProfile: r.KDCConf, Krb5Profile: r.Krb5Conf},
		config.LogSource{Type: "kdc", StartAt: "beginning", PollInterval: 20 * time.Millisecond, ProbePrincipals: []string{realm.ReadyPrincipal}},
		config.LogSource{Type: "kadmind", StartAt: "beginning", PollInterval: 20 * time.Millisecond})
	c := clients{t: t, r: r}
	for i := 1; i <= 3; i++ {
		c.ok("", "kinit", "-k", "-t", r.UserKeytab, r.User(i))
		c.ok("", "kvno", "--no-store", r.Service(1), r.Service(2))
	}
	c.fails("", "wrong\n", "kinit", r.User(1))
	c.fails("", "x\n", "kinit", "nosuch@"+r.Realm)
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	// Both files followed, to their ends, and every count is the files'.
	waitValue(t, tm.reg, completeLines(t, r.KDCLog), "krb5_kdc_log_lines_read_total", "path", r.KDCLog)
	waitValue(t, tm.reg, completeLines(t, r.KadmindLog), "krb5_kdc_log_lines_read_total", "path", r.KadmindLog)
	got := gather(t, tm.reg)
	compareSeries(t, got, oracle(t, []string{realm.ReadyPrincipal}, r.KDCLog, r.KadmindLog))
	if got[key("krb5_kdc_requests_total", "request", "as", "status", "ISSUE")] != 3 {
		t.Errorf("as ISSUE = %v, want the 3 logins", got[key("krb5_kdc_requests_total", "request", "as", "status", "ISSUE")])
	}
}

// A real KDC whose kdc.conf has no [logging] (Debian's) logs through
// syslog into a real systemd-journald (journaldtest), which an entry
// naming no path follows: its counts equal the ISSUE lines journald holds
// and the requests the clients' traces show; lines forged with the KDC's
// name, by a user (uid nobody) and by root's logger, count nowhere.
func TestKDCConfJournalRealm(t *testing.T) {
	needMIT(t)
	j := journaldtest.Start(t, "")
	r, err := realm.Up(context.Background(), realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 3, Services: 2, Fillers: -1,
		NoKadmind: true, DisableLastSuccess: true, LogToSyslog: true, SyslogSocket: j.DevLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	if b, _ := os.ReadFile(r.KDCConf); strings.Contains(string(b), "[logging]") {
		t.Fatalf("%s has a [logging] section", r.KDCConf)
	}
	buf := &testutil.LockedBuffer{}
	tm := startManagerOpts(t, log.NewLogfmtLogger(buf), Config{KDCProfile: r.KDCConf, Krb5Profile: r.Krb5Conf, HostJournal: &config.JournalSource{Directory: j.Dir}},
		config.LogSource{Type: "kdc", StartAt: "beginning", ProbePrincipals: []string{realm.ReadyPrincipal}})
	if !strings.Contains(buf.String(), "source=journal:"+j.Dir+":krb5kdc why=\"no valid [logging] kdc or default in ") {
		t.Errorf("the choice is not logged with its reason:\n%s", buf)
	}
	c := &tracedClients{clients: clients{t: t, r: r}}
	for i := 1; i <= 3; i++ {
		c.do(true, "", "kinit", "-k", "-t", r.UserKeytab, r.User(i))
		c.do(true, "", "kvno", "--no-store", r.Service(1), r.Service(2))
	}
	c.do(false, "wrong\n", "kinit", r.User(2))
	// As the KDC sends a request line to syslog (the journal keeps the
	// message without the syslog header).
	forged := strings.TrimPrefix(asIssue("forged@"+r.Realm), hdr)
	for _, args := range [][]string{
		{"nsenter", "-t", strconv.Itoa(j.Cmd.Process.Pid), "-m", "--", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
			"logger", "-u", "/run/systemd/journal/dev-log", "-t", "krb5kdc", forged},
		{"logger", "-u", j.DevLog, "-t", "krb5kdc", forged},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	journal := func() []byte {
		out, err := exec.Command("journalctl", "--directory="+j.Dir, "_COMM=krb5kdc", "_UID=0", "--output=cat", "--no-pager").Output()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := requestsTotal(t, tm)
		jl := journal()
		as, tgs := float64(countIssued(jl, "AS_REQ")), float64(countIssued(jl, "TGS_REQ"))
		ok := got[key("krb5_kdc_requests_total", "request", "as", "status", "ISSUE")] == as && got[key("krb5_kdc_requests_total", "request", "tgs", "status", "ISSUE")] == tgs
		if ok && as == 3 && tgs == 6 && sum(got) == float64(c.sent) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counted %v (%v requests); journald holds %v AS and %v TGS ISSUE lines of root's krb5kdc, the clients sent %d", got, sum(got), as, tgs, c.sent)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The forged lines reached the journal (by SYSLOG_IDENTIFIER), and
	// were not counted: the loop above saw the clients' count exactly.
	out, err := exec.Command("journalctl", "--directory="+j.Dir, "SYSLOG_IDENTIFIER=krb5kdc", "--output=cat", "--no-pager").Output()
	if err != nil || strings.Count(string(out), "forged@") != 2 {
		t.Errorf("journald holds %d forged lines, want 2 (%v)", strings.Count(string(out), "forged@"), err)
	}
	time.Sleep(200 * time.Millisecond)
	if v := requestsTotal(t, tm)[key("krb5_kdc_requests_total", "request", "as", "status", "ISSUE")]; v != 3 {
		t.Errorf("as ISSUE = %v after the forged lines, want 3", v)
	}
}
