package journal

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/journaldtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// journald is a private journald (journaldtest) with the helpers of
// these tests.
type journald struct{ *journaldtest.Journald }

func startJournald(t *testing.T, conf string) *journald {
	return &journald{journaldtest.Start(t, conf)}
}

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	journaldtest.Unavailable(t, format, args...)
}

// service is a process logging to journald's syslog socket from the
// cgroup of a unit: logger(1) reading lines from a pipe, run under the
// name comm (so its /proc comm is that, as krb5kdc's is), as root.
type service struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    *bufio.Writer
	pipe  interface{ Close() error }
	unit  string
	lines int
}

func (j *journald) service(t *testing.T, unit, comm, ident string) *service {
	return j.serviceAs(t, unit, comm, ident, 0)
}

// serviceAs is a service run by uid; a unit of "" is none (the test's
// own cgroup). Another uid than root cannot reach journald's socket
// through /proc/PID/root: it is run in journald's mount namespace.
func (j *journald) serviceAs(t *testing.T, unit, comm, ident string, uid int) *service {
	t.Helper()
	logger, err := exec.LookPath("logger")
	if err != nil {
		t.Fatalf("logger: %v", err)
	}
	cg := ""
	if unit != "" {
		cg = filepath.Join(j.CgroupParent, unit)
		if err := os.Mkdir(cg, 0o755); err != nil {
			unavailable(t, "cannot make a cgroup for %s: %v", unit, err)
		}
		t.Cleanup(func() { os.Remove(cg) })
	}
	dir, err := os.MkdirTemp("", "journald-service-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // another uid runs bin
	bin := filepath.Join(dir, comm)
	if err := os.Symlink(logger, bin); err != nil {
		t.Fatal(err)
	}
	// The shell joins the cgroup, then becomes logger: every message
	// comes from a process of the unit.
	script := `[ -z "$1" ] || echo $$ > "$1/cgroup.procs" && exec "$2" -u "$3" -t "$4"`
	args := []string{"sh", cg, bin, j.DevLog, ident}
	if uid != 0 {
		script = `[ -z "$1" ] || echo $$ > "$1/cgroup.procs" && exec nsenter -t "$5" -m -- setpriv --reuid="$6" --regid="$6" --clear-groups -- "$2" -u /run/systemd/journal/dev-log -t "$4"`
		args = append(args, strconv.Itoa(j.Cmd.Process.Pid), strconv.Itoa(uid))
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", script}, args...)...)
	cmd.Stderr = os.Stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &service{t: t, cmd: cmd, in: bufio.NewWriter(w), pipe: w, unit: unit}
	t.Cleanup(func() { w.Close(); cmd.Process.Kill(); cmd.Wait() })
	return s
}

func (s *service) log(format string, args ...any) {
	fmt.Fprintf(s.in, format+"\n", args...)
	s.lines++
}

func (s *service) flush() {
	if err := s.in.Flush(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *service) stop() {
	s.flush()
	s.pipe.Close()
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("logger: %v", err)
	}
}

// entries reads the journal's entries matching the given journalctl
// matches, as maps of their fields.
func (j *journald) entries(t *testing.T, matches ...string) []map[string]any {
	t.Helper()
	out, err := exec.Command("journalctl", append([]string{"--directory=" + j.Dir, "--output=json", "--merge", "--no-pager"}, matches...)...).Output()
	if err != nil {
		t.Fatalf("journalctl: %v", err)
	}
	var es []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		es = append(es, e)
	}
	return es
}

// A real journald rate-limits a burst of the KDC's unit and of another
// service, then writes its own "Suppressed N messages" entries: the
// follower counts the KDC's N (matched by its process name and uid, with
// or without its unit) and not the other's, and no suppression
// entry is handed on as a KDC line. The lines journald stored plus those
// it says it dropped are the lines sent.
func TestJournaldSuppressionCounted(t *testing.T) {
	needJournal(t)
	j := startJournald(t, "RateLimitIntervalSec=1s\nRateLimitBurst=5\n")
	unit := fmt.Sprintf("krb5-kdc-test-%d.service", os.Getpid())
	other := fmt.Sprintf("other-test-%d.service", os.Getpid())
	byIdent, byUnit := &collect{}, &collect{}
	ri := start(t, Options{Programs: []string{"krb5kdc"}, Directory: j.Dir, FromBeginning: true}, nil, byIdent)
	ru := start(t, Options{Programs: []string{"krb5kdc"}, Units: []string{unit}, Directory: j.Dir, FromBeginning: true}, nil, byUnit)

	kdc := j.service(t, unit, "krb5kdc", "krb5kdc")
	noisy := j.service(t, other, "sshd", "sshd")
	for i := range 100 {
		kdc.log("AS_REQ line %d", i)
		noisy.log("Accepted publickey %d", i)
	}
	dropped := func(u string) (n uint64) {
		for _, e := range j.entries(t, "MESSAGE_ID="+DroppedMessageID, "OBJECT_SYSTEMD_UNIT="+u) {
			v, _ := strconv.ParseUint(fmt.Sprint(e["N_DROPPED"]), 10, 64)
			n += v
		}
		return n
	}
	stored := func(u string) uint64 {
		return uint64(len(j.entries(t, "_SYSTEMD_UNIT="+u, "_TRANSPORT=syslog")))
	}
	// journald says what it dropped when the service's next message
	// passes after the interval: a line every half second until every
	// line sent is stored or said dropped.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		settled := true
		for _, svc := range []*service{kdc, noisy} {
			if stored(svc.unit)+dropped(svc.unit) != uint64(svc.lines) {
				settled = false
				svc.log("after the burst %d", i)
			}
			svc.flush()
		}
		if settled {
			break
		}
		if i == 10 && stored(unit) == 0 {
			unavailable(t, "journald stored nothing under the KDC's unit: it sees no unit for a process in a cgroup of its own here")
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s journald stored %d and dropped %d of the KDC's %d lines", stored(unit), dropped(unit), kdc.lines)
		}
		time.Sleep(500 * time.Millisecond)
	}
	kdc.stop()
	noisy.stop()
	ours, n, nOther := stored(unit), dropped(unit), dropped(other)
	if n == 0 || nOther == 0 {
		t.Fatalf("journald dropped %d of the KDC's lines and %d of the other's: the burst was not limited", n, nOther)
	}
	for _, r := range []*running{ri, ru} {
		testutil.Eventually(t, 30*time.Second, "the follower to read the KDC's entries", func() bool {
			return r.stats.Entries.Load() >= ours && r.stats.Suppressed.Load() >= n
		})
		if got := r.stats.Suppressed.Load(); got != n {
			t.Errorf("suppressed lines counted %d, journald says %d (and %d of another service)", got, n, nOther)
		}
		if got := r.stats.Entries.Load(); got != ours {
			t.Errorf("%d entries counted, journald stored %d of the KDC's", got, ours)
		}
		if r.stats.Malformed.Load() != 0 {
			t.Errorf("%d malformed", r.stats.Malformed.Load())
		}
	}
	if byIdent.n() != int(ours) || byUnit.n() != int(ours) {
		t.Errorf("%d and %d entries handed on, want %d", byIdent.n(), byUnit.n(), ours)
	}
}

