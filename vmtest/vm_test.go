// Package vmtest is `make test-vm`: the package on a real Debian 12 host,
// a VM (scripts/vm.sh) with Debian's own kernel, systemd and MIT krb5,
// installed as the README says and checked against the guest's own record
// (the journal, /proc, systemd). Run only with KRB5X_VM_TEST=1 (make
// test-vm), as root; see docs/testing.md.
package vmtest

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

const (
	realmName = "KRB5X.TEST"      // the realm debconf gave the image
	kdcHost   = "kdc1.krb5x.test" // the guest's name
	probePrin = "krb5-exporter-probe@" + realmName
	unitDir   = "/usr/lib/systemd/system/"
	config    = "/etc/krb5-exporter/config.yml"
	srcDir    = "/root/krb5-exporter" // where the README's commands run in the guest
)

// The README's placeholders and what they are in the guest.
var readmeSubst = strings.NewReplacer("EXAMPLE.COM", realmName, "kdc1.example.com", kdcHost)

// readmeInstall returns the commands of the ```sh block under the
// README's "## Install on a KDC host" heading, one a line.
func readmeInstall(t *testing.T, repo string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	state := 0 // 0 before the heading, 1 before the block, 2 in it
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case state == 0 && strings.HasPrefix(l, "## Install on a KDC host"):
			state = 1
		case state == 1 && strings.HasPrefix(l, "## "):
			t.Fatal(`README.md: no "sh" block under "## Install on a KDC host"`)
		case state == 1 && l == "```sh":
			state = 2
		case state == 2 && l == "```":
			return lines
		case state == 2:
			if c := strings.TrimSpace(l); c != "" && !strings.HasPrefix(c, "#") {
				lines = append(lines, l)
			}
		}
	}
	t.Fatal(`README.md: no "## Install on a KDC host" section with a closed "sh" block`)
	return nil
}

