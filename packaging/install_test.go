package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

const svcUser = "krb5-exporter"

// needRoot skips a test that installs packages unless it runs as root; in
// CI (CI set) it fails instead, so the packages are always tested there.
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("CI") != "" {
		fail = t.Fatalf
	}
	if os.Getuid() != 0 {
		fail("installs a package and creates a user: needs root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			fail("%s not installed (make deps installs it)", tool)
		}
	}
	if err := realm.Available(); err != nil {
		fail("%v", err)
	}
}

// buildPackages builds the binary as `make package` does and packages it.
func buildPackages(t *testing.T) (deb, rpm string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "krb5-exporter")
	// Built in the exporter's own module, as `make package` builds it.
	if err := testutil.BuildPackagedExporter(context.Background(), bin); err != nil {
		t.Fatal(err)
	}
	// Packaged by the builder as `make package` runs it (not in this
	// process: under -race, compressing 20 MB takes minutes).
	pkg := exec.Command("go", "run", ".", "-binary", bin, "-out", filepath.Join(dir, "dist"), "-repo", "..", "-arch", "amd64")
	pkg.Stderr = &bytes.Buffer{}
	out, err := pkg.Output()
	if err != nil {
		t.Fatalf("go run . (the package builder): %v\n%s", err, pkg.Stderr)
	}
	paths := strings.Fields(string(out))
	if len(paths) != 2 || !strings.HasSuffix(paths[0], ".deb") || !strings.HasSuffix(paths[1], ".rpm") {
		t.Fatalf("the builder made %q, want a .deb and an .rpm", paths)
	}
	return paths[0], paths[1]
}

// dpkg runs dpkg, waiting (2 minutes at most) while another package
// manager holds its lock.
func dpkg(t *testing.T, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := exec.Command("dpkg", args...).CombinedOutput()
		if err == nil {
			t.Logf("dpkg %s: done after %s", args[0], time.Since(deadline.Add(-2*time.Minute)).Round(time.Millisecond))
			return string(out)
		}
		if !bytes.Contains(out, []byte("lock")) || time.Now().After(deadline) {
			t.Fatalf("dpkg %v: %v\n%s", args, err, out)
		}
		time.Sleep(time.Second) // the lock holder gives no event to wait on
	}
}

func installed() bool {
	out, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", "krb5-exporter").Output()
	return strings.Contains(string(out), "installed") || strings.Contains(string(out), "config-files")
}

