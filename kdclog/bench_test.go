package kdclog

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// Benchmarks of the performance targets, on the million-line log
// of benchlog_test.go. Each reports lines per CPU-second of the whole
// process (getrusage: user+system, all goroutines, GC included) and
// allocations per line. The mtail comparison: testdata/mtail/README.md.
//
//	taskset -c 0 go test ./kdclog -run '^$' -bench . -benchtime 3x -benchmem

// cpuSeconds is the CPU time of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func splitLines(data []byte) [][]byte {
	lines := make([][]byte, 0, bytes.Count(data, []byte{'\n'}))
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, data[:i])
		data = data[i+1:]
	}
	return lines
}

// reportPerLine turns per-op results into per-line metrics.
func reportPerLine(b *testing.B, lines int, cpu float64, allocs uint64) {
	total := float64(lines) * float64(b.N)
	b.ReportMetric(total/cpu, "lines/cpu-s")
	b.ReportMetric(float64(allocs)/total, "allocs/line")
	b.ReportMetric(0, "ns/op") // one op is the whole file; per line is what matters
}

// benchSource is a kdc log's source counting into c, as the handling
// benchmarks use it (no file: lines are handed to it).
func benchSource(c *counts) *source {
	return newSource(config.LogSource{Path: "bench", Type: "kdc", ProbePrincipals: []string{"krb5-exporter-probe@PERF.TEST"}}, c, &sourceStats{})
}

// followSource is the benchmark log at path, followed from its start.
func followSource(path string) config.LogSource {
	return config.LogSource{Path: path, Type: "kdc", StartAt: "beginning", ProbePrincipals: []string{"krb5-exporter-probe@PERF.TEST"}}
}

// handleBatched has src count every line, flushed every 4096 lines (a
// tailer's batch) and at the end.
func handleBatched(src *source, lines [][]byte) {
	for i, l := range lines {
		src.handle(l, false)
		if i%4096 == 4095 { // a tailer's batch
			src.flush()
		}
	}
	src.flush()
}

