package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The KDC's own logrotate configurations. RHEL's krb5-server ships the
// first (with `create` from /etc/logrotate.conf: rename, new empty file,
// HUP makes krb5kdc reopen); copytruncate is the usual hand-written one on
// Debian, whose krb5-kdc ships none. %[1]s is the log, %[2]s the pid file.
var kdcLogrotate = map[string]string{
	"rhel-rename-hup": `%[1]s {
    missingok
    notifempty
    monthly
    rotate 12
    create
    postrotate
        /bin/kill -HUP ` + "`cat %[2]s 2>/dev/null`" + ` 2> /dev/null || true
    endscript
}
`,
	"copytruncate": `%[1]s {
    weekly
    rotate 4
    compress
    delaycompress
    copytruncate
    missingok
    notifempty
}
`,
}

// TestKDCLogrotate rotates a real KDC's log with the real logrotate, twice,
// while the exporter follows it, and checks that every login line is
// counted once: the exporter's counter equals the ISSUE lines found in the
// log and its rotated (and compressed) copies, and the logins made.
func TestKDCLogrotate(t *testing.T) {
	if _, err := exec.LookPath("logrotate"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("logrotate not installed (make deps installs it)")
		}
		t.Skip("logrotate not installed (apt-get install logrotate)")
	}
	if err := realm.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("MIT krb5 programs missing in CI: %v", err)
		}
		t.Skip(err)
	}
	bin := exporterBinary(t)
	for style, conf := range kdcLogrotate {
		t.Run(style, func(t *testing.T) {
			t.Parallel()
			testLogrotate(t, bin, conf)
		})
	}
}