// TestDebInstall installs the .deb as an administrator would, checks what
// it put where, runs the installed binary as the service user against a
// real KDC, then removes and purges it.
func TestDebInstall(t *testing.T) {
	needRoot(t, "dpkg", "rpm", "systemd-analyze", "setpriv", "setfacl", "getfacl", "kinit", "journalctl", "/lib/systemd/systemd-journal-remote")
	if installed() {
		t.Fatal("krb5-exporter is already installed here; the test would replace it (dpkg -P krb5-exporter first)")
	}
	if _, err := user.Lookup(svcUser); err == nil {
		t.Fatalf("user %s exists already; the test would remove it", svcUser)
	}
	start := time.Now()
	deb, rpm := buildPackages(t)
	t.Logf("packages built in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if installed() {
			dpkg(t, "--purge", "krb5-exporter")
		}
		if _, err := user.Lookup(svcUser); err == nil {
			exec.Command("userdel", svcUser).Run()
			exec.Command("groupdel", svcUser).Run()
		}
	})
	dpkg(t, "-i", deb)
	checkPIE(t, "/usr/bin/krb5-exporter")

	// The user, the files and their permissions.
	u, err := user.Lookup(svcUser)
	if err != nil {
		t.Fatalf("the package created no user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 || uid >= 1000 || u.HomeDir != "/var/lib/krb5-exporter" {
		t.Errorf("user %s: uid %d home %s, want a system user with home /var/lib/krb5-exporter", svcUser, uid, u.HomeDir)
	}
	if out, _ := exec.Command("getent", "passwd", svcUser).Output(); !strings.HasSuffix(strings.TrimSpace(string(out)), "nologin") {
		t.Errorf("user %s can log in: %s", svcUser, out)
	}
	for _, f := range []struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}{
		{"/usr/bin/krb5-exporter", 0o755, 0, 0},
		{"/etc/krb5-exporter", 0o750 | os.ModeDir, 0, gid},
		{"/etc/krb5-exporter/config.yml", 0o640, 0, gid},
		{"/etc/default/krb5-exporter", 0o644, 0, 0},
		{"/var/lib/krb5-exporter", 0o750 | os.ModeDir, uid, gid},
		{"/usr/lib/systemd/system/krb5-exporter.service", 0o644, 0, 0},
		{"/usr/lib/systemd/system/krb5-exporter.socket", 0o644, 0, 0},
		{"/usr/libexec/krb5-exporter/grant-access", 0o755, 0, 0},
		{"/usr/share/man/man1/krb5-exporter.1.gz", 0o644, 0, 0},
		{"/usr/share/doc/krb5-exporter/README.md", 0o644, 0, 0},
		{"/usr/share/doc/krb5-exporter/configuration.md", 0o644, 0, 0},
		{"/usr/share/doc/krb5-exporter/copyright", 0o644, 0, 0},
	} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Error(err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != f.mode || int(st.Uid) != f.uid || int(st.Gid) != f.gid {
			t.Errorf("%s: %v %d:%d, want %v %d:%d", f.path, fi.Mode(), st.Uid, st.Gid, f.mode, f.uid, f.gid)
		}
	}
	if out, err := exec.Command("sh", "-c", "zcat /usr/share/man/man1/krb5-exporter.1.gz").Output(); err != nil ||
		!strings.Contains(string(out), ".TH KRB5-EXPORTER 1") || !strings.Contains(string(out), `\-\-config.file`) {
		t.Errorf("man page: %v\n%.300s", err, out)
	}

	// The units as systemd reads them, and their exposure.
	units := []string{"/usr/lib/systemd/system/krb5-exporter.service", "/usr/lib/systemd/system/krb5-exporter.socket"}
	if out, err := exec.Command("systemd-analyze", append([]string{"verify"}, units...)...).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	checkExposure(t, units[0])

	// The shipped configuration loads, read as the service user reads it,
	// with the unit's supplementary groups.
	unitText, err := os.ReadFile(units[0])
	if err != nil {
		t.Fatal(err)
	}
	groups := []string{svcUser}
	for _, l := range strings.Split(string(unitText), "\n") {
		if rest, ok := strings.CutPrefix(l, "SupplementaryGroups="); ok {
			groups = append(groups, strings.Fields(rest)...)
		}
	}
	asUser := func(args ...string) *exec.Cmd {
		return exec.Command("setpriv", append([]string{"--reuid=" + svcUser, "--regid=" + svcUser, "--groups=" + strings.Join(groups, ","),
			"--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"}, args...)...)
	}
	// A journal file as journald leaves it (root:systemd-journal 0640):
	// a journal: source's journalctl reads it as the service user.
	jdir := t.TempDir()
	for _, d := range []string{jdir, filepath.Dir(jdir)} { // TempDir's are 0700
		os.Chmod(d, 0o755)
	}
	jfile := filepath.Join(jdir, "system.journal")
	remote := exec.Command("/lib/systemd/systemd-journal-remote", "--output="+jfile, "-")
	remote.Stdin = strings.NewReader("__REALTIME_TIMESTAMP=1764556800000001\n_BOOT_ID=0123456789abcdef0123456789abcdef\nSYSLOG_IDENTIFIER=krb5kdc\nMESSAGE=from the journal\n\n")
	if out, err := remote.CombinedOutput(); err != nil {
		t.Fatalf("systemd-journal-remote: %v %s", err, out)
	}
	if out, err := exec.Command("chgrp", "systemd-journal", jfile).CombinedOutput(); err != nil {
		t.Fatalf("chgrp: %v %s", err, out)
	}
	os.Chmod(jfile, 0o640)
	if out, err := asUser("journalctl", "--file="+jfile, "--output=cat", "--quiet").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "from the journal" {
		t.Errorf("the service user cannot read a journal file of group systemd-journal: %v: %s", err, out)
	}
	if out, err := asUser("/usr/bin/krb5-exporter", "--config.file", "/etc/krb5-exporter/config.yml", "--config.check").CombinedOutput(); err != nil {
		t.Errorf("--config.check on the shipped configuration: %v\n%s", err, out)
	}

	kdcLog := runInstalled(t, asUser)
	// The grants of the files config.yml names go back with the package
	// (those kdc.conf names are found at its distribution's path, which
	// the test's realm does not use).
	if err := os.WriteFile("/etc/krb5-exporter/config.yml", []byte("logs:\n  - path: "+kdcLog+"\n    type: kdc\n"), 0o640); err != nil {
		t.Fatal(err)
	}

	// Remove: the service's files go, the configuration and user stay.
	dpkg(t, "--remove", "krb5-exporter")
	if _, err := os.Stat("/usr/bin/krb5-exporter"); err == nil {
		t.Error("dpkg -r left /usr/bin/krb5-exporter")
	}
	if _, err := os.Stat("/etc/krb5-exporter/config.yml"); err != nil {
		t.Errorf("dpkg -r removed the configuration: %v", err)
	}
	// ... and the read grants on the logs of the configuration go back.
	if out, err := exec.Command("getfacl", "-p", kdcLog).CombinedOutput(); err != nil || strings.Contains(string(out), svcUser) {
		t.Errorf("dpkg -r left the service user's ACL on %s: %v\n%s", kdcLog, err, out)
	}
	dpkg(t, "--purge", "krb5-exporter")
	for _, p := range []string{"/etc/krb5-exporter", "/var/lib/krb5-exporter", "/etc/default/krb5-exporter"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("dpkg -P left %s", p)
		}
	}
	if _, err := user.Lookup(svcUser); err == nil {
		t.Errorf("dpkg -P left the user %s", svcUser)
	}

	// The .rpm holds the same files (RHEL's sysconfig for Debian's
	// default; rpm keeps its changelog in the header).
	debFiles := packageFiles(t, exec.Command("dpkg-deb", "--fsys-tarfile", deb), true)
	rpmFiles := packageFiles(t, exec.Command("rpm", "-qlp", rpm), false)
	var want []string
	for _, f := range debFiles {
		switch f {
		case "/etc/default/krb5-exporter":
			f = "/etc/sysconfig/krb5-exporter"
		case "/usr/share/doc/krb5-exporter/copyright":
			f = "/usr/share/licenses/krb5-exporter/LICENSE"
		case "/usr/share/doc/krb5-exporter/changelog.Debian.gz":
			continue
		}
		want = append(want, f)
	}
	slices.Sort(want)
	if !slices.Equal(want, rpmFiles) {
		t.Errorf("rpm -qlp lists\n%s\nwant (from the .deb)\n%s", strings.Join(rpmFiles, "\n"), strings.Join(want, "\n"))
	}
	if out, err := exec.Command("rpm", "-qp", "--queryformat", "%{LICENSE}", rpm).Output(); err != nil || string(out) != "Apache-2.0" {
		t.Errorf("rpm -qp --queryformat %%{LICENSE}: %q %v, want Apache-2.0", out, err)
	}
}

