package vmtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// kernelWant is what the guest's kernel must show: its release, the hooks
// the kdcservice collector must choose on it and whether it charges BPF
// maps to the memlock limit (before 5.11: the drop-in's second block).
type kernelWant struct {
	release string // uname -r's beginning
	hooks   string // "": the kernel has no BTF, the collector cannot trace
	memlock bool
	// noReattach: the kernel does not attach a trampoline program again
	// once its link is closed (ENOENT), which TestKDCServiceCost does.
	noReattach bool
}

// Debian 12's own 6.1 (TestDebian12) and the kernels TestKernel boots
// the same guest with, by KRB5X_VM_KERNEL (scripts/vm.sh). None has the
// socket tracepoints (6.3); each with BTF has BTF trampolines, so fentry.
// Ubuntu 20.04's OEM 5.14 (the only 5.14 the build can fetch, RHEL 9's
// being out of reach) was built without BTF.
var (
	debian12 = kernelWant{release: "6.1.", hooks: "fentry"}
	kernels  = map[string]kernelWant{
		"bullseye": {release: "5.10.", hooks: "fentry", memlock: true, noReattach: true}, // Debian 11
		"jammy":    {release: "5.15.", hooks: "fentry"},                                  // Ubuntu 22.04
		"focal514": {release: "5.14.", hooks: ""},                                        // Ubuntu 20.04 OEM, no BTF
		"bookworm": debian12,                                                             // Debian 12's own, as TestDebian12 boots it
	}
)

// hookPrograms are the programs each hook mode attaches (as the kernel
// names them), to the functions listed: what bpftool and the kernel's
// ftrace table must show. The modes that tax the host are tracepoint and
// syscalls.
var hookPrograms = map[string][]string{
	"socket":     {"sock_recv", "sock_send", "dev_queue"},
	"fentry":     {"fentry_recv", "fexit_recv", "fentry_send"},
	"kprobe":     {"kprobe_recv", "kretprobe_recv", "kprobe_send"},
	"tracepoint": {"tp_enter", "tp_exit"},
	"syscalls":   {"sys_enter", "sys_exit"},
}

// The functions the fentry and kprobe hooks are on.
var hookFunctions = []string{"inet_recvmsg", "inet6_recvmsg", "inet_sendmsg", "inet6_sendmsg"}

// checkHooks: the collector says (krb5_kdc_service_tracing_info) it took
// the hooks want, and the guest's kernel agrees: the programs loaded
// (bpftool prog show) are those hooks' and no other mode's, each is
// attached (bpftool link show), and for fentry and kprobes the kernel's
// ftrace table (enabled_functions) has the receive and send functions;
// no system call hook is loaded, whatever the collector says.
func checkHooks(t *testing.T, g *guest, want string) {
	t.Helper()
	mfs := g.scrape()
	if v, ok := value(mfs, "krb5_kdc_service_tracing_info", "hooks", want); !ok || v != 1 {
		t.Errorf("krb5_kdc_service_tracing_info: %v, want hooks=%q on %s", series(mfs, "krb5_kdc_service_tracing_info"), want, g.kernelRelease())
	}
	var progs []struct {
		ID   int    `json:"id"`
		Type string `json:"type"`
		Name string `json:"name"`
	}
	var links []struct {
		ProgID int    `json:"prog_id"`
		Type   string `json:"type"`
		TPName string `json:"tp_name"`
	}
	if err := json.Unmarshal([]byte(g.must("bpftool -j prog show")), &progs); err != nil {
		t.Fatalf("bpftool -j prog show: %v", err)
	}
	if err := json.Unmarshal([]byte(g.must("bpftool -j link show")), &links); err != nil {
		t.Fatalf("bpftool -j link show: %v", err)
	}
	// kprobes attach as perf events (bpf_link for them only from 5.15):
	// bpftool perf show lists each with its program and function.
	var perfs []struct {
		ProgID int    `json:"prog_id"`
		FDType string `json:"fd_type"`
		Func   string `json:"func"`
	}
	if err := json.Unmarshal([]byte(g.must("bpftool -j perf show")), &perfs); err != nil {
		t.Fatalf("bpftool -j perf show: %v", err)
	}
	probed := map[int]int{}
	for _, p := range perfs {
		if slices.Contains(hookFunctions, p.Func) {
			probed[p.ProgID]++
		}
	}
	linked := map[int]int{}
	for _, l := range links {
		linked[l.ProgID]++
		if l.TPName == "sys_enter" || l.TPName == "sys_exit" {
			t.Errorf("a program is on the %s tracepoint (every system call of the host): %+v", l.TPName, l)
		}
	}
	loaded := map[string]int{} // hook programs by name
	for _, p := range progs {
		for mode, names := range hookPrograms {
			if !slices.Contains(names, p.Name) {
				continue
			}
			loaded[p.Name]++
			switch {
			case mode != want:
				t.Errorf("program %s (id %d, %s) of the %s hooks is loaded, want the %s hooks' only", p.Name, p.ID, p.Type, mode, want)
			case (mode == "fentry" || mode == "socket") && linked[p.ID] != 1:
				t.Errorf("program %s (id %d) is in %d links, want 1", p.Name, p.ID, linked[p.ID])
			case mode == "kprobe" && probed[p.ID] != 2:
				t.Errorf("program %s (id %d) is on %d of the kprobed functions (bpftool perf show), want 2 (IPv4 and IPv6)", p.Name, p.ID, probed[p.ID])
			}
		}
	}
	for _, n := range hookPrograms[want] {
		if loaded[n] == 0 {
			t.Errorf("no program %s loaded (the %s hooks)", n, want)
		}
	}
	if want == "fentry" || want == "kprobe" {
		fns := g.must("f=/sys/kernel/tracing/enabled_functions; [ -r $f ] || mount -t tracefs tracefs /sys/kernel/tracing; cat $f")
		for _, fn := range hookFunctions {
			if !strings.Contains("\n"+fns, "\n"+fn+" ") {
				t.Errorf("the kernel's enabled_functions has no %s:\n%s", fn, fns)
			}
		}
	}
	out, _ := g.sh("journalctl -u krb5-exporter -b -o cat --no-pager | grep -F 'kdcservice collector:' | tail -n 1; bpftool link show; bpftool perf show")
	t.Logf("%s: hook programs loaded %v (want the %s hooks'); the collector's log, bpftool link show, perf show:\n%s", g.kernelRelease(), loaded, want, out)
}