// mergeProbe is the README's "$EDITOR ... merge /tmp/probe.yml (modules,
// probes, probe_principals)" done by a program: the snippet's sections
// added to the configuration (maps merged key by key, lists appended), and
// its log entries' probe_principals given to the configuration's log
// entries of the same type (the snippet's entry added when there is
// none).
func mergeProbe(cfg, snippet []byte) ([]byte, error) {
	var c, s map[string]any
	if err := yaml.Unmarshal(cfg, &c); err != nil {
		return nil, fmt.Errorf("config.yml: %w", err)
	}
	if err := yaml.Unmarshal(snippet, &s); err != nil {
		return nil, fmt.Errorf("probe.yml: %w", err)
	}
	if c == nil {
		c = map[string]any{}
	}
	for k, v := range s {
		if k == "logs" {
			c[k] = mergeLogs(c[k], v)
			continue
		}
		switch v := v.(type) {
		case map[string]any:
			m, _ := c[k].(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			for mk, mv := range v {
				m[mk] = mv
			}
			c[k] = m
		case []any:
			l, _ := c[k].([]any)
			c[k] = append(l, v...)
		default:
			c[k] = v
		}
	}
	return yaml.Marshal(c)
}

func mergeLogs(cfg, snippet any) any {
	logs, _ := cfg.([]any)
	add, _ := snippet.([]any)
	for _, a := range add {
		am, _ := a.(map[string]any)
		merged := false
		for _, l := range logs {
			if lm, _ := l.(map[string]any); lm != nil && lm["type"] == am["type"] {
				if pp, ok := am["probe_principals"]; ok {
					lm["probe_principals"] = pp
				}
				merged = true
			}
		}
		if !merged {
			logs = append(logs, a)
		}
	}
	return logs
}

// uncommentDropIn turns the shipped kdcservice.conf into the drop-in its
// comments describe: the lines from "#[Service]" up to the first bare "#"
// uncommented and, for a kernel before 5.11 (memlock), the commented
// settings under "# Kernels before 5.11" up to the next bare "#".
func uncommentDropIn(t *testing.T, shipped string, memlock bool) string {
	var out []string
	in, inMem := false, false
	for _, l := range strings.Split(shipped, "\n") {
		switch {
		case l == "#[Service]":
			in = true
		case in && l == "#":
			in = false
		case memlock && strings.HasPrefix(l, "# Kernels before 5.11"):
			inMem = true
		case inMem && l == "#":
			inMem = false
		}
		if in || inMem && len(l) > 1 && l[1] != ' ' {
			l = strings.TrimPrefix(l, "#")
		}
		out = append(out, l)
	}
	d := strings.Join(out, "\n")
	if !strings.Contains(d, "\n[Service]\n") || !strings.Contains(d, "\nAmbientCapabilities=") {
		t.Fatalf("kdcservice.conf: no \"#[Service]\" block to uncomment:\n%s", shipped)
	}
	if memlock && !strings.Contains(d, "\nAmbientCapabilities=CAP_SYS_RESOURCE") {
		t.Fatalf("kdcservice.conf: no \"# Kernels before 5.11\" block to uncomment:\n%s", shipped)
	}
	return d
}

// logins makes the requests counted: a good login and a service ticket,
// a wrong password, an unknown principal and an unknown service.
const logins = `set -u
echo alicepw | kinit alice >/dev/null
kvno host/` + kdcHost + ` >/dev/null
kvno nosuch/` + kdcHost + ` >/dev/null 2>&1 && exit 1
echo wrong | kinit alice >/dev/null 2>&1 && exit 1
echo x | kinit nosuchuser >/dev/null 2>&1 && exit 1
kdestroy
exit 0
`

// TestDebian12 installs the package on Debian 12 in a VM and checks it
// against the guest's own record; the steps run in order, each a subtest.
func TestDebian12(t *testing.T) {
	if os.Getenv("KRB5X_VM_TEST") == "" {
		t.Skip("make test-vm runs it (KRB5X_VM_TEST=1): boots a Debian 12 VM")
	}
	if os.Getenv("KRB5X_VM_KERNEL") != "" {
		t.Fatal("KRB5X_VM_KERNEL is TestKernel's (make test-vm-kernels): TestDebian12 runs Debian 12's own kernel")
	}
	g := bootGuest(t)

	if !t.Run("realm", func(t *testing.T) { makeRealm(t, g) }) {
		t.FailNow()
	}
	if !t.Run("install as the README says", func(t *testing.T) { installAsREADME(t, g) }) {
		t.FailNow()
	}

	t.Run("hardened service", func(t *testing.T) { checkHardened(t, g, 0) })
	t.Run("process metrics of the units' main pids", func(t *testing.T) { checkProcesses(t, g) })
	t.Run("probe", func(t *testing.T) { checkProbe(t, g) })

	// Counting: krb5_kdc_requests_total against the KDC's journal, the
	// probe's own requests left out (probe_principals), from base on:
	// the journal's counts when the exporter (re)started.
	base := counts{} // no login before the README's steps
	t.Run("counts", func(t *testing.T) {
		g.must(logins)
		checkCounts(t, g, base)
	})
	t.Run("forged journal lines", func(t *testing.T) { checkForged(t, g, base) })
	t.Run("counts across a KDC restart", func(t *testing.T) {
		g.must("systemctl restart krb5-kdc")
		g.must(logins)
		checkCounts(t, g, base)
		checkProcesses(t, g)
	})
	t.Run("counts across an exporter restart", func(t *testing.T) {
		checkCounts(t, g, base)
		base = g.journalCounts(probePrin)
		g.must("systemctl stop krb5-exporter")
		g.must(logins)
		g.must("systemctl start krb5-exporter")
		g.must(logins)
		checkCounts(t, g, base)
	})
	t.Run("counts across a reboot", func(t *testing.T) {
		checkCounts(t, g, base)
		base = g.journalCounts(probePrin)
		t0 := time.Now()
		if out, err := g.vm("reboot"); err != nil {
			t.Fatalf("scripts/vm.sh reboot: %v\n%s", err, out)
		}
		t.Logf("guest rebooted in %v", time.Since(t0).Round(time.Second))
		g.must("systemctl is-system-running --wait >/dev/null || true")
		g.must(logins)
		checkCounts(t, g, base)
		checkHardened(t, g, 0)
		checkProcesses(t, g)
		checkProbe(t, g)
	})
	t.Run("a namesake is not the KDC", func(t *testing.T) { checkNamesake(t, g) })
	t.Run("kdcservice with the shipped drop-in", func(t *testing.T) { checkKDCService(t, g, debian12) })
	// Last: the KDC no longer logs to the journal after it.
	t.Run("file logging as RHEL's krb5.conf has it", func(t *testing.T) { checkFileLogging(t, g) })
}

// bootGuest builds (or reuses) the image of scripts/vm.sh, for the kernel
// KRB5X_VM_KERNEL names (none: Debian 12's), and boots it; the VM is
// stopped when the test ends.
func bootGuest(t *testing.T) *guest {
	if os.Getuid() != 0 {
		if testutil.InCI() {
			t.Fatal("make test-vm needs root (mmdebstrap, the image cache)")
		}
		t.Skip("make test-vm needs root (mmdebstrap, the image cache)")
	}
	for _, p := range []string{"mmdebstrap", "qemu-system-x86_64", "qemu-img", "mke2fs", "ssh", "ssh-keygen", "flock", "make"} {
		testutil.RequireProgram(t, p)
	}
	start := time.Now()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	g := &guest{t: t, repo: repo, state: filepath.Join(os.TempDir(), fmt.Sprintf("krb5x-vmtest-%d", os.Getpid()))}

	t0 := time.Now()
	out, err := g.vm("build")
	if err != nil {
		t.Fatalf("scripts/vm.sh build: %v\n%s", err, out)
	}
	g.image = strings.TrimSpace(out[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:])
	t.Logf("image ready in %v: %s", time.Since(t0).Round(time.Second), g.image)
	t0 = time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(g.state, "console.log")); err == nil {
				os.WriteFile(filepath.Join(os.TempDir(), "krb5x-vmtest-console.log"), b, 0o600)
				t.Logf("the guest's serial console: %s", filepath.Join(os.TempDir(), "krb5x-vmtest-console.log"))
			}
		}
		g.vm("stop")
		t.Logf("make test-vm's test took %v", time.Since(start).Round(time.Second))
	})
	if out, err := g.vm("boot"); err != nil {
		t.Fatalf("scripts/vm.sh boot: %v\n%s", err, out)
	}
	t.Logf("guest booted in %v (including waiting for %s)", time.Since(t0).Round(time.Second), "/tmp/krb5x-vm.lock")
	return g
}

