package realm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func needSyslog(t *testing.T) {
	t.Helper()
	needMIT(t)
	if _, err := os.Stat(JournalRemote); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing in CI: %v", JournalRemote, err)
		}
		t.Skip(err)
	}
}

type entry struct {
	Ident   string `json:"SYSLOG_IDENTIFIER"`
	PID     string `json:"_PID"`
	SysPID  string `json:"SYSLOG_PID"`
	Message string `json:"MESSAGE"`
	Prio    string `json:"PRIORITY"`
}

// journalEntries reads the realm's journal with journalctl.
func journalEntries(t *testing.T, dir string) []entry {
	t.Helper()
	out, err := exec.Command("journalctl", "--directory="+dir, "--output=json", "--no-pager", "--all").Output()
	if err != nil {
		t.Fatalf("journalctl: %v", err)
	}
	var es []entry
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		es = append(es, e)
	}
	return es
}

// A realm with LogToSyslog has no [logging] section: MIT's krb5kdc and
// kadmind log through syslog to /dev/log, and their lines arrive in a
// real journal file with the fields journald gives them (identifier, the
// kernel's pid of the sender), the host's /dev untouched.
func TestLogToSyslog(t *testing.T) {
	t.Parallel()
	needSyslog(t)
	dir := filepath.Join(t.TempDir(), "r")
	r, err := Up(context.Background(), Options{Dir: dir, Users: 2, Services: 1, Fillers: -1, LogToSyslog: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	if conf, _ := os.ReadFile(r.KDCConf); bytes.Contains(conf, []byte("[logging]")) {
		t.Fatalf("kdc.conf has a [logging] section:\n%s", conf)
	}
	if _, err := os.Lstat("/dev/log"); err == nil {
		t.Log("note: this host has a /dev/log of its own")
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	run(t, r, "kinit", "-k", "-t", r.UserKeytab, r.User(1))
	run(t, r, "kvno", r.Service(1))
	kdcPid := strconv.Itoa(r.KDCPids()[0])
	var asreq, tgsreq, kadmind int
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		asreq, tgsreq, kadmind = 0, 0, 0
		for _, e := range journalEntries(t, r.JournalDir) {
			switch {
			case e.Ident == "krb5kdc" && strings.HasPrefix(e.Message, "AS_REQ") && strings.Contains(e.Message, r.User(1)) && strings.Contains(e.Message, "ISSUE"):
				if e.PID != kdcPid || e.SysPID != kdcPid {
					t.Fatalf("AS_REQ entry with _PID %s SYSLOG_PID %s, krb5kdc is %s", e.PID, e.SysPID, kdcPid)
				}
				asreq++
			case e.Ident == "krb5kdc" && strings.HasPrefix(e.Message, "TGS_REQ") && strings.Contains(e.Message, r.Service(1)):
				tgsreq++
			case e.Ident == "kadmind" && e.PID == strconv.Itoa(r.KadmindPid()):
				kadmind++
			}
		}
		if asreq == 1 && tgsreq == 1 && kadmind > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if asreq != 1 || tgsreq != 1 || kadmind == 0 {
		t.Fatalf("journal: %d AS_REQ ISSUE for %s, %d TGS_REQ, %d kadmind entries; want 1, 1, >0: %+v", asreq, r.User(1), tgsreq, kadmind, journalEntries(t, r.JournalDir))
	}
	if err := r.Down(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", dir, err)
	}
}

func TestParseSyslog(t *testing.T) {
	f := parseSyslog([]byte("<38>Dec  1 05:03:29 krb5kdc[1234]: AS_REQ (4 etypes {aes256}) 127.0.0.1: ISSUE: x: y\n"))
	want := map[string]string{"PRIORITY": "6", "SYSLOG_FACILITY": "4", "SYSLOG_TIMESTAMP": "Dec  1 05:03:29 ",
		"SYSLOG_IDENTIFIER": "krb5kdc", "SYSLOG_PID": "1234", "MESSAGE": "AS_REQ (4 etypes {aes256}) 127.0.0.1: ISSUE: x: y", "_TRANSPORT": "syslog"}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s = %q, want %q", k, f[k], v)
		}
	}
	if f := parseSyslog([]byte("<13>no header at all")); f["MESSAGE"] != "no header at all" || f["SYSLOG_IDENTIFIER"] != "" {
		t.Errorf("%v", f)
	}
}

// Where mount namespaces are not permitted, --log-to-syslog is refused
// with one clear error and nothing is left behind. An unshare(1) that
// fails as the kernel's refusal does stands in for such a system.
func TestLogToSyslogRefusedWithoutNamespaces(t *testing.T) {
	needSyslog(t)
	bin := t.TempDir()
	script := "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "unshare"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	dir := filepath.Join(t.TempDir(), "r")
	_, err := Up(context.Background(), Options{Dir: dir, Users: 1, Services: -1, Fillers: -1, LogToSyslog: true})
	if err == nil || !strings.Contains(err.Error(), "mount namespace") || !strings.Contains(err.Error(), "Operation not permitted") {
		t.Fatalf("want a clear refusal, got %v", err)
	}
	if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
		t.Errorf("%s left behind: %v", dir, serr)
	}
	t.Log(err)
}