// putBuilt builds a static binary with go (its arguments before the
// package: "build" or "test", "-c"; then the package) and installs it in
// the guest at path, executable by anyone.
func (g *guest) putBuilt(t *testing.T, path string, args ...string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(path))
	args = append(args[:len(args)-1:len(args)-1], "-o", bin, args[len(args)-1])
	cmd := exec.Command("go", args...)
	cmd.Dir = g.repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if out, err := g.vm("put", bin, path); err != nil {
		t.Fatalf("copying %s to the guest: %v\n%s", bin, err, out)
	}
	g.must("chmod 755 " + path)
}

func (g *guest) kernelRelease() string {
	g.t.Helper()
	return strings.TrimSpace(g.must("uname -r"))
}

// TestKernel is make test-vm-kernels: the Debian 12 guest of TestDebian12
// booted with another distribution's kernel (KRB5X_VM_KERNEL, see
// scripts/vm.sh: bullseye, Debian 11's 5.10; jammy, Ubuntu 22.04's 5.15;
// focal514, Ubuntu 20.04's OEM 5.14, without BTF), the package installed
// as the README says, and the kdcservice collector with the shipped
// drop-in: the hooks it takes on that kernel, as the kernel shows them,
// and the requests it times equal to the journal's (without BTF: that it
// cannot trace, and says so).
// With KRB5X_VM_COST=1, TestKDCServiceCost then runs in the guest with
// those hooks.
func TestKernel(t *testing.T) {
	name := os.Getenv("KRB5X_VM_KERNEL")
	if os.Getenv("KRB5X_VM_TEST") == "" || name == "" {
		t.Skip("make test-vm-kernels runs it (KRB5X_VM_TEST=1 KRB5X_VM_KERNEL=bullseye, jammy or focal514)")
	}
	k, ok := kernels[name]
	if !ok {
		t.Fatalf("KRB5X_VM_KERNEL=%s: no expectations for it here", name)
	}
	g := bootGuest(t)
	rel := g.kernelRelease()
	img, err := os.ReadFile(filepath.Join(g.image, "kernel-release"))
	if errors.Is(err, fs.ErrNotExist) && name == "bookworm" {
		// Debian 12's image may predate kernel-release: the kernel its
		// recipe installs is linux-image-amd64, whichever it is.
		img, err = []byte(rel), nil
	}
	if err != nil || strings.TrimSpace(string(img)) != rel || !strings.HasPrefix(rel, k.release) {
		t.Fatalf("the guest runs %s; the image's kernel is %q (%v), want %s*", rel, img, err, k.release)
	}
	t.Logf("guest kernel %s", rel)
	if !t.Run("realm", func(t *testing.T) { makeRealm(t, g) }) {
		t.FailNow()
	}
	if !t.Run("install as the README says", func(t *testing.T) { installAsREADME(t, g) }) {
		t.FailNow()
	}
	t.Run("counts", func(t *testing.T) {
		g.must(logins)
		checkCounts(t, g, counts{})
	})
	if !t.Run("kdcservice with the shipped drop-in", func(t *testing.T) { checkKDCService(t, g, k) }) {
		t.FailNow()
	}
	if k.hooks == "" {
		return // nothing to force or measure: no mode loads without BTF
	}
	t.Run("kprobe forced under the shipped drop-in", func(t *testing.T) { checkKprobeForced(t, g, k) })
	if os.Getenv("KRB5X_VM_COST") != "" {
		t.Run("TestKDCServiceCost in the guest", func(t *testing.T) {
			if k.noReattach {
				t.Skipf("%s does not attach a detached %s program again: the cost test's off and on phases cannot alternate", rel, k.hooks)
			}
			guestCost(t, g, k.hooks)
		})
	}
}