// nobodyUID is the unprivileged user the forgers run as.
const nobodyUID = 65534

// Local users forge KDC lines, and a real journald records who sent them:
// nobody's logger -t krb5kdc, nobody's process named krb5kdc (flooding its
// own unit until journald writes a suppression entry about it, OBJECT_COMM
// krb5kdc), and root's logger -t krb5kdc (not the KDC's program). Only the
// lines of root's process named krb5kdc are handed on, by a follower of
// the program and by one of the program in the KDC's unit, and only the
// KDC's suppressed lines are counted (none here). What journald stored,
// read by journalctl on its own, says every forgery was written. With the
// old SYSLOG_IDENTIFIER and OBJECT_COMM matches this fails: 28 forged
// lines handed on, and the flood's suppression counted (seen).
func TestJournaldForgedLinesNotCounted(t *testing.T) {
	needJournal(t)
	testutil.RequireProgram(t, "setpriv")
	testutil.RequireProgram(t, "nsenter")
	j := startJournald(t, "RateLimitIntervalSec=1s\nRateLimitBurst=5\n")
	kdcUnit := fmt.Sprintf("krb5-kdc-test-%d.service", os.Getpid())
	floodUnit := fmt.Sprintf("forger-test-%d.service", os.Getpid())
	byProgram, byUnit := &collect{}, &collect{}
	rp := start(t, Options{Programs: []string{"krb5kdc"}, Directory: j.Dir, FromBeginning: true}, nil, byProgram)
	ru := start(t, Options{Programs: []string{"krb5kdc"}, Units: []string{kdcUnit}, Directory: j.Dir, FromBeginning: true}, nil, byUnit)

	const forged = "AS_REQ (2 etypes {aes256-cts-hmac-sha1-96(18)}) 10.6.6.6: PREAUTH_FAILED: victim@EXAMPLE.COM for krbtgt/EXAMPLE.COM@EXAMPLE.COM, Preauthentication failed"
	kdc := j.service(t, kdcUnit, "krb5kdc", "krb5kdc")
	// Each forger in a unit of its own, its 10 lines paced under the rate
	// limit (which is per unit): in one unit, the test's own cgroup, the
	// two loggers' 20 lines at once lost some of root's to it, 3 runs in 5
	// (7 of each logger's 10 stored in units of their own, unpaced).
	tagged := j.serviceAs(t, fmt.Sprintf("tagged-test-%d.service", os.Getpid()), "logger", "krb5kdc", nobodyUID)
	named := j.serviceAs(t, floodUnit, "krb5kdc", "krb5kdc", nobodyUID)
	rootTagged := j.serviceAs(t, fmt.Sprintf("root-tagged-test-%d.service", os.Getpid()), "logger", "krb5kdc", 0)
	for i := range 3 {
		kdc.log("AS_REQ genuine %d", i)
	}
	kdc.flush()
	for i := range 10 {
		tagged.log("%s %d", forged, i)
		rootTagged.log("%s %d", forged, i)
		tagged.flush()
		rootTagged.flush()
		time.Sleep(250 * time.Millisecond) // 4 lines a second a unit, under RateLimitBurst=5 per 1s
	}
	tagged.stop()
	rootTagged.stop()
	for i := range 100 {
		named.log("%s flood %d", forged, i)
	}
	named.flush()
	// The flood's suppression entry is written when its next line passes
	// after the interval.
	floodDropped := func() []map[string]any {
		return j.entries(t, "MESSAGE_ID="+DroppedMessageID, "OBJECT_SYSTEMD_UNIT="+floodUnit)
	}
	testutil.Eventually(t, 30*time.Second, "journald's suppression entry about the flood", func() bool {
		if len(floodDropped()) > 0 {
			return true
		}
		named.log("%s after the flood", forged)
		named.flush()
		time.Sleep(500 * time.Millisecond)
		return false
	})
	named.stop()
	for _, e := range floodDropped() {
		if e["OBJECT_COMM"] != "krb5kdc" || e["OBJECT_UID"] != strconv.Itoa(nobodyUID) || e["_TRANSPORT"] != "driver" {
			t.Fatalf("journald's suppression entry is not about nobody's krb5kdc: %v", e)
		}
	}
	// journald stores what a client sent in its own time: a loaded
	// machine's journal held none of root's 10 logger lines right after
	// logger exited.
	testutil.Eventually(t, 30*time.Second, "journald storing nobody's lines tagged krb5kdc (the 10 of logger and some of the flood)", func() bool {
		return len(j.entries(t, "_UID="+strconv.Itoa(nobodyUID), "SYSLOG_IDENTIFIER=krb5kdc")) >= 15
	})
	testutil.Eventually(t, 30*time.Second, "journald storing root's 10 logger lines tagged krb5kdc", func() bool {
		return len(j.entries(t, "_UID=0", "_COMM=logger", "SYSLOG_IDENTIFIER=krb5kdc")) >= 10
	})
	if n := len(j.entries(t, "_UID=0", "_COMM=logger", "SYSLOG_IDENTIFIER=krb5kdc")); n != 10 {
		t.Fatalf("journald stored %d of root's logger lines tagged krb5kdc, want 10", n)
	}
	// The KDC's last line, after every forgery: once it is handed on,
	// every forged entry has been read.
	kdc.log("AS_REQ genuine last")
	kdc.stop()
	testutil.Eventually(t, 30*time.Second, "journald storing the KDC's 4 lines", func() bool {
		return len(j.entries(t, "_SYSTEMD_UNIT="+kdcUnit, "_TRANSPORT=syslog")) >= 4
	})
	var want []record
	for _, e := range j.entries(t, "_SYSTEMD_UNIT="+kdcUnit, "_TRANSPORT=syslog") {
		pid, _ := strconv.Atoi(fmt.Sprint(e["_PID"]))
		want = append(want, record{"krb5kdc", pid, fmt.Sprint(e["MESSAGE"])})
	}
	if len(want) != 4 {
		t.Fatalf("journald stored %d of the KDC's 4 lines", len(want))
	}
	kdcDropped := uint64(len(j.entries(t, "MESSAGE_ID="+DroppedMessageID, "OBJECT_SYSTEMD_UNIT="+kdcUnit)))
	for _, f := range []struct {
		c *collect
		r *running
	}{{byProgram, rp}, {byUnit, ru}} {
		f.c.waitLast(t, want[len(want)-1])
		f.c.mu.Lock()
		if !slices.Equal(f.c.got, want) {
			t.Errorf("handed on %d entries, want the KDC's %d:\ngot  %v\nwant %v", len(f.c.got), len(want), f.c.got, want)
		}
		f.c.mu.Unlock()
		if got := f.r.stats.Suppressed.Load(); got != kdcDropped {
			t.Errorf("%d suppressed lines counted, journald dropped %d of the KDC's (and wrote %d suppression entries about nobody's flood)", got, kdcDropped, len(floodDropped()))
		}
	}
}