// The relay on its own: a datagram as syslog(3) sends it becomes an entry
// with the kernel's pid of the sender, and a message with a newline in it
// (the export format's binary field) arrives whole.
func TestSyslogRelayFields(t *testing.T) {
	needSyslog(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "log.sock")
	relay, err := ListenSyslog(sock, dir)
	if err != nil {
		t.Fatal(err)
	}
	go relay.Serve()
	c, err := net.Dial("unixgram", sock)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []string{"AS_REQ one line", "two\nlines", "trailing newline dropped\n"}
	for _, m := range msgs {
		if _, err := fmt.Fprintf(c, "<38>Dec  1 05:03:29 krb5kdc[77]: %s", m); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := relay.Close(); err != nil {
		t.Fatal(err)
	}
	var got []entry
	for _, e := range journalEntries(t, dir) {
		if e.Ident == "krb5kdc" {
			got = append(got, e)
		}
	}
	if len(got) != len(msgs) {
		t.Fatalf("got %d entries, want %d: %+v (all: %+v)", len(got), len(msgs), got, journalEntries(t, dir))
	}
	for i, e := range got {
		if want := strings.TrimSuffix(msgs[i], "\n"); e.Message != want || e.SysPID != "77" || e.PID != strconv.Itoa(os.Getpid()) || e.Prio != "6" {
			t.Errorf("entry %d: %+v, want message %q, SYSLOG_PID 77, _PID %d, PRIORITY 6", i, e, want, os.Getpid())
		}
	}
}

// The relay command recorded in realm.json is never believed: Load
// derives it from this program and the directory.
func TestLoadIgnoresRecordedRelayCommand(t *testing.T) {
	needSyslog(t)
	dir := filepath.Join(t.TempDir(), "r")
	r, err := Create(context.Background(), Options{Dir: dir, Users: 1, Services: -1, Fillers: -1, LogToSyslog: true, SyslogRelay: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	state := filepath.Join(dir, stateFile)
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	planted := bytes.Replace(b, []byte(`"/bin/true"`), []byte(`"/bin/sh", "-c", "touch /tmp/planted"`), 1)
	if bytes.Equal(planted, b) {
		t.Fatalf("no relay command recorded in %s", b)
	}
	if err := os.WriteFile(state, planted, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if want := []string{exe, "realm", RelayCommand, "--dir", l.Dir}; strings.Join(l.Opts.SyslogRelay, " ") != strings.Join(want, " ") {
		t.Errorf("relay command %q, want %q", l.Opts.SyslogRelay, want)
	}
}
