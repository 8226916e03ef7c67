// Command scrapecost measures the CPU time one scrape costs this package's
// collectors and prometheus-process-exporter, watching the same real
// krb5kdc -w N and kadmind processes, in the same run:
//
//	go run ./collector/testdata/scrapecost -scrapes 200
//
// It starts a harness realm, runs each exporter as its own process on
// loopback, then scrapes them in turn (in a new random order each round) and
// takes each exporter's CPU time from /proc/PID/task/*/schedstat
// (nanoseconds) before and after every scrape. Our side is this package's
// collectors plus the Go and process collectors a real exporter binary
// has, behind internal/web.MetricsHandler (promhttp, gzip at BestSpeed).
// Both exporters watch exactly the realm's daemons: ours through their
// pid files, process-exporter through a comm+cmdline matcher on the realm
// directory. With -others 100,2000 it measures once per count with that
// many idle other processes on the host, and prints each exporter's open
// files too.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/collector"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/internal/web"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "scrapecost serve:", err)
			os.Exit(1)
		}
		return
	}
	scrapes := flag.Int("scrapes", 200, "scrapes of each exporter")
	workers := flag.Int("workers", 2, "krb5kdc -w N")
	pe := flag.String("process-exporter", "/usr/bin/prometheus-process-exporter", "prometheus-process-exporter binary")
	baseline := flag.String("baseline", "", "a scrapecost binary built from another commit, run as one more exporter (before/after in one run)")
	cpus := flag.String("cpu", "", "pin every exporter to these CPUs (taskset -c LIST), so that none runs next to the scraper or the KDC by chance of placement")
	others := flag.String("others", "", "comma-separated counts of idle other processes to start on the host, one measurement each (e.g. 100,2000,10000)")
	flag.Parse()
	var counts []int
	for _, f := range strings.Split(*others, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			fmt.Fprintln(os.Stderr, "scrapecost: -others: not a count:", f)
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	if len(counts) == 0 {
		counts = []int{0}
	}
	pin = *cpus
	if err := run(*scrapes, *workers, *pe, *baseline, counts); err != nil {
		fmt.Fprintln(os.Stderr, "scrapecost:", err)
		os.Exit(1)
	}
}

// serve is the child running our collectors: prints its address, serves
// until stdin closes.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	cfg := collector.DefaultConfig()
	fs.StringVar(&cfg.KDCPidFile, "kdc-pidfile", "", "")
	fs.StringVar(&cfg.KadmindPidFile, "kadmind-pidfile", "", "")
	fs.StringVar(&cfg.KpropdPidFile, "kpropd-pidfile", "", "")
	fs.StringVar(&cfg.KDCConfPath, "kdcconf", "", "")
	fs.StringVar(&cfg.Krb5ConfPath, "krb5conf", "", "")
	conns := fs.Bool("tcp-connections", false, "")
	floor := fs.Bool("floor", false, "only the Go and process collectors")
	fs.Parse(args)
	cfg.TCPConnections = *conns
	c, err := collector.New(log.NewLogfmtLogger(os.Stderr), cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if !*floor {
		reg.MustRegister(c)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().String())
	go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	return http.Serve(l, web.MetricsHandler(reg, promhttp.HandlerOpts{}))
}

// pin is -cpu: the CPU list every exporter runs on ("": anywhere).
var pin string

// command is exec.Command, under taskset -c pin when pinned (taskset
// execs the program: the pid is the exporter's).
func command(bin string, args ...string) *exec.Cmd {
	if pin == "" {
		return exec.Command(bin, args...)
	}
	return exec.Command("taskset", append([]string{"-c", pin, bin}, args...)...)
}

type exporter struct {
	name    string
	url     string
	pid     int
	cpu     []float64 // ns per scrape
	bytes   int
	samples int
	fds     int // open files after the scrapes
}