// guestCost runs collector's TestKDCServiceCost in the guest with the
// hooks the collector took there, phases of 1 s (emulated: attaching a
// trampoline alone takes longer than the default 50 ms), the exporter
// stopped; its figures go to the log.
func guestCost(t *testing.T, g *guest, hooks string) {
	g.putBuilt(t, "/root/collector.test", "test", "-c", "./collector")
	g.must("systemctl stop krb5-exporter")
	t0 := time.Now()
	out, err := g.sh(fmt.Sprintf("cd /root && KRB5_EXPORTER_KDCSERVICE_HOOKS=%s KRB5_EXPORTER_KDCSERVICE_COST_PHASE=1s ./collector.test -test.v -test.count=1 -test.timeout 30m -test.run '^TestKDCServiceCost$' 2>&1", hooks))
	t.Logf("TestKDCServiceCost in the guest (%s hooks, %v):\n%s", hooks, time.Since(t0).Round(time.Second), out)
	if err != nil {
		t.Errorf("TestKDCServiceCost failed in the guest: %v", err)
	}
}

// checkKprobeForced: the kprobe hooks, which the collector takes where the
// kernel has BTF but no trampolines for the functions, forced by a second
// drop-in beside the shipped one: the unit as the drop-in leaves it lets
// them attach (perf_event_open), the kernel shows them and no system call
// hook, and they time the journal's requests. The override removed, the
// collector takes the kernel's own choice again.
func checkKprobeForced(t *testing.T, g *guest, k kernelWant) {
	const override = "/etc/systemd/system/krb5-exporter.service.d/zz-hooks.conf"
	// Debian's kernels refuse perf_event_open to CAP_PERFMON above 2
	// (the drop-in's comment): set as it says, put back after.
	paranoid := strings.TrimSpace(g.must("sysctl -n kernel.perf_event_paranoid"))
	t.Logf("kernel.perf_event_paranoid was %s; 2 for the kprobe hooks", paranoid)
	g.must("sysctl -qw kernel.perf_event_paranoid=2")
	defer g.sh("sysctl -qw kernel.perf_event_paranoid=" + paranoid)
	g.put(override, []byte("[Service]\nEnvironment=KRB5_EXPORTER_KDCSERVICE_HOOKS=kprobe\n"))
	g.must("systemctl daemon-reload && systemctl restart krb5-exporter")
	waitTracing(t, g)
	t.Logf("missed returns once tracing: %v", missedReturns(g))
	checkHooks(t, g, "kprobe")
	t.Logf("missed returns after the hooks' checks: %v", missedReturns(g))
	checkTimedRequests(t, g)
	t.Logf("missed returns after two rounds of logins: %v", missedReturns(g))
	checkMissedReturns(t, g)
	// Through the kprobe PMU, not tracefs (root's alone): none listed here.
	t.Logf("kprobe_events under the unit:\n%s", g.must("cat /sys/kernel/tracing/kprobe_events"))
	g.must("rm " + override + " && systemctl daemon-reload && systemctl restart krb5-exporter")
	waitTracing(t, g)
	checkHooks(t, g, k.hooks)
}

// missedReturns is krb5_kdc_service_tracing_errors_total{reason="missed_return"}.
func missedReturns(g *guest) float64 {
	v, _ := value(g.scrape(), "krb5_kdc_service_tracing_errors_total", "reason", "missed_return")
	return v
}