// benchHandle has src count every line b.N times, then flushes it, and
// reports the cost per line.
func benchHandle(b *testing.B, src *source, lines [][]byte) {
	b.ResetTimer()
	m0, c0 := mallocs(), cpuSeconds()
	for range b.N {
		for _, l := range lines {
			src.handle(l, false)
		}
	}
	src.flush()
	reportPerLine(b, len(lines), cpuSeconds()-c0, mallocs()-m0)
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// BenchmarkParse is the parser alone (a Parser, as each source uses):
// one op parses every line of the log.
func BenchmarkParse(b *testing.B) {
	_, data := benchLog(b)
	lines := splitLines(data)
	var e Event
	var p Parser
	b.ResetTimer()
	m0, c0 := mallocs(), cpuSeconds()
	for range b.N {
		for _, l := range lines {
			p.Parse(l, &e)
		}
	}
	reportPerLine(b, len(lines), cpuSeconds()-c0, mallocs()-m0)
}

// BenchmarkParseCount adds the counting (probe check, label indexes,
// atomic counters, preauth correlation).
func BenchmarkParseCount(b *testing.B) {
	_, data := benchLog(b)
	lines := splitLines(data)
	src := benchSource(newCounts())
	benchHandle(b, src, lines)
	if src.st.parsed.Load() != uint64(len(lines)*b.N) {
		b.Fatalf("parsed %d of %d lines", src.st.parsed.Load(), len(lines)*b.N)
	}
}

// BenchmarkTailParseCount is the whole path: a Manager follows the log
// file from its start (reads, splits lines, parses, counts, saves the
// position) until every line is counted.
func BenchmarkTailParseCount(b *testing.B) {
	path, data := benchLog(b)
	n := uint64(bytes.Count(data, []byte{'\n'}))
	src := followSource(path)
	b.ResetTimer()
	m0, c0 := mallocs(), cpuSeconds()
	for range b.N {
		followLog(b, &config.Config{Logs: []config.LogSource{src}}, path, n)
	}
	reportPerLine(b, int(n), cpuSeconds()-c0, mallocs()-m0)
}

// followLog runs a Manager with cfg until path's n lines are counted.
// A fresh position file each time: written every second as in
// production, and at the stop.
func followLog(b *testing.B, cfg *config.Config, path string, n uint64) {
	pos := filepath.Join(b.TempDir(), "positions.json")
	m, err := NewManager(log.NewNopLogger(), nil, Config{PositionFile: pos})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.ApplyConfig(cfg); err != nil {
		b.Fatal(err)
	}
	go m.Run(context.Background())
	for !m.linesRead(path, n) {
		time.Sleep(time.Millisecond)
	}
	m.Stop()
	m.Close()
	if _, err := os.Stat(pos); err != nil {
		b.Fatalf("position not saved: %v", err)
	}
}

// linesRead reports whether path's tailer has handed on n lines.
func (m *Manager) linesRead(path string, n uint64) bool {
	m.mu.Lock()
	ps := m.paths[path]
	m.mu.Unlock()
	return ps != nil && ps.tail.Lines.Load() >= n
}

// BenchmarkFollowAt20k measures the cost of following a live log: a
// separate process (this test binary, TestHelperFollow) runs a Manager on
// a file this benchmark appends 20,000 lines per second to, one write(2)
// per line as krb5kdc does, for 5 seconds per op. It reports the
// follower's CPU time as a percentage of one core (from /proc).
func BenchmarkFollowAt20k(b *testing.B) {
	_, data := benchLog(b)
	lines := splitLines(data)
	rate, dur := 20000, 5*time.Second
	if r := os.Getenv("KDCLOG_FOLLOW_RATE"); r != "" { // to see the idle cost: 0
		rate, _ = strconv.Atoi(r)
	}
	for range b.N {
		path := filepath.Join(b.TempDir(), "krb5kdc.log")
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFollow$")
		cmd.Env = append(os.Environ(), "KDCLOG_HELPER_FOLLOW="+path, "KDCLOG_HELPER_POSITIONS="+filepath.Join(filepath.Dir(path), "positions.json"))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		out := bufio.NewScanner(stdout)
		if !out.Scan() || out.Text() != "ready" {
			b.Fatalf("helper did not start: %q", out.Text())
		}
		cpu0 := procCPU(b, cmd.Process.Pid)
		start := time.Now()
		written := 0
		tick := time.NewTicker(5 * time.Millisecond)
		for time.Since(start) < dur {
			<-tick.C
			due := int(time.Since(start).Seconds() * float64(rate))
			for ; written < due; written++ {
				l := lines[written%len(lines)]
				f.Write(l[:len(l)+1]) // the line and its newline, in one write
			}
		}
		tick.Stop()
		wall := time.Since(start)
		time.Sleep(1500 * time.Millisecond) // let it read the last poll's worth
		// The CPU time and the time it was measured over: writing plus
		// the wait for the last batch.
		cpu, measured := procCPU(b, cmd.Process.Pid)-cpu0, time.Since(start)
		stdin.Close()
		if !out.Scan() {
			b.Fatal("helper died")
		}
		counted, _ := strconv.Atoi(out.Text())
		cmd.Wait()
		f.Close()
		if counted != written {
			b.Fatalf("follower counted %d of %d lines", counted, written)
		}
		b.ReportMetric(100*cpu.Seconds()/measured.Seconds(), "%-of-a-core")
		b.ReportMetric(float64(written)/wall.Seconds(), "lines/s")
	}
	b.ReportMetric(0, "ns/op")
}

// procCPU is the time pid's threads spent on a CPU, in nanoseconds
// (schedstat; /proc/PID/stat counts in 10 ms ticks, too coarse here).
func procCPU(b testing.TB, pid int) time.Duration {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("no threads of %d: %v", pid, err)
	}
	var total time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that exited
		}
		ns, _ := strconv.ParseInt(strings.Fields(string(data))[0], 10, 64)
		total += time.Duration(ns)
	}
	return total
}

// TestHelperFollow is BenchmarkFollowAt20k's follower process.
func TestHelperFollow(t *testing.T) {
	path := os.Getenv("KDCLOG_HELPER_FOLLOW")
	if path == "" {
		t.Skip("helper process for BenchmarkFollowAt20k")
	}
	// The position file is kept as in production (empty: none).
	m, err := NewManager(log.NewNopLogger(), nil, Config{
		PositionFile: os.Getenv("KDCLOG_HELPER_POSITIONS"),
		NoInotify:    os.Getenv("KDCLOG_HELPER_NO_INOTIFY") != "",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyConfig(&config.Config{Logs: []config.LogSource{{Path: path, Type: "kdc", StartAt: "beginning"}}}); err != nil {
		t.Fatal(err)
	}
	if p := os.Getenv("KDCLOG_HELPER_CPUPROFILE"); p != "" {
		f, _ := os.Create(p)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	go m.Run(context.Background())
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n') // until the benchmark closes stdin
	m.mu.Lock()
	n := m.paths[path].parse.parsed.Load()
	m.mu.Unlock()
	m.Stop()
	m.Close()
	fmt.Println(n)
}
