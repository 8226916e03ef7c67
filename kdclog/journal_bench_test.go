package kdclog

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/config"
)

var journalBenchLines = flag.Int("journal-benchlines", 200_000, "lines of the benchmark log written to the journal for BenchmarkJournalCost")

var journalBench struct {
	once       sync.Once
	dir, file  string // the journal directory; a file of the same lines
	n          uint64
	writeError error
}

// journalBenchData writes the first -journal-benchlines lines of the
// benchmark log into a journal (systemd-journal-remote: identifier, pid
// and message apart, as journald keeps a syslog line) and into a file.
func journalBenchData(b *testing.B) (dir, file string, n uint64) {
	_, data := benchLog(b)
	journalBench.once.Do(func() {
		root := filepath.Dir(benchFile.path) // removed by TestMain
		journalBench.dir = filepath.Join(root, "journal")
		journalBench.file = filepath.Join(root, "journal-lines.log")
		if err := os.Mkdir(journalBench.dir, 0o700); err != nil {
			journalBench.writeError = err
			return
		}
		re := regexp.MustCompile(`^\S+ +\d+ \S+ \S+ ([a-z0-9_.]+)\[(\d+)\](?:\(\w+\))?: (.*)$`)
		var exp, lines bytes.Buffer
		ts := int64(1764556800000000)
		for _, l := range splitLines(data) {
			if journalBench.n == uint64(*journalBenchLines) {
				break
			}
			m := re.FindSubmatch(l)
			if m == nil || !bytes.Equal(m[1], []byte("krb5kdc")) {
				continue
			}
			ts++
			fmt.Fprintf(&exp, "__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=0123456789abcdef0123456789abcdef\nSYSLOG_IDENTIFIER=%s\n_COMM=%s\n_UID=0\n_PID=%s\nSYSLOG_PID=%s\nPRIORITY=6\nMESSAGE=%s\n\n",
				ts, ts-1764556800000000, m[1], m[1], m[2], m[2], m[3])
			lines.Write(l)
			lines.WriteByte('\n')
			journalBench.n++
		}
		cmd := exec.Command(journalRemote, "--output="+filepath.Join(journalBench.dir, "system.journal"), "-")
		cmd.Stdin = &exp
		if out, err := cmd.CombinedOutput(); err != nil {
			journalBench.writeError = fmt.Errorf("%v: %s", err, out)
			return
		}
		journalBench.writeError = os.WriteFile(journalBench.file, lines.Bytes(), 0o600)
	})
	if journalBench.writeError != nil {
		b.Fatal(journalBench.writeError)
	}
	return journalBench.dir, journalBench.file, journalBench.n
}

// entriesRead reports whether the journal source key has counted n entries.
func (m *Manager) entriesRead(key string, n uint64) bool {
	m.mu.Lock()
	ps := m.paths[key]
	m.mu.Unlock()
	return ps != nil && ps.jour.Entries.Load() >= n
}

// childNamed is the pid of this process's child called comm, or 0.
func childNamed(comm string) int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0
	}
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PPID == os.Getpid() && st.Comm == comm {
			return p.PID
		}
	}
	return 0
}

// runSource counts src from its beginning with a fresh Manager and
// returns this process's CPU time (all threads, from /proc) and, for a
// journal source, journalctl's, read before it is stopped.
func runSource(b testing.TB, src config.LogSource, done func(*Manager) bool) (self, journalctl time.Duration) {
	pos := filepath.Join(b.TempDir(), "positions.json")
	m, err := NewManager(log.NewNopLogger(), nil, Config{PositionFile: pos})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.ApplyConfig(&config.Config{Logs: []config.LogSource{src}}); err != nil {
		b.Fatal(err)
	}
	c0 := procCPU(b, os.Getpid())
	go m.Run(context.Background())
	deadline := time.Now().Add(5 * time.Minute)
	for !done(m) {
		if time.Now().After(deadline) {
			b.Fatal("not every line counted in 5 minutes")
		}
		// Seldom: this loop's own wake-ups count in this process's CPU.
		time.Sleep(20 * time.Millisecond)
	}
	self = procCPU(b, os.Getpid()) - c0
	if src.Journal != nil {
		pid := childNamed("journalctl")
		if pid == 0 {
			b.Fatal("no journalctl child found")
		}
		journalctl = procCPU(b, pid)
	}
	m.Stop()
	m.Close()
	return self, journalctl
}

// BenchmarkJournalCost is the cost per line of the journal source next to
// what journalctl itself spends producing the same lines and next to the
// file source's, all three from /proc in the same run: the same KDC lines
// counted once from a file and once from a journal (written by
// systemd-journal-remote) through `journalctl --follow --output=json`.
// The target: journal-source ≤ journalctl.
//
//	taskset -c 0 go test ./kdclog -run '^$' -bench JournalCost -benchtime 3x
func BenchmarkJournalCost(b *testing.B) {
	for _, p := range []string{journalRemote, "journalctl"} {
		if _, err := exec.LookPath(p); err != nil {
			b.Skip(err)
		}
	}
	dir, file, n := journalBenchData(b)
	fileSrc := config.LogSource{Path: file, Type: "kdc", StartAt: "beginning"}
	jSrc := config.LogSource{Type: "kdc", StartAt: "beginning", Journal: &config.JournalSource{Directory: dir}}
	key := jSrc.Key()
	var fileCPU, selfCPU, jctlCPU time.Duration
	b.ResetTimer()
	for range b.N {
		f, _ := runSource(b, fileSrc, func(m *Manager) bool { return m.linesRead(file, n) })
		s, j := runSource(b, jSrc, func(m *Manager) bool { return m.entriesRead(key, n) })
		fileCPU, selfCPU, jctlCPU = fileCPU+f, selfCPU+s, jctlCPU+j
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) / float64(b.N) }
	b.ReportMetric(per(fileCPU), "file-ns/line")
	b.ReportMetric(per(selfCPU), "journal-ns/line")
	b.ReportMetric(per(jctlCPU), "journalctl-ns/line")
	b.ReportMetric(per(selfCPU)/per(jctlCPU), "journal/journalctl")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d lines: file source %.0f ns/line, journal source %.0f ns/line, journalctl %.0f ns/line (CPU, /proc)",
		n, per(fileCPU), per(selfCPU), per(jctlCPU))
}
