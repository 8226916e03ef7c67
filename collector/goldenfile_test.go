package collector

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// TestGoldenFileFromProc checks every series of the golden file (the file,
// not a fresh scrape) against values worked out here from the fixture's
// raw /proc files and kdc.conf, with parsing of its own (string splitting,
// no procfs, none of the collector's code). A series in the file that
// this test cannot account for fails it too, so an -update that adds or
// changes a series must be explained here.
func TestGoldenFileFromProc(t *testing.T) {
	proc := filepath.Join(fixtureDir, "proc")
	want := goldenExpectations(t, proc)

	mfs := testutil.ReadExposition(t, goldenFile).MFs
	got := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName(), lp.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			got[seriesKey(name, labels...)] = v
		}
	}
	for k, v := range got {
		w, ok := want[k]
		switch {
		case !ok:
			t.Errorf("golden file has %s %v, which this test does not account for", k, v)
		case v != w:
			t.Errorf("golden file has %s %v; the fixture's files give %v", k, v, w)
		}
	}
	for k, w := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("golden file lacks %s (the fixture's files give %v)", k, w)
		}
	}
}

// seriesKey is name{l1="v1",...} with the labels sorted.
func seriesKey(name string, labels ...string) string {
	var pairs []string
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// goldenExpectations works out every series of a scrape of the fixture.
func goldenExpectations(t *testing.T, proc string) map[string]float64 {
	t.Helper()
	want := map[string]float64{}
	set := func(v float64, name string, labels ...string) { want[seriesKey(name, labels...)] = v }

	for _, c := range []string{"process", "network", "kdcconf", "replication"} {
		set(1, "krb5_exporter_collector_scrape_success", "collector", c)
	}
	set(0, "krb5_exporter_kdcconf_parse_errors_total")

	btime := 0.0
	for _, line := range readLines(t, filepath.Join(proc, "stat")) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			btime = parseNum(t, v)
		}
	}
	if btime == 0 {
		t.Fatal("no btime in the fixture's stat")
	}
	pageSize := float64(os.Getpagesize())

	// Programs: found by name (the fixture config has no pid files), the
	// zombie left out; the main process is the oldest whose parent is not
	// the same program, the others are workers.
	for _, prog := range []string{"krb5kdc", "kadmind", "kpropd"} {
		// Every process of the fixture runs as root (its status files).
		for _, r := range []string{"user", "executable", "unit", "pid_file"} {
			set(0, "krb5_exporter_process_rejected_total", "program", prog, "reason", r)
		}
		pids := fixturePIDs(t, proc, prog).live
		set(boolNum(len(pids) > 0), "krb5_process_up", "program", prog)
		set(float64(len(pids)), "krb5_process_processes", "program", prog)
		set(0, "krb5_process_restarts_total", "program", prog)
		if len(pids) == 0 {
			continue
		}
		// The fixture is a plain tree readable by its owner: every file
		// the collectors read could be read.
		for _, f := range []string{"fd", "status", "io", "limits"} {
			set(1, "krb5_exporter_proc_readable", "program", prog, "file", f)
		}
		if prog == "krb5kdc" {
			set(1, "krb5_exporter_proc_readable", "program", prog, "file", "fd_links")
		}
		stats := map[int]statLine{}
		for _, pid := range pids {
			stats[pid] = statFields(t, proc, pid)
		}
		var mainPID int
		var workers []int
		for _, pid := range pids {
			if _, child := stats[stats[pid].ppid]; child {
				workers = append(workers, pid)
			} else if mainPID == 0 || stats[pid].start < stats[mainPID].start {
				mainPID = pid
			}
		}
		var user, sys, rss, vms, threads, vol, nonvol, rd, wr, fds float64
		oldest := stats[mainPID].start
		for _, pid := range pids {
			st := stats[pid]
			user += st.utime
			sys += st.stime
			rss += st.rssPgs * pageSize
			vms += st.vsize
			threads += st.threads
			oldest = min(oldest, st.start)
			status := keyValues(t, filepath.Join(proc, strconv.Itoa(pid), "status"), ":")
			vol += status["voluntary_ctxt_switches"]
			nonvol += status["nonvoluntary_ctxt_switches"]
			io := keyValues(t, filepath.Join(proc, strconv.Itoa(pid), "io"), ":")
			rd += io["read_bytes"]
			wr += io["write_bytes"]
			entries, err := os.ReadDir(filepath.Join(proc, strconv.Itoa(pid), "fd"))
			if err != nil {
				t.Fatal(err)
			}
			fds += float64(len(entries))
		}
		// The main process's reaped children count too.
		user += stats[mainPID].cutime
		sys += stats[mainPID].cstime
		set(user/100, "krb5_process_cpu_seconds_total", "program", prog, "mode", "user")
		set(sys/100, "krb5_process_cpu_seconds_total", "program", prog, "mode", "system")
		set(rss, "krb5_process_resident_memory_bytes", "program", prog)
		set(vms, "krb5_process_virtual_memory_bytes", "program", prog)
		set(threads, "krb5_process_threads", "program", prog)
		set(btime+oldest/100, "krb5_process_start_time_seconds", "program", prog)
		set(vol, "krb5_process_context_switches_total", "program", prog, "ctxswitch", "voluntary")
		set(nonvol, "krb5_process_context_switches_total", "program", prog, "ctxswitch", "nonvoluntary")
		set(rd, "krb5_process_io_read_bytes_total", "program", prog)
		set(wr, "krb5_process_io_write_bytes_total", "program", prog)
		set(fds, "krb5_process_open_fds", "program", prog)
		for _, line := range readLines(t, filepath.Join(proc, strconv.Itoa(mainPID), "limits")) {
			if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
				set(parseNum(t, strings.Fields(rest)[0]), "krb5_process_max_fds", "program", prog)
			}
		}
		if prog != "krb5kdc" {
			continue
		}
		// Workers get indexes by age, then pid.
		sort.Slice(workers, func(i, j int) bool {
			a, b := stats[workers[i]], stats[workers[j]]
			return a.start < b.start || a.start == b.start && workers[i] < workers[j]
		})
		set(float64(len(workers)), "krb5_kdc_workers")
		for i, pid := range workers {
			w := strconv.Itoa(i)
			set(stats[pid].utime/100, "krb5_kdc_worker_cpu_seconds_total", "worker", w, "mode", "user")
			set(stats[pid].stime/100, "krb5_kdc_worker_cpu_seconds_total", "worker", w, "mode", "system")
			set(btime+stats[pid].start/100, "krb5_kdc_worker_start_time_seconds", "worker", w)
		}
		b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(mainPID), "cmdline"))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(string(b), "\x00")
		if i := slices.Index(args, "-w"); i > 0 {
			set(parseNum(t, args[i+1]), "krb5_kdc_workers_configured")
		}
		goldenNetwork(t, proc, workers[0], set)
	}

	// kdc.conf: the one realm, its database and enctypes, MIT defaults
	// where the file says nothing (db2, backlog 5), SPAKE from krb5.conf.
	conf := string(must(os.ReadFile(filepath.Join(fixtureDir, "kdc.conf"))))
	krb5 := string(must(os.ReadFile(filepath.Join(fixtureDir, "krb5.conf"))))
	backlog := 5.0
	if v := confValue(conf, "kdc_tcp_listen_backlog"); v != "" {
		backlog = parseNum(t, v)
	}
	set(backlog, "krb5_kdcconf_tcp_listen_backlog")
	realm := "PERF.TEST"
	if !strings.Contains(conf, "\t"+realm+" = {") {
		t.Fatalf("kdc.conf has no realm %s", realm)
	}
	set(1, "krb5_kdcconf_info", "realm", realm, "db_library", confValue(conf, "db_library"),
		"disable_last_success", confValue(conf, "disable_last_success"), "disable_lockout", "false",
		"spake_groups", confValue(krb5, "spake_preauth_groups"))
	for _, e := range strings.Fields(confValue(conf, "supported_enctypes")) {
		name, _, _ := strings.Cut(e, ":")
		weak := strings.HasPrefix(name, "des") || strings.HasPrefix(name, "arcfour") || strings.HasPrefix(name, "rc4")
		set(1, "krb5_kdcconf_supported_enctype", "realm", realm, "enctype", name, "weak", strconv.FormatBool(weak))
	}
	set(fixtureDBSize, "krb5_kdc_database_size_bytes", "realm", realm)
	// replication: the fixture's realm has no iprop_enable (MIT's default
	// is off), so no update log is read and no marker exists.
	if strings.Contains(conf, "iprop_enable") {
		t.Fatal("the fixture's kdc.conf sets iprop_enable; account for its update log here")
	}
	set(0, "krb5_iprop_enabled", "realm", realm)
	set(float64(fixtureDBTime.Unix()), "krb5_kdc_database_modified_time_seconds", "realm", realm)
	return want
}