// blockers is how many threads recvblock keeps in a receive: more than
// any kernel's default number of kretprobe instances on the guest's CPUs
// (the CPUs, or twice them and at least 10), which the collector cannot
// raise under the unit (no tracefs).
const blockers = 64

// checkMissedReturns: in kprobe mode an ordinary user's process keeping
// blockers threads in a receive takes every instance of the return
// probe, and the KDC's returns are missed: the program counts them
// (tracing_errors_total{reason="missed_return"}), tracing_up is 0, and
// the requests timed fall short of the journal's by exactly that (one
// receive a request: MIT's krb5kdc over UDP; the exporter's own probe's
// requests too, counted in the journal). With the process gone the count
// stays flat and every request is timed.
func checkMissedReturns(t *testing.T, g *guest) {
	g.putBuilt(t, "/tmp/recvblock", "build", "./vmtest/testdata/recvblock")
	type snap struct {
		journal, traced, missed int
		up                      float64
	}
	take := func() snap {
		var s snap
		for _, v := range g.journalCounts("") {
			s.journal += v
		}
		m := g.scrape()
		for _, req := range []string{"as", "tgs", "other"} {
			v, _ := value(m, "krb5_kdc_request_service_seconds", "request", req)
			s.traced += int(v)
		}
		v, _ := value(m, "krb5_kdc_service_tracing_errors_total", "reason", "missed_return")
		s.missed = int(v)
		s.up, _ = value(m, "krb5_kdc_service_tracing_up")
		return s
	}
	settled := func() snap {
		prev := take()
		for range 20 {
			time.Sleep(2 * time.Second)
			cur := take()
			if cur.journal == prev.journal && cur.traced == prev.traced && cur.missed == prev.missed {
				return cur
			}
			prev = cur
		}
		t.Fatalf("requests never settled: %+v", prev)
		return prev
	}
	blocked := func(pid string) int {
		return atoi(g.must("grep -l '^45 ' /proc/" + pid + "/task/*/syscall 2>/dev/null | wc -l"))
	}
	pid := strings.TrimSpace(g.must("runuser -u mallory -- bash -c 'setsid /tmp/recvblock " + fmt.Sprint(blockers) + " </dev/null >/dev/null 2>&1 & echo $!'"))
	defer g.sh("kill " + pid)
	eventually(t, 60*time.Second, fmt.Sprintf("%d threads of recvblock in recvfrom", blockers), func() string {
		if n := blocked(pid); n < blockers {
			return fmt.Sprintf("%d blocked", n)
		}
		return ""
	})
	s0 := settled()
	g.must(logins)
	g.must(logins)
	first := take() // the first scrape since the logins
	s1 := settled()
	dj, dt, dm := s1.journal-s0.journal, s1.traced-s0.traced, s1.missed-s0.missed
	t.Logf("%d threads of an ordinary user's process in a receive: %d requests in the journal, %d timed, %d returns missed (missed_return %d → %d); tracing_up %v at the first scrape after the logins",
		blocked(pid), dj, dt, dm, s0.missed, s1.missed, first.up)
	if dm <= 0 {
		t.Errorf("missed_return did not rise (%d → %d) with %d requests in the journal and %d timed", s0.missed, s1.missed, dj, dt)
	}
	if dt > dj || dj-dt != dm {
		t.Errorf("%d requests in the journal, %d timed: %d untimed, %d missed returns counted", dj, dt, dj-dt, dm)
	}
	if first.up != 0 {
		t.Errorf("krb5_kdc_service_tracing_up %v at the first scrape after %d missed returns, want 0", first.up, dm)
	}
	g.must("kill " + pid + "; for i in $(seq 50); do kill -0 " + pid + " 2>/dev/null || exit 0; sleep 0.2; done; exit 1")
	s2 := settled()
	g.must(logins)
	g.must(logins)
	s3 := settled()
	dj, dt, dm = s3.journal-s2.journal, s3.traced-s2.traced, s3.missed-s2.missed
	t.Logf("recvblock gone: %d requests in the journal, %d timed, %d returns missed; tracing_up %v", dj, dt, dm, s3.up)
	if dj == 0 || dt != dj || dm != 0 {
		t.Errorf("recvblock gone: %d requests in the journal, %d timed, %d returns missed; want all timed, none missed", dj, dt, dm)
	}
	if s3.up != 1 {
		t.Errorf("recvblock gone: tracing_up %v once the requests settled, want 1", s3.up)
	}
}