func run(scrapes, workers int, peBin, baseline string, others []int) error {
	if _, err := os.Stat(peBin); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp("", "scrapecost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r, err := realm.Up(ctx, realm.Options{Dir: filepath.Join(tmp, "realm"), Users: 5, Services: 2, Fillers: -1, Workers: workers})
	if err != nil {
		return err
	}
	defer r.Down()
	// Up returns once the KDC answers: wait (30 s at most) for all its
	// workers and kadmind, so that every exporter sees all of them.
	for deadline := time.Now().Add(30 * time.Second); len(r.KDCPids()) < workers+1 || r.KadmindPid() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("after 30 s: krb5kdc pids %v, kadmind %d", r.KDCPids(), r.KadmindPid())
		}
	}
	fmt.Printf("realm: krb5kdc -w %d (%d processes), kadmind %d\n", workers, len(r.KDCPids()), r.KadmindPid())

	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"serve", "-kdc-pidfile", r.KDCPidFile, "-kadmind-pidfile", r.KadmindPidFile,
		"-kpropd-pidfile", filepath.Join(r.Dir, "kpropd.pid"), "-kdcconf", r.KDCConf, "-krb5conf", r.Krb5Conf}
	var exps []*exporter
	ourSide := []struct {
		name, bin string
		args      []string
	}{
		{"krb5-exporter collectors", self, args},
		{"krb5-exporter, --collector.network.tcp-connections", self, append(args[:len(args):len(args)], "-tcp-connections")},
		{"floor: Go and process collectors only, same handler", self, append(args[:len(args):len(args)], "-floor")},
		// The default configuration: daemons found by name among all the
		// machine's processes, as process-exporter finds them (other KDCs
		// running on this machine are counted too).
		{"krb5-exporter collectors, by name (no pid files)", self, []string{"serve", "-kdcconf", r.KDCConf, "-krb5conf", r.Krb5Conf}},
	}
	if baseline != "" {
		// An older build may not know -tcp-connections: defaults only.
		ourSide = append(ourSide, struct {
			name, bin string
			args      []string
		}{"baseline " + filepath.Base(baseline), baseline, args},
			struct {
				name, bin string
				args      []string
			}{"baseline " + filepath.Base(baseline) + ", by name", baseline, []string{"serve", "-kdcconf", r.KDCConf, "-krb5conf", r.Krb5Conf}})
	}
	for _, o := range ourSide {
		cmd := command(o.bin, o.args...)
		cmd.Stderr = os.Stderr
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			return err
		}
		defer func() { stdin.Close(); cmd.Wait() }()
		addr, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
		exps = append(exps, &exporter{name: o.name, url: "http://" + strings.TrimSpace(addr) + "/metrics", pid: cmd.Process.Pid})
	}

	// process-exporter, matching the realm's daemons only.
	peConf := filepath.Join(tmp, "process-exporter.yml")
	conf := fmt.Sprintf("process_names:\n  - name: \"{{.Comm}}\"\n    comm: [krb5kdc, kadmind]\n    cmdline: [%q]\n", regexp.QuoteMeta(r.Dir+"/"))
	if err := os.WriteFile(peConf, []byte(conf), 0o644); err != nil {
		return err
	}
	for _, v := range []struct {
		name string
		args []string
	}{
		{"process-exporter (defaults)", nil},
		{"process-exporter -gather-smaps=false -threads=false", []string{"-gather-smaps=false", "-threads=false"}},
	} {
		// Port 0: the kernel picks a port nobody holds, and it is read
		// back from the process's own listening socket (a port probed
		// and released here could be taken meanwhile).
		args := append([]string{"-config.path", peConf, "-web.listen-address", "127.0.0.1:0"}, v.args...)
		cmd := command(peBin, args...)
		if err := cmd.Start(); err != nil {
			return err
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		addr, err := listenAddr(cmd.Process.Pid)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		exps = append(exps, &exporter{name: v.name, url: "http://" + addr + "/metrics", pid: cmd.Process.Pid})
	}
	for _, e := range exps {
		if err := waitUp(e.url); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	for _, n := range others {
		if err := measure(exps, scrapes, n); err != nil {
			return err
		}
	}
	return nil
}

// measure starts n idle processes (none when 0), scrapes every exporter
// in turn, prints the table and stops the processes.
func measure(exps []*exporter, scrapes, n int) error {
	if n > 0 {
		idle, err := testutil.StartIdle(n, 10*time.Minute)
		if err != nil {
			return err
		}
		defer idle.Stop()
	}
	for _, e := range exps {
		e.cpu = e.cpu[:0]
		for i := 0; i < 5; i++ { // warm up: first scrapes allocate caches
			if _, _, err := scrape(e.url); err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
		}
	}
	// A new order each round: rotating one order ((i+j) mod n) kept every
	// exporter behind the same neighbour, whose scrape left the caches in
	// its own state (the same binary measured twice in one run differed by
	// 0.15 ms in the last position it had). Seeded, so runs repeat.
	rng := rand.New(rand.NewPCG(38, uint64(n)))
	order := make([]*exporter, len(exps))
	copy(order, exps)
	for i := 0; i < scrapes; i++ {
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, e := range order {
			before, err := cpuNS(e.pid)
			if err != nil {
				return err
			}
			n, samples, err := scrape(e.url)
			if err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
			time.Sleep(20 * time.Millisecond) // let work after the response (GC) land
			after, err := cpuNS(e.pid)
			if err != nil {
				return err
			}
			e.cpu = append(e.cpu, float64(after-before))
			e.bytes, e.samples = n, samples
		}
	}
	for _, e := range exps {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", e.pid))
		if err != nil {
			return err
		}
		e.fds = len(fds)
	}
	procs, _ := os.ReadDir("/proc")
	fmt.Printf("%d idle other processes started (%d entries in /proc); %d scrapes each, CPU time per scrape of the exporter process (all threads, schedstat):\n", n, len(procs), scrapes)
	fmt.Printf("%-55s %10s %10s %10s %8s %8s %8s %6s\n", "exporter", "median", "p90", "mean", "series", "bytes", "ratio", "fds")
	var peMedian float64
	for _, e := range exps {
		if strings.HasPrefix(e.name, "process-exporter (defaults)") {
			peMedian, _, _ = stats(e.cpu)
		}
	}
	for _, e := range exps {
		med, p90, mean := stats(e.cpu)
		fmt.Printf("%-55s %8.2fms %8.2fms %8.2fms %8d %8d %7.2fx %6d\n", e.name, med/1e6, p90/1e6, mean/1e6, e.samples, e.bytes, med/peMedian, e.fds)
	}
	fmt.Println("ratio: median over the median of process-exporter (defaults) in this run; fds: the exporter's open files after the scrapes")
	return nil
}

// listenAddr waits (15 s at most) for process pid to listen on TCP and
// returns the address: its socket inodes from /proc/PID/fd, matched in
// /proc/PID/net/tcp.
func listenAddr(pid int) (string, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return "", err
	}
	nfs, err := procfs.NewFS(fmt.Sprintf("/proc/%d", pid))
	if err != nil {
		return "", err
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			return "", err
		}
		inodes := map[string]bool{}
		for _, t := range targets {
			if s, ok := strings.CutPrefix(t, "socket:["); ok {
				inodes[strings.TrimSuffix(s, "]")] = true
			}
		}
		lines, err := nfs.NetTCP()
		if err != nil {
			return "", err
		}
		for _, l := range lines {
			if l.St == 0x0A && inodes[strconv.FormatUint(l.Inode, 10)] {
				return net.JoinHostPort(l.LocalAddr.String(), strconv.FormatUint(l.LocalPort, 10)), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("pid %d not listening on TCP after 15 s", pid)
		}
	}
}

func waitUp(url string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, _, err := scrape(url)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A scrape of process-exporter with 10,000 processes on a loaded machine
// takes seconds.
var client = &http.Client{Timeout: 60 * time.Second}

// scrape fetches the page and counts its samples.
func scrape(url string) (bytes, samples int, err error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			samples++
		}
	}
	return len(body), samples, nil
}

// cpuNS is the CPU time of all threads of pid, in nanoseconds.
func cpuNS(pid int) (uint64, error) {
	threads, err := procfs.AllThreads(pid)
	if err != nil {
		return 0, err
	}
	var ns uint64
	for _, t := range threads {
		s, err := t.Schedstat()
		if err != nil {
			continue // thread exited meanwhile
		}
		ns += s.RunningNanoseconds
	}
	return ns, nil
}

func stats(v []float64) (median, p90, mean float64) {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	for _, x := range s {
		mean += x
	}
	return s[len(s)/2], s[len(s)*9/10], mean / float64(len(s))
}