func testLogrotate(t *testing.T, bin, confTmpl string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	r, err := realm.Up(ctx, realm.Options{Dir: filepath.Join(dir, "r"), Users: 30, Services: -1, Fillers: -1, NoKadmind: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Down()
	conf := filepath.Join(dir, "logrotate.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf(confTmpl, r.KDCLog, r.KDCPidFile)), 0o644)
	cfg := filepath.Join(dir, "exporter.yml")
	os.WriteFile(cfg, []byte("logs:\n  - path: "+r.KDCLog+"\n    type: kdc\n    start_at: beginning\n"), 0o600)

	args := []string{"--config.file=" + cfg, "--kdclog.position-file=" + filepath.Join(dir, "positions.json"),
		"--no-collector.process", "--no-collector.network", "--no-collector.kdcconf"}
	base, logs, stop := startExporter(t, bin, args...)
	const series = `krb5_kdc_requests_total{request="as",status="ISSUE"}`
	logins, countedBefore := 0, 0 // counters restart with the exporter
	login := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			logins++
			kinit := exec.CommandContext(ctx, "kinit", "-k", "-t", r.UserKeytab, r.User(logins))
			kinit.Env = append(os.Environ(), append(r.Env(), "KRB5CCNAME=FILE:"+filepath.Join(dir, "cc"))...)
			if out, err := kinit.CombinedOutput(); err != nil {
				t.Fatalf("kinit: %v %s", err, out)
			}
		}
	}
	// counted waits until the exporter has counted every login so far, so
	// that each rotation happens with lines both read and unread.
	counted := func(want int) {
		t.Helper()
		want -= countedBefore
		deadline := time.Now().Add(time.Minute)
		for {
			v, _ := value(get(base+"/metrics"), series)
			if int(v) == want {
				return
			}
			if int(v) > want || time.Now().After(deadline) {
				t.Fatalf("%s = %v, want %d (logins so far)\nexporter log:\n%s", series, v, want, logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	rotate := func() {
		t.Helper()
		out, err := exec.CommandContext(ctx, "logrotate", "-f", "-s", filepath.Join(dir, "logrotate.state"), conf).CombinedOutput()
		if err != nil {
			t.Fatalf("logrotate: %v\n%s", err, out)
		}
	}

	// The read grant the package gives the service user (an ACL) must
	// survive the rotations: logrotate's create copies it, copytruncate
	// keeps the file.
	acl := false
	if _, err := exec.LookPath("setfacl"); err == nil {
		if out, err := exec.Command("setfacl", "-m", "u:nobody:r", r.KDCLog).CombinedOutput(); err != nil {
			t.Fatalf("setfacl: %v %s", err, out)
		}
		acl = true
	}

	login(5)
	counted(5)
	login(5) // not yet read, or read: either way counted once
	rotate()
	login(5)
	counted(15)
	// A rotation while the exporter is stopped, with lines it has not
	// read: the restarted exporter finds them in the rotated file
	// (renamed, or the copy copytruncate made) through its position file.
	stop()
	countedBefore = 15
	login(5)
	rotate()
	base, logs, _ = startExporter(t, bin, args...)
	login(5)
	counted(25)

	// The files say the same: 25 ISSUE lines in the log and its copies.
	files, _ := filepath.Glob(r.KDCLog + "*")
	issued := 0
	for _, f := range files {
		issued += countIssued(t, f)
	}
	if len(files) < 3 || issued != logins {
		t.Errorf("the log and its rotations %v hold %d AS ISSUE lines, want %d", files, issued, logins)
	}
	if acl {
		if out, _ := exec.Command("getfacl", "-p", r.KDCLog).CombinedOutput(); !strings.Contains(string(out), "user:nobody:r--") {
			t.Errorf("the log lost its ACL in the rotations:\n%s", out)
		}
	}
	if v, _ := value(get(base+"/metrics"), `krb5_kdc_log_read_errors_total{path="`+r.KDCLog+`"}`); v != 0 {
		t.Errorf("read errors: %v\n%s", v, logs.String())
	}
}

// countIssued counts the successful AS exchanges in a KDC log file,
// gzipped or not.
func countIssued(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rd io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		rd = z
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "AS_REQ") && strings.Contains(l, ": ISSUE:") {
			n++
		}
	}
	return n
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// exporterBinary builds krb5-exporter once, in its own module, as `make
// package` does.
func exporterBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "krb5-exporter-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "krb5-exporter")
		binErr = testutil.BuildExporter(context.Background(), binPath)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// startExporter runs the exporter (prefix: e.g. setpriv ... before it) on
// a listening socket handed over as systemd does (--web.systemd-socket,
// LISTEN_FDS), so no port number is released and reused, and returns its
// base URL and log. It is stopped when the test ends.
func startExporter(t *testing.T, bin string, args ...string) (string, *testutil.LockedBuffer, func()) {
	return startExporterAs(t, nil, bin, args...)
}

func startExporterAs(t *testing.T, prefix []string, bin string, args ...string) (string, *testutil.LockedBuffer, func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lf, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	// LISTEN_PID must be the exporter's pid: the shell's, kept through exec.
	argv := append(append([]string{}, prefix...), "sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"`, "sh", bin)
	cmd := exec.Command(argv[0], append(append(argv[1:], args...), "--web.systemd-socket")...)
	cmd.ExtraFiles = []*os.File{lf} // fd 3
	logs := &testutil.LockedBuffer{}
	cmd.Stderr = logs
	err = cmd.Start()
	// Only the exporter holds the socket now: if it dies, requests fail
	// instead of waiting in the backlog.
	lf.Close()
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	base := "http://" + l.Addr().String()
	// The socket listens already: the first request waits for the exporter.
	if body := get(base + "/-/healthy"); !strings.Contains(body, "Healthy") {
		t.Fatalf("exporter not healthy: %q\n%s", body, logs.String())
	}
	exporterPids.Store(t.Name(), cmd.Process.Pid)
	return base, logs, stop
}

// exporterPids remembers the pid of each test's exporter (test name →
// pid), for checks on the running process.
var exporterPids sync.Map
