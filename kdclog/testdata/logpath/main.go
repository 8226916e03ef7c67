// Command logpath measures the log path end to end: the exporter binary
// following a KDC log file from its start until every line is counted,
// against a bare byte scanner that only reads and parses the same lines
// (kdclog.Parser), each a whole process pinned to one CPU with taskset, in
// lines per CPU-second, the runs interleaved in one invocation:
//
//	scripts/logpath-bench.sh            # builds both, writes the log, runs this
//	logpath -exporter BIN -log FILE -cpu 1 -runs 5
//
// The exporter's CPU time is read from /proc/PID/task/*/schedstat
// (nanoseconds, all threads, start-up and GC included) once it has read
// the whole file (/proc/PID/io rchar) and gone idle; then one scrape
// checks that krb5_kdc_log_lines_read_total and
// krb5_kdc_log_lines_parsed_total both reached the file's line count (if
// they had not, the wait goes on and the scrape's cost is counted too:
// the run says so). The scanner prints its count and waits on stdin, so
// that its CPU time is read the same way.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/kdclog"
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == "scan" {
		if err := scan(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "logpath scan:", err)
			os.Exit(1)
		}
		return
	}
	exporter := flag.String("exporter", "", "the krb5-exporter binary")
	logPath := flag.String("log", "", "the KDC log file (kdclog's benchmark log: go test ./kdclog -run TestWriteBenchLog -benchlog FILE)")
	cpu := flag.String("cpu", "1", "the CPU every process is pinned to (taskset -c)")
	runs := flag.Int("runs", 5, "runs of each mode")
	modes := flag.String("modes", "exporter,exporter-attack-off,scanner", "modes to run, in turn (exporter, exporter-attack-off, exporter-follow, exporter-talkers-off, scanner, baseline)")
	baseline := flag.String("baseline", "", "another krb5-exporter binary (built at another commit), run as mode baseline with the default configuration: before/after in one run")
	ref := flag.String("ref", "scanner", "the mode the same-run ratios are against (exporter-talkers-off: the top talkers' cost)")
	keep := flag.Bool("v", false, "print every run")
	flag.Parse()
	if *exporter == "" || *logPath == "" {
		flag.Usage()
		os.Exit(2)
	}
	ms := strings.Split(*modes, ",")
	if *baseline != "" && !slices.Contains(ms, "baseline") {
		ms = append(ms, "baseline")
	}
	if !slices.Contains(ms, *ref) {
		fmt.Fprintf(os.Stderr, "logpath: -ref %s is not among the modes %s\n", *ref, *modes)
		os.Exit(2)
	}
	if err := run(*exporter, *baseline, *logPath, *cpu, *runs, ms, *ref, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "logpath:", err)
		os.Exit(1)
	}
}