// checkFileLogging: with RHEL's [logging] in krb5.conf (the KDC writes
// FILE:/var/log/krb5kdc.log, mode 0600 as RHEL's logrotate creates it),
// the unchanged packaged configuration follows that file once the
// exporter restarts (the unit's ExecStartPre grants the file's ACL), and
// counts what the file says.
func checkFileLogging(t *testing.T, g *guest) {
	const kdcLog = "/var/log/krb5kdc.log"
	if out := g.must("cat /etc/krb5.conf"); strings.Contains(out, "[logging]") {
		t.Fatalf("the guest's krb5.conf already has [logging]:\n%s", out)
	}
	// Debian's units make / read-only to the KDC and kadmind
	// (ReadOnlyDirectories=/): RHEL's do not, which a drop-in restores.
	g.must(`set -e
printf '\n[logging]\n default = FILE:/var/log/krb5libs.log\n kdc = FILE:%s\n admin_server = FILE:/var/log/kadmind.log\n' ` + kdcLog + ` >>/etc/krb5.conf
for u in krb5-kdc krb5-admin-server; do
	install -d /etc/systemd/system/$u.service.d
	printf '[Service]\nReadWriteDirectories=/var/log\n' >/etc/systemd/system/$u.service.d/as-rhel.conf
done
systemctl daemon-reload
systemctl restart krb5-kdc krb5-admin-server
chmod 600 ` + kdcLog + ` /var/log/kadmind.log
systemctl restart krb5-exporter`)
	if !eventually(t, 60*time.Second, "the exporter following "+kdcLog, func() string {
		out, _ := g.sh("journalctl -u krb5-exporter --since -2min -o cat --no-pager | grep -F 'following log' | grep -F " + kdcLog)
		if strings.TrimSpace(out) == "" {
			return "no \"following log\" line for " + kdcLog
		}
		return ""
	}) {
		out, _ := g.sh("journalctl -u krb5-exporter -n 30 --no-pager")
		t.Fatalf("the exporter's log:\n%s", out)
	}
	type snap struct{ file, metrics counts }
	take := func() snap { return snap{g.fileCounts(kdcLog, probePrin), metricCounts(g.scrape())} }
	// Settled: two readings 2 s apart alike (the exporter may still be
	// reading what the file held when it started).
	s0 := take()
	for i := 0; ; i++ {
		time.Sleep(2 * time.Second)
		cur := take()
		if cur.file.equal(s0.file) && cur.metrics.equal(s0.metrics) {
			break
		}
		if i == 20 {
			t.Fatalf("never settled: %+v", cur)
		}
		s0 = cur
	}
	g.must(logins)
	g.must(logins)
	eventually(t, 90*time.Second, "krb5_kdc_requests_total grown as "+kdcLog, func() string {
		s := take()
		df, dm := s.file.minus(s0.file), s.metrics.minus(s0.metrics)
		if len(df) == 0 {
			return "no request in " + kdcLog
		}
		if !df.equal(dm) {
			return fmt.Sprintf("metrics %v, %s %v", dm, kdcLog, df)
		}
		return ""
	})
	if v, ok := value(g.scrape(), "krb5_kdc_log_source_missing", "type", "kdc"); ok && v != 0 {
		t.Errorf("krb5_kdc_log_source_missing{type=\"kdc\"} = %v", v)
	}
}