// goldenNetwork works out the socket and host counter series from the net
// files of the worker that holds the KDC's sockets.
func goldenNetwork(t *testing.T, proc string, worker int, set func(float64, string, ...string)) {
	t.Helper()
	dir := filepath.Join(proc, strconv.Itoa(worker))
	inodes := map[string]bool{}
	entries, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, "fd", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if in, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	// Lines of net/udp and net/tcp: sl local remote st tx:rx ... inode.
	sockets := func(names ...string) [][]string {
		var out [][]string
		for _, name := range names {
			for _, line := range readLines(t, filepath.Join(dir, "net", name))[1:] {
				out = append(out, strings.Fields(line))
			}
		}
		return out
	}
	hexAddr := func(a string) (string, int) {
		ip, port, _ := strings.Cut(a, ":")
		p, err := strconv.ParseUint(port, 16, 16)
		if err != nil || (len(ip) != 8 && len(ip) != 32) {
			t.Fatalf("address %q: not an address of the capture", a)
		}
		if len(ip) == 32 { // IPv6: four 32-bit words, each printed in host (little-endian) order
			b := make(net.IP, 0, 16)
			for i := 0; i < 32; i += 8 {
				n, _ := strconv.ParseUint(ip[i:i+8], 16, 32)
				b = append(b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
			}
			return fmt.Sprintf("[%s]:%d", b, p), int(p)
		}
		n, _ := strconv.ParseUint(ip, 16, 32)
		return fmt.Sprintf("%d.%d.%d.%d:%d", n&0xff, n>>8&0xff, n>>16&0xff, n>>24, p), int(p)
	}
	rxQueue := func(f []string) float64 {
		_, rx, _ := strings.Cut(f[4], ":")
		v, err := strconv.ParseUint(rx, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		return float64(v)
	}
	// The IPv6 host counters are reported only while the KDC has an IPv6
	// UDP socket.
	kdcUDP6 := false
	for _, f := range sockets("udp6") {
		kdcUDP6 = kdcUDP6 || f[3] == "07" && inodes[f[9]]
	}
	for _, f := range sockets("udp", "udp6") {
		if f[3] == "07" && inodes[f[9]] {
			addr, _ := hexAddr(f[1])
			set(rxQueue(f), "krb5_kdc_udp_receive_queue_bytes", "address", addr)
			set(parseNum(t, f[12]), "krb5_kdc_udp_drops_total", "address", addr)
		}
	}
	somaxconn := parseNum(t, strings.TrimSpace(string(must(os.ReadFile(filepath.Join(proc, "sys/net/core/somaxconn"))))))
	backlog := 5.0 // MIT's default; the fixture's kdc.conf sets none
	kdcPort := 0
	tcp := sockets("tcp", "tcp6")
	for _, f := range tcp {
		if f[3] == "0A" && inodes[f[9]] {
			addr, port := hexAddr(f[1])
			kdcPort = port
			set(rxQueue(f), "krb5_kdc_tcp_listen_queue_length", "address", addr)
			set(min(backlog, somaxconn), "krb5_kdc_tcp_listen_queue_limit", "address", addr)
		}
	}
	states := map[string]string{"01": "established", "03": "syn_recv", "04": "fin_wait1", "05": "fin_wait2",
		"06": "time_wait", "08": "close_wait", "09": "last_ack", "0B": "closing"}
	counts := map[string]float64{}
	for _, f := range tcp {
		if _, port := hexAddr(f[1]); port == kdcPort && f[3] != "0A" {
			counts[states[f[3]]]++
		}
	}
	for _, name := range states {
		set(counts[name], "krb5_kdc_tcp_connections", "state", name)
	}

	// Host counters: /proc/net/snmp and netstat are pairs of lines (names,
	// values); snmp6 is "name value" lines.
	table := func(file, prefix string) map[string]float64 {
		var names []string
		m := map[string]float64{}
		for _, line := range readLines(t, filepath.Join(dir, "net", file)) {
			rest, ok := strings.CutPrefix(line, prefix+" ")
			if !ok {
				continue
			}
			if names == nil {
				names = strings.Fields(rest)
				continue
			}
			for i, v := range strings.Fields(rest) {
				m[names[i]] = parseNum(t, v)
			}
			break
		}
		return m
	}
	udp, tcpExt := table("snmp", "Udp:"), table("netstat", "TcpExt:")
	udp6 := keyValues(t, filepath.Join(dir, "net", "snmp6"), "")
	set(udp["RcvbufErrors"], "krb5_host_udp_receive_buffer_errors_total", "proto", "udp")
	set(udp["InErrors"], "krb5_host_udp_in_errors_total", "proto", "udp")
	if kdcUDP6 {
		set(udp6["Udp6RcvbufErrors"], "krb5_host_udp_receive_buffer_errors_total", "proto", "udp6")
		set(udp6["Udp6InErrors"], "krb5_host_udp_in_errors_total", "proto", "udp6")
	}
	set(tcpExt["ListenOverflows"], "krb5_host_tcp_listen_overflows_total")
	set(tcpExt["ListenDrops"], "krb5_host_tcp_listen_drops_total")
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// keyValues reads "key<sep> value" lines (sep "" for whitespace only).
func keyValues(t *testing.T, path, sep string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	for _, line := range readLines(t, path) {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasSuffix(f[0], sep) {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				m[strings.TrimSuffix(f[0], sep)] = v
			}
		}
	}
	return m
}

// confValue is the value of the first "key = value" line of a profile.
func confValue(conf, key string) string {
	for _, line := range strings.Split(conf, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " = "); ok && k == key {
			return v
		}
	}
	return ""
}

func parseNum(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func boolNum(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestHostCountersColumns: the fixture's host counters are all 0, which a
// wrong column would read as well. Here every number of the worker's
// net/snmp, snmp6 and netstat is made distinct (its line and column), and
// each host counter must be the one under its own name.
//
// The worker gets an IPv6 UDP socket on [::1]:88 (an fd and its line in
// net/udp6): without one, the IPv6 counters are not reported (TestGolden).
func TestHostCountersColumns(t *testing.T) {
	root := editableFixture(t)
	net := filepath.Join(root, strconv.Itoa(fxWorker0), "net")
	if err := os.Symlink("socket:[999001]", filepath.Join(root, strconv.Itoa(fxWorker0), "fd", "99")); err != nil {
		t.Fatal(err)
	}
	udp6 := readLines(t, filepath.Join(net, "udp6"))
	udp6 = append(udp6, "    9: 00000000000000000000000001000000:0058 00000000000000000000000000000000:0000 07 00000000:00000100 00:00000000 00000000     0        0 999001 2 0000000000000000 7")
	if err := os.WriteFile(filepath.Join(net, "udp6"), []byte(strings.Join(udp6, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"snmp", "netstat", "snmp6"} {
		lines := readLines(t, filepath.Join(net, name))
		for i, line := range lines {
			f := strings.Fields(line)
			for j := range f {
				if _, err := strconv.ParseFloat(f[j], 64); err == nil {
					f[j] = strconv.Itoa(1000*(i+1) + j)
				}
			}
			lines[i] = strings.Join(f, " ")
		}
		if err := os.WriteFile(filepath.Join(net, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, reg := newTestCollector(t, fixtureConfig(t, root))
	s := gather(t, reg)
	want := map[string]float64{}
	goldenNetwork(t, root, fxWorker0, func(v float64, name string, labels ...string) {
		if strings.HasPrefix(name, "krb5_host_") {
			want[seriesKey(name, labels...)] = v
		}
	})
	if len(want) != 6 {
		t.Fatalf("%d host counters worked out, want 6: %v", len(want), want)
	}
	seen := map[float64]bool{}
	for k, w := range want {
		name, labels := k[:strings.IndexByte(k, '{')], strings.Trim(k[strings.IndexByte(k, '{'):], "{}")
		var pairs []string
		if labels != "" {
			l, v, _ := strings.Cut(labels, "=")
			pairs = []string{l, strings.Trim(v, `"`)}
		}
		if got := s.Value(name, pairs...); got != w {
			t.Errorf("%s = %v, want %v", k, got, w)
		}
		if seen[w] {
			t.Errorf("%s: value %v not distinct, the test proves less", k, w)
		}
		seen[w] = true
	}
}