// scan is the bare scanner: read the file in 256 KiB chunks (the
// tailer's buffer size), split lines, parse each with one Parser.
func scan(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var p kdclog.Parser
	var e kdclog.Event
	buf := make([]byte, 256<<10)
	start, end := 0, 0
	parsed, lines := 0, 0
	for {
		if end == len(buf) {
			copy(buf, buf[start:end])
			end -= start
			start = 0
		}
		n, err := f.Read(buf[end:])
		end += n
		for {
			j := bytes.IndexByte(buf[start:end], '\n')
			if j < 0 {
				break
			}
			lines++
			if p.Parse(buf[start:start+j], &e) {
				parsed++
			}
			start += j + 1
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	fmt.Println(lines, parsed)
	io.Copy(io.Discard, os.Stdin) // until the driver has read our CPU time
	return nil
}

type result struct {
	cpu    []float64 // seconds per run
	extra  int       // runs whose CPU includes a verifying scrape
	ratios []float64 // against the reference mode in the same round
}

func run(exporter, baseline, logPath, cpu string, runs int, modes []string, ref string, verbose bool) error {
	abs, err := filepath.Abs(logPath)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(abs) // also puts it in the page cache
	if err != nil {
		return err
	}
	n := bytes.Count(data, []byte{'\n'})
	size := int64(len(data))
	data = nil
	self, err := os.Executable()
	if err != nil {
		return err
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("log %s: %d lines, %.1f MB; pinned to CPU %s; %d runs of each mode, in turn; load average %s", abs, n, float64(size)/1e6, cpu, runs, load)
	res := map[string]*result{}
	for _, m := range modes {
		res[m] = &result{}
	}
	for r := 0; r < runs; r++ {
		round := map[string]float64{}
		for j := range modes {
			m := modes[(r+j)%len(modes)]
			var secs float64
			var extra bool
			switch m {
			case "scanner":
				secs, err = runScanner(self, abs, cpu, n)
			case "baseline":
				if baseline == "" {
					return errors.New("mode baseline needs -baseline BIN")
				}
				secs, extra, err = runExporter(baseline, abs, cpu, "exporter", n, size)
			default:
				secs, extra, err = runExporter(exporter, abs, cpu, m, n, size)
			}
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", r+1, m, err)
			}
			round[m] = secs
			res[m].cpu = append(res[m].cpu, secs)
			if extra {
				res[m].extra++
			}
			if verbose {
				fmt.Printf("run %d %-22s %.3f CPU-s %10.0f lines/CPU-s\n", r+1, m, secs, float64(n)/secs)
			}
		}
		for m, s := range round {
			res[m].ratios = append(res[m].ratios, round[ref]/s)
		}
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("%-22s %14s %14s %14s %22s\n", "mode", "median", "min", "max", "vs "+ref+", same run")
	for _, m := range modes {
		r := res[m]
		med, lo, hi := stats(r.cpu)
		rm, rlo, rhi := stats(r.ratios)
		ratio := fmt.Sprintf("%.2fx (%.2f-%.2f)", rm, rlo, rhi)
		fmt.Printf("%-22s %11.2f M/s %11.2f M/s %11.2f M/s %22s", m, float64(n)/med/1e6, float64(n)/hi/1e6, float64(n)/lo/1e6, ratio)
		if r.extra > 0 {
			fmt.Printf("  (%d runs include a verifying scrape)", r.extra)
		}
		fmt.Println()
	}
	fmt.Printf("lines per CPU-second of the whole process (user+system, all threads); median, slowest and fastest run; load average at the end %s", load)
	return nil
}

func runScanner(self, path, cpu string, n int) (float64, error) {
	cmd := exec.Command("taskset", "-c", cpu, self, "scan", path)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("scanner: %w", err)
	}
	secs, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	var lines, parsed int
	fmt.Sscan(line, &lines, &parsed)
	if lines != n || parsed != n {
		return 0, fmt.Errorf("scanner: %d lines, %d parsed, of %d", lines, parsed, n)
	}
	return secs, nil
}

// runExporter starts the exporter (taskset replaces itself with it, so
// the pid is the exporter's) following path from its start and returns
// its CPU time once every line is counted.
func runExporter(bin, path, cpu, mode string, n int, size int64) (float64, bool, error) {
	dir, err := os.MkdirTemp("", "logpath-")
	if err != nil {
		return 0, false, err
	}
	defer os.RemoveAll(dir)
	conf := fmt.Sprintf("logs:\n  - path: %s\n    type: kdc\n    start_at: beginning\n    probe_principals: [krb5-exporter-probe@PERF.TEST]\n", path)
	switch mode {
	case "exporter":
	case "exporter-attack-off":
		conf += "attack_signals:\n  disabled: true\n"
	case "exporter-follow":
		conf += "attack_signals:\n  follow_logins: true\n  follow_service_tickets: true\n"
	case "exporter-talkers-off":
		conf += "top_talkers:\n  disabled: true\n"
	default:
		return 0, false, fmt.Errorf("unknown mode %q", mode)
	}
	if err := os.WriteFile(filepath.Join(dir, "c.yml"), []byte(conf), 0o644); err != nil {
		return 0, false, err
	}
	port, err := freePort()
	if err != nil {
		return 0, false, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command("taskset", "-c", cpu, bin, "--config.file", filepath.Join(dir, "c.yml"),
		"--web.listen-address", addr, "--kdclog.position-file", filepath.Join(dir, "pos.json"), "--log.level", "error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, false, err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	pid := cmd.Process.Pid
	deadline := time.Now().Add(2 * time.Minute)
	scraped := false
	for {
		if time.Now().After(deadline) {
			return 0, false, errors.New("exporter did not count every line within 2 minutes")
		}
		time.Sleep(5 * time.Millisecond)
		if rchar(pid) < size {
			continue
		}
		// Read the whole file: idle once 10 ms pass without 0.1 ms of CPU.
		c0, err := cpuSeconds(pid)
		if err != nil {
			return 0, false, err
		}
		time.Sleep(10 * time.Millisecond)
		c1, err := cpuSeconds(pid)
		if err != nil {
			return 0, false, err
		}
		if c1-c0 > 100e-6 {
			continue
		}
		read, parsed, err := counters(addr, path)
		if err != nil {
			return 0, false, err
		}
		if read == n && parsed == n {
			return c1, scraped, nil
		}
		if read > n || parsed > n {
			return 0, false, fmt.Errorf("exporter counted %d read, %d parsed of %d lines", read, parsed, n)
		}
		scraped = true
	}
}

// counters scrapes the exporter's lines read and parsed for path.
func counters(addr, path string) (read, parsed int, err error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		for name, dst := range map[string]*int{"krb5_kdc_log_lines_read_total": &read, "krb5_kdc_log_lines_parsed_total": &parsed} {
			if strings.HasPrefix(l, name+"{") && strings.Contains(l, `path="`+path+`"`) {
				v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
				if err != nil {
					return 0, 0, fmt.Errorf("%q: %w", l, err)
				}
				*dst = int(v)
			}
		}
	}
	return read, parsed, sc.Err()
}

// rchar is the bytes pid has read (any read or pread), -1 if unknown.
func rchar(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// cpuSeconds is the CPU time of all threads of pid (schedstat: nanoseconds).
func cpuSeconds(pid int) (float64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no threads of %d: %v", pid, err)
	}
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that exited
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			ns += v
		}
	}
	return float64(ns) / 1e9, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func stats(v []float64) (median, lo, hi float64) {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := len(s) / 2
	median = s[m]
	if len(s)%2 == 0 {
		median = (s[m-1] + s[m]) / 2
	}
	return median, s[0], s[len(s)-1]
}