func makeRealm(t *testing.T, g *guest) {
	kdcConf := g.must("cat /etc/krb5kdc/kdc.conf")
	if strings.Contains(kdcConf, "[logging]") || !strings.Contains(kdcConf, realmName) {
		t.Fatalf("Debian's kdc.conf for %s without [logging] expected:\n%s", realmName, kdcConf)
	}
	// krb5_newrealm reads the master password twice from its input.
	g.must("printf 'masterpw\\nmasterpw\\n' | krb5_newrealm >/dev/null")
	g.must(`kadmin.local -q 'addprinc -pw alicepw alice' >/dev/null
kadmin.local -q 'addprinc -randkey host/` + kdcHost + `' >/dev/null
systemctl is-active krb5-kdc krb5-admin-server`)
	if j := g.must("test -d /var/log/journal && echo persistent"); !strings.Contains(j, "persistent") {
		t.Fatal("the guest's journal is not persistent: the reboot step cannot compare")
	}
}

// installAsREADME runs the README's install commands: `make` lines here
// (the package is built on this machine), the others in the guest in a
// directory holding dist/ with the package just built; the $EDITOR line is
// the scripted merge; the last line (curl | grep) is retried while the
// restarted exporter comes up.
func installAsREADME(t *testing.T, g *guest) {
	lines := readmeInstall(t, g.repo)
	g.must("mkdir -p " + srcDir + "/dist")
	for i, l := range lines {
		l = readmeSubst.Replace(l)
		switch {
		case strings.HasPrefix(l, "make "):
			t0 := time.Now()
			cmd := exec.Command("bash", "-c", l)
			cmd.Dir = g.repo
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("README: %s: %v\n%s", l, err, out)
			}
			t.Logf("README, here: %s (%v)", l, time.Since(t0).Round(time.Second))
			debs, _ := filepath.Glob(filepath.Join(g.repo, "dist", "krb5-exporter_*.deb"))
			var newest string
			var newestT time.Time
			for _, d := range debs {
				if fi, err := os.Stat(d); err == nil && fi.ModTime().After(newestT) {
					newest, newestT = d, fi.ModTime()
				}
			}
			if newest == "" {
				t.Fatalf("README: %s made no dist/krb5-exporter_*.deb", l)
			}
			if out, err := g.vm("put", newest, srcDir+"/dist/"+filepath.Base(newest)); err != nil {
				t.Fatalf("copying %s to the guest: %v\n%s", newest, err, out)
			}
		case strings.HasPrefix(l, "$EDITOR "):
			merged, err := mergeProbe(g.get(config), g.get("/tmp/probe.yml"))
			if err != nil {
				t.Fatalf("README: %s: %v", l, err)
			}
			g.put(config, merged)
			t.Logf("README, merged /tmp/probe.yml into %s:\n%s", config, merged)
		case i == len(lines)-1:
			var out string
			eventually(t, 60*time.Second, "README: "+l, func() string {
				var err error
				if out, err = g.sh("cd " + srcDir + " && " + l); err != nil {
					return fmt.Sprintf("%v: %s", err, out)
				}
				return ""
			})
			t.Logf("README, guest: %s\n%s", l, out)
		default:
			out, err := g.sh("cd " + srcDir + " && " + l)
			if err != nil {
				t.Fatalf("README, guest: %s: %v\n%s", l, err, out)
			}
			t.Logf("README, guest: %s\n%s", l, out)
		}
	}
}