// packageFiles lists the regular files of a package: from the .deb's data
// tar, or rpm -qlp's list less the directories the .deb also owns.
func packageFiles(t *testing.T, cmd *exec.Cmd, tarball bool) []string {
	t.Helper()
	if tarball {
		cmd = exec.Command("sh", "-c", "dpkg-deb --fsys-tarfile \"$1\" | tar -tv", "sh", cmd.Args[len(cmd.Args)-1])
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if tarball {
			f := strings.Fields(l)
			if len(f) < 6 || !strings.HasPrefix(f[0], "-") {
				continue
			}
			files = append(files, strings.TrimPrefix(f[len(f)-1], "."))
			continue
		}
		if l == "/etc/krb5-exporter" { // the one directory entry, in both
			continue
		}
		files = append(files, l)
	}
	slices.Sort(files)
	return files
}

// runInstalled runs the installed binary as the packaged unit runs it (its
// ExecStart, as the service user, with no capability, on a socket handed
// over as systemd does) against a harness realm whose probe principal was
// made with `realm probe-principal`, and checks that it probes and follows
// the KDC log.
func runInstalled(t *testing.T, asUser func(...string) *exec.Cmd) (kdcLog string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := t.TempDir()
	r, err := realm.Up(ctx, realm.Options{Dir: filepath.Join(base, "r"), Users: 2, Services: 1, Fillers: -1, NoKadmind: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	// The package's helper lets the service user read the KDC log and
	// the profile, and walk to them (the realm directory is 0700).
	if out, err := exec.Command("/usr/libexec/krb5-exporter/grant-access", r.KDCLog, r.KDCConf, r.Krb5Conf).CombinedOutput(); err != nil {
		t.Fatalf("grant-access: %v %s", err, out)
	}

	// The snippet as printed, naming no log: the exporter follows what
	// the realm's kdc.conf says ([logging] kdc = FILE:...).
	pp := exec.CommandContext(ctx, "/usr/bin/krb5-exporter", "realm", "probe-principal",
		"--principal", "pkg-probe", "--kdc", r.KDCAddr)
	pp.Env = append(os.Environ(), r.Env()...)
	pp.Stderr = &bytes.Buffer{}
	snippet, err := pp.Output()
	if err != nil {
		t.Fatalf("realm probe-principal: %v: %s", err, pp.Stderr)
	}
	if err := os.WriteFile("/etc/krb5-exporter/config.yml", snippet, 0o640); err != nil {
		t.Fatal(err)
	}
	if out, err := asUser("/usr/bin/krb5-exporter", "--config.file", "/etc/krb5-exporter/config.yml", "--config.check").CombinedOutput(); err != nil {
		t.Fatalf("--config.check on the probe-principal configuration: %v\n%s\n%s", err, out, snippet)
	}

	// The unit's own command line, with systemd's socket hand-over.
	unit, err := os.ReadFile("/usr/lib/systemd/system/krb5-exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	var execStart []string
	for _, l := range strings.Split(string(unit), "\n") {
		if rest, ok := strings.CutPrefix(l, "ExecStart="); ok {
			execStart = strings.Fields(strings.ReplaceAll(rest, "$ARGS", ""))
		}
	}
	args := append(execStart[1:], "--collector.process.krb5kdc-pidfile="+r.KDCPidFile, "--collector.kdcconf.path="+r.KDCConf, "--collector.kdcconf.krb5-config="+r.Krb5Conf)
	base, logs, stop := startExporterAs(t, asUser().Args, execStart[0], args...)
	defer stop() // before the package and its user are removed
	url := base + "/metrics"

	// Once the exporter reads the log (the probe's lines show up), a real
	// client's login, for the log counter.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if v, _ := value(get(url), `krb5_kdc_log_probe_requests_total{request="as",status="ISSUE"}`); v >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter counted no probe login in the KDC log\n%s", logs.String())
		}
	}
	kinit := exec.CommandContext(ctx, "kinit", "-k", "-t", r.UserKeytab, r.User(1))
	kinit.Env = append(os.Environ(), r.Env()...)
	if out, err := kinit.CombinedOutput(); err != nil {
		t.Fatalf("kinit: %v %s", err, out)
	}
	want := map[string]func(float64) bool{
		`krb5_probe_success{exchange="as",target="local-kdc"}`:           func(v float64) bool { return v == 1 },
		`krb5_kdc_requests_total{request="as",status="ISSUE"}`:           func(v float64) bool { return v >= 1 },
		`krb5_kdc_log_read_errors_total{path="` + r.KDCLog + `"}`:        func(v float64) bool { return v == 0 },
		`krb5_process_up{program="krb5kdc"}`:                             func(v float64) bool { return v == 1 },
		`krb5_kdc_log_probe_requests_total{request="as",status="ISSUE"}`: func(v float64) bool { return v >= 1 },
	}
	var missing []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		body := get(url)
		missing = missing[:0]
		for series, ok := range want {
			v, found := value(body, series)
			if !found || !ok(v) {
				missing = append(missing, fmt.Sprintf("%s = %v (found %v)", series, v, found))
			}
		}
		if len(missing) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Fatalf("the installed exporter did not report: %v\nits log:\n%s", missing, logs.String())
	}
	if want := `msg="log source chosen from kdc.conf" type=kdc source=` + r.KDCLog; !strings.Contains(logs.String(), want) {
		t.Errorf("the exporter's log lacks %q:\n%s", want, logs.String())
	}
	// It really runs as the service user.
	pid, _ := exporterPids.Load(t.Name())
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if !regexp.MustCompile(`(?m)^Uid:\s+` + strconv.Itoa(mustUID(t)) + `\s`).Match(status) {
		t.Errorf("the exporter does not run as %s:\n%s", svcUser, status)
	}
	return r.KDCLog
}

func mustUID(t *testing.T) int {
	u, err := user.Lookup(svcUser)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(u.Uid)
	return n
}

func get(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// value finds a series (name{labels} as exposed) in an exposition.
func value(body, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// checkPIE fails unless path is a position-independent executable: an
// ELF shared object (ET_DYN) with an interpreter, as distributions build
// their binaries (the default Go build is ET_EXEC).
func checkPIE(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	interp := false
	for _, p := range f.Progs {
		interp = interp || p.Type == elf.PT_INTERP
	}
	if f.Type != elf.ET_DYN || !interp {
		t.Errorf("%s is a %v (interpreter: %v), want a PIE (ET_DYN with an interpreter)", path, f.Type, interp)
	}
}

// The Makefile's package target builds what buildPackages builds: a PIE.
func TestPackageTargetIsPIE(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, _ := strings.Cut(string(mk), "\npackage:\n")
	build, _, _ := strings.Cut(recipe, "\n")
	if !strings.Contains(build, " build ") || !strings.Contains(build, "-buildmode=pie") {
		t.Errorf("make package builds with %q, want -buildmode=pie", build)
	}
}