var reExposure = regexp.MustCompile(`Overall exposure level for krb5-exporter.service: ([0-9.]+)`)

// The capabilities of the kdcservice drop-in, as /proc/PID/status shows
// them: CAP_BPF and CAP_PERFMON, with CAP_SYS_RESOURCE before 5.11.
const (
	capsBPF     = uint64(1)<<38 | uint64(1)<<39 // CAP_PERFMON, CAP_BPF
	capsMemlock = capsBPF | uint64(1)<<24       // and CAP_SYS_RESOURCE
)

// checkHardened: the service runs, from the shipped unit, as its user with
// no capability (or exactly caps, those of the kdcservice drop-in), no
// new privileges and a seccomp filter, as the kernel says; without the
// drop-in, systemd-analyze gives the README's exposure level.
func checkHardened(t *testing.T, g *guest, caps uint64) {
	bpf := caps != 0
	if out, err := g.sh("systemctl is-active krb5-exporter"); err != nil {
		t.Fatalf("krb5-exporter not active: %s\n%s", out, g.status("krb5-exporter"))
	}
	props := g.must("systemctl show -p DropInPaths krb5-exporter")
	// Debian's systemd names /lib, the same directory (merged /usr).
	if unit := g.must("readlink -f $(systemctl show -p FragmentPath --value krb5-exporter)"); unit != unitDir+"krb5-exporter.service\n" {
		t.Errorf("not the shipped unit: %s", unit)
	}
	pid := g.mainPID("krb5-exporter")
	st := g.must(fmt.Sprintf("cat /proc/%d/status; id -u krb5-exporter", pid))
	lines := strings.Split(strings.TrimSpace(st), "\n")
	uid := lines[len(lines)-1]
	capHex := fmt.Sprintf("%016x", caps)
	want := map[string]string{
		"Uid":        strings.Repeat(uid+"\t", 3) + uid,
		"CapEff":     capHex,
		"CapPrm":     capHex,
		"CapBnd":     capHex,
		"NoNewPrivs": "1",
		"Seccomp":    "2",
	}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ":")
		if w, in := want[k]; ok && in {
			if got := strings.TrimSpace(v); got != w {
				t.Errorf("krb5-exporter (pid %d) %s: %q, want %q", pid, k, got, w)
			}
			delete(want, k)
		}
	}
	for k := range want {
		t.Errorf("/proc/%d/status has no %s", pid, k)
	}
	if bpf {
		return
	}
	if !strings.Contains(props, "DropInPaths=\n") {
		t.Errorf("drop-ins on the unit: %s", props)
	}
	readme, err := os.ReadFile(filepath.Join(g.repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile("`systemd-analyze security` exposure ([0-9]+\\.[0-9])").FindSubmatch(readme)
	sec, _ := g.sh("systemd-analyze security krb5-exporter")
	m := reExposure.FindStringSubmatch(sec)
	switch {
	case quoted == nil:
		t.Error("README.md quotes no `systemd-analyze security` exposure level")
	case m == nil:
		t.Errorf("systemd-analyze security printed no exposure level:\n%s", sec)
	case m[1] != string(quoted[1]):
		t.Errorf("exposure level %s in the guest, README.md says %s", m[1], quoted[1])
	}
}

// checkProcesses: the process metrics of krb5kdc and kadmind are those of
// the units' main pids (start time, threads, fd limit from /proc).
func checkProcesses(t *testing.T, g *guest) {
	for _, u := range []struct{ unit, program string }{{"krb5-kdc", "krb5kdc"}, {"krb5-admin-server", "kadmind"}} {
		eventually(t, 60*time.Second, u.program+"'s metrics of "+u.unit+"'s main pid", func() string {
			pid := g.mainPID(u.unit)
			start := g.procStart(pid)
			threads := strings.TrimSpace(g.must(fmt.Sprintf("awk '/^Threads:/{print $2}' /proc/%d/status", pid)))
			children := strings.TrimSpace(g.must(fmt.Sprintf("pgrep -c -P %d -x %s || true", pid, u.program)))
			mfs := g.scrape()
			if mfs == nil {
				return "no /metrics"
			}
			var why []string
			check := func(name, want string, got float64, ok bool) {
				if !ok {
					why = append(why, name+" absent")
				} else if fmt.Sprint(got) != want {
					why = append(why, fmt.Sprintf("%s %v, want %s", name, got, want))
				}
			}
			up, ok := value(mfs, "krb5_process_up", "program", u.program)
			check("krb5_process_up", "1", up, ok)
			n, ok := value(mfs, "krb5_process_processes", "program", u.program)
			check("krb5_process_processes", fmt.Sprint(1+atoi(children)), n, ok)
			th, ok := value(mfs, "krb5_process_threads", "program", u.program)
			if atoi(children) == 0 {
				check("krb5_process_threads", threads, th, ok)
			}
			st, ok := value(mfs, "krb5_process_start_time_seconds", "program", u.program)
			if !ok {
				why = append(why, "krb5_process_start_time_seconds absent")
			} else if math.Abs(st-start) > 0.015 {
				why = append(why, fmt.Sprintf("krb5_process_start_time_seconds %.2f, main pid %d started at %.2f", st, pid, start))
			}
			return strings.Join(why, "; ")
		})
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

func checkProbe(t *testing.T, g *guest) {
	eventually(t, 90*time.Second, "krb5_probe_success{exchange=\"as\"} 1", func() string {
		mfs := g.scrape()
		if v, ok := value(mfs, "krb5_probe_success", "exchange", "as"); !ok || v != 1 {
			return fmt.Sprintf("krb5_probe_success: %v", series(mfs, "krb5_probe_success"))
		}
		return ""
	})
}

// checkCounts: krb5_kdc_requests_total equals the KDC's journal since
// base, the probe's requests left out.
func checkCounts(t *testing.T, g *guest, base counts) {
	eventually(t, 90*time.Second, "krb5_kdc_requests_total equal to journalctl -u krb5-kdc", func() string {
		want := g.journalCounts(probePrin).minus(base)
		mfs := g.scrape()
		if mfs == nil {
			return "no /metrics"
		}
		got := metricCounts(mfs)
		if !got.equal(want) {
			return fmt.Sprintf("metrics %v, journal %v", got, want)
		}
		if len(want) == 0 {
			return "no request in the journal: nothing compared"
		}
		return ""
	})
}

// checkForged: lines that look like the KDC's, sent to the journal by an
// ordinary user (logger -t krb5kdc, with the KDC's pid too, and
// systemd-cat -t krb5kdc), count nowhere. A real login after them shows
// the exporter has read past them.
func checkForged(t *testing.T, g *guest, base counts) {
	real := g.must("journalctl -u krb5-kdc -o cat --no-pager | grep -m1 '^AS_REQ.*: ISSUE: .* alice@'")
	forged := strings.ReplaceAll(strings.TrimSpace(real), "alice@", "forged@")
	q := "'" + strings.ReplaceAll(forged, "'", `'\''`) + "'"
	kdcPID := g.mainPID("krb5-kdc")
	before := metricCounts(g.scrape())
	g.must(fmt.Sprintf(`runuser -u mallory -- logger -t krb5kdc %[1]s
runuser -u mallory -- logger -t krb5kdc --id=%[2]d %[1]s
printf '%%s\n' %[1]s | runuser -u mallory -- systemd-cat -t krb5kdc
runuser -u mallory -- logger -t krb5kdc -p auth.info %[1]s`, q, kdcPID))
	if n := strings.TrimSpace(g.must("journalctl -t krb5kdc -o cat --no-pager | grep -c forged@ || true")); atoi(n) < 4 {
		t.Fatalf("the forged lines are not in the journal (%s of 4)", n)
	}
	g.must(logins)
	checkCounts(t, g, base)
	after := metricCounts(g.scrape())
	t.Logf("counts before the forged lines %v, after them and one more round of logins %v", before, after)
}

// checkNamesake: an ordinary user's process named krb5kdc is not the KDC:
// not counted with it, and not keeping it up while the real one is
// stopped.
func checkNamesake(t *testing.T, g *guest) {
	pid := strings.TrimSpace(g.must(`runuser -u mallory -- bash -c 'cp /bin/sleep /tmp/krb5kdc && cd /tmp && (setsid ./krb5kdc 900 </dev/null >/dev/null 2>&1 & echo $!)'`))
	defer g.sh("kill " + pid)
	checkProcesses(t, g)
	g.must("systemctl stop krb5-kdc")
	defer g.sh("systemctl start krb5-kdc")
	eventually(t, 60*time.Second, `krb5_process_up{program="krb5kdc"} 0 with krb5-kdc stopped and a namesake running`, func() string {
		mfs := g.scrape()
		if v, ok := value(mfs, "krb5_process_up", "program", "krb5kdc"); !ok || v != 0 {
			return fmt.Sprintf("krb5_process_up %v (present %v)", v, ok)
		}
		return ""
	})
}

// checkKDCService: with the shipped drop-in uncommented as the guest's
// kernel needs and --collector.kdcservice, the eBPF collector traces the
// KDC with the hooks the kernel must get (checkHooks) and times every
// request the journal shows (the probe's included: the kernel does not
// know principals).
func checkKDCService(t *testing.T, g *guest, k kernelWant) {
	dropIn := uncommentDropIn(t, string(g.get("/usr/share/doc/krb5-exporter/examples/kdcservice.conf")), k.memlock)
	g.must("install -d /etc/systemd/system/krb5-exporter.service.d")
	g.put("/etc/systemd/system/krb5-exporter.service.d/kdcservice.conf", []byte(dropIn))
	def := string(g.get("/etc/default/krb5-exporter"))
	if !strings.Contains(def, "\nARGS=\"\"\n") {
		t.Fatalf("/etc/default/krb5-exporter has no ARGS=\"\":\n%s", def)
	}
	g.put("/etc/default/krb5-exporter", []byte(strings.Replace(def, "\nARGS=\"\"\n", "\nARGS=\"--collector.kdcservice\"\n", 1)))
	g.must("systemctl daemon-reload && systemctl restart krb5-exporter")
	caps := capsBPF
	if k.memlock {
		caps = capsMemlock
	}
	checkHardened(t, g, caps)
	if k.hooks == "" {
		checkNotTraced(t, g)
		return
	}
	waitTracing(t, g)
	checkHooks(t, g, k.hooks)
	checkTimedRequests(t, g)
	// Trampolines see every return (kprobes may not: checkMissedReturns).
	if m, _ := value(g.scrape(), "krb5_kdc_service_tracing_errors_total", "reason", "missed_return"); m != 0 {
		t.Errorf("%v receives' returns missed with the %s hooks", m, k.hooks)
	}
}

// checkNotTraced: on a kernel without BTF (the kernel's own
// /sys/kernel/btf/vmlinux absent) the collector loads nothing and says so
// (tracing_up 0, unsupported_kernel counted once, one log line), and the
// exporter goes on counting the journal's requests.
func checkNotTraced(t *testing.T, g *guest) {
	if out, err := g.sh("test ! -e /sys/kernel/btf/vmlinux && grep -x '# CONFIG_DEBUG_INFO_BTF is not set' /boot/config-$(uname -r)"); err != nil {
		t.Fatalf("the guest's kernel has BTF after all (%v: %s): give it the hooks it must get", err, out)
	}
	eventually(t, 60*time.Second, `krb5_kdc_service_tracing_up 0 and krb5_kdc_service_tracing_errors_total{reason="unsupported_kernel"} 1`, func() string {
		mfs := g.scrape()
		up, okUp := value(mfs, "krb5_kdc_service_tracing_up")
		e, okE := value(mfs, "krb5_kdc_service_tracing_errors_total", "reason", "unsupported_kernel")
		if !okUp || up != 0 || !okE || e != 1 || mfs["krb5_kdc_service_tracing_info"] != nil {
			return fmt.Sprintf("tracing_up %v (present %v), errors %v, info %v", up, okUp, series(mfs, "krb5_kdc_service_tracing_errors_total"), series(mfs, "krb5_kdc_service_tracing_info"))
		}
		return ""
	})
	logged := g.must("journalctl -b -o cat --no-pager _PID=$(systemctl show -p MainPID --value krb5-exporter) | grep -F 'kdcservice collector:' || true")
	if n := strings.Count(logged, "\n"); n != 1 || !strings.Contains(logged, "cannot trace krb5kdc") || !strings.Contains(logged, "unsupported_kernel") {
		t.Errorf("the collector's log lines (%d), want one saying it cannot trace, unsupported_kernel:\n%s", n, logged)
	}
	if progs := g.must("bpftool prog show"); strings.Contains(progs, "sched_switch") {
		t.Errorf("a kdcservice program is loaded:\n%s", progs)
	}
	// The restarted exporter counts from its start: the journal's since.
	base := g.journalCounts(probePrin)
	g.must(logins)
	checkCounts(t, g, base)
	t.Logf("the collector's log: %s", logged)
}

// waitTracing waits for krb5_kdc_service_tracing_up 1; else it fails the
// test with the exporter's log.
func waitTracing(t *testing.T, g *guest) {
	t.Helper()
	if !eventually(t, 60*time.Second, "krb5_kdc_service_tracing_up 1", func() string {
		mfs := g.scrape()
		if v, ok := value(mfs, "krb5_kdc_service_tracing_up"); !ok || v != 1 {
			return fmt.Sprintf("tracing_up %v (present %v), errors %v", v, ok, series(mfs, "krb5_kdc_service_tracing_errors_total"))
		}
		return ""
	}) {
		out, _ := g.sh("journalctl -u krb5-exporter -n 30 --no-pager")
		t.Fatalf("the exporter's log:\n%s", out)
	}
}

// checkTimedRequests: two rounds of logins, and the requests the
// kdcservice collector timed, by type, equal the KDC journal's.
func checkTimedRequests(t *testing.T, g *guest) {
	t.Helper()
	// Requests by type, from the journal (all of them) and as timed.
	type snap struct{ journal, traced counts }
	take := func() snap {
		j := counts{}
		for k, v := range g.journalCounts("") {
			req, _, _ := strings.Cut(k, "/")
			j[req] += v
		}
		tr := counts{}
		m := g.scrape()
		for _, req := range []string{"as", "tgs", "other"} {
			if v, ok := value(m, "krb5_kdc_request_service_seconds", "request", req); ok && v != 0 {
				tr[req] = int(v)
			}
		}
		return snap{j, tr}
	}
	// A moment without a request in flight: two readings 2 s apart alike.
	settled := func() snap {
		prev := take()
		for i := 0; i < 20; i++ {
			time.Sleep(2 * time.Second)
			cur := take()
			if cur.journal.equal(prev.journal) && cur.traced.equal(prev.traced) {
				return cur
			}
			prev = cur
		}
		t.Fatalf("requests never settled: %+v", prev)
		return prev
	}
	s0 := settled()
	g.must(logins)
	g.must(logins)
	eventually(t, 90*time.Second, "requests timed by kdcservice equal to the journal's", func() string {
		s := take()
		dj, dt := s.journal.minus(s0.journal), s.traced.minus(s0.traced)
		if !dj.equal(dt) {
			return fmt.Sprintf("traced %v, journal %v", dt, dj)
		}
		t.Logf("requests timed by kdcservice %v, in the journal %v", dt, dj)
		return ""
	})
}
