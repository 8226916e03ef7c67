package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// stopLimit is the promise of issue 26 item 10: SIGTERM ends the daemon
// within 5 s whatever it waits for.
const stopLimit = 5 * time.Second

// stopRig is a daemon counting a log (positions written only at exit),
// with a probe module whose KDC the state under test chooses.
type stopRig struct {
	dir, logPath, pos, cfg, keytab string
	base                           string
	cmd                            *exec.Cmd
	logs                           *testutil.LockedBuffer
}

// startRig writes the configuration (probes: the YAML of the probes
// section, KDC the module's allowed KDC) and starts the daemon; it returns
// once the log's 10 lines are counted.
func startRig(t *testing.T, transport, probes string, args ...string) *stopRig {
	t.Helper()
	dir := t.TempDir()
	r := &stopRig{dir: dir, logPath: filepath.Join(dir, "krb5kdc.log"), pos: filepath.Join(dir, "positions.json"),
		cfg: filepath.Join(dir, "c.yml"), keytab: filepath.Join(dir, "probe.keytab")}
	testutil.WriteKeytab(t, r.keytab, "probe@PERF.TEST", "secret")
	kdcLines(t, r.logPath, 10)
	cfg := fmt.Sprintf(`modules:
  m:
    realm: PERF.TEST
    client: probe
    keytab: %s
    transport: %s
    timeout: 1m
    allowed_kdcs: [127.0.0.1]
probes: %s
logs:
  - {path: %s, type: kdc, start_at: beginning}
  - {path: %s, type: kdc, start_at: beginning}
`, r.keytab, transport, probes, r.logPath, filepath.Join(dir, "later.log"))
	if err := os.WriteFile(r.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 {
		args = []string{"--no-collector.kdcconf"}
	}
	r.base, r.cmd, r.logs = daemon(t, append([]string{"--config.file", r.cfg, "--kdclog.position-file", r.pos,
		"--kdclog.position-sync-interval", "1h",
		"--no-collector.process", "--no-collector.network"}, args...)...)
	waitIssued(t, r.base, 10)
	return r
}

// stop sends SIGTERM and checks that the daemon exits 0 within stopLimit,
// having written the position of every line it counted.
func (r *stopRig) stop(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	r.cmd.Process.Signal(syscall.SIGTERM)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(start)
		t.Logf("stopped in %v", took.Round(time.Millisecond))
		if err != nil {
			t.Errorf("exit: %v\n%s", err, r.logs)
		}
	case <-time.After(stopLimit):
		r.cmd.Process.Signal(syscall.SIGQUIT) // the goroutines, into the log
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			r.cmd.Process.Kill()
			<-done
		}
		t.Fatalf("still running %v after SIGTERM:\n%s", stopLimit, r.logs)
	}
	fi, err := os.Stat(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := savedOffset(t, r.pos, r.logPath); !ok || off != fi.Size() {
		t.Errorf("position file holds offset %d (%v), want %d of %s", off, ok, fi.Size(), r.logPath)
	}
}

// savedOffset is the offset of path's current file in the position file
// pos; false when the file holds none.
func savedOffset(t *testing.T, pos, path string) (int64, bool) {
	t.Helper()
	b, err := os.ReadFile(pos)
	if err != nil {
		return 0, false
	}
	var pf struct {
		Files map[string]struct {
			Current *struct {
				Offset int64 `json:"offset"`
			} `json:"current"`
		} `json:"files"`
	}
	if json.Unmarshal(b, &pf) != nil {
		return 0, false
	}
	c := pf.Files[path].Current
	if c == nil {
		return 0, false
	}
	return c.Offset, true
}

// probeInFlight starts a /probe of module m against target; the request's
// end is the returned channel's.
func (r *stopRig) probeInFlight(t *testing.T, target string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(r.base + "/probe?module=m&target=" + target)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	return done
}

// udpBlackHole is a KDC address on 127.0.0.1 that reads requests and never
// answers; the channel gets a value for each request read.
func udpBlackHole(t *testing.T) (string, <-chan struct{}) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	got := make(chan struct{}, 100)
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}()
	return pc.LocalAddr().String(), got
}

// tcpBlackHole accepts connections, reads the requests and never answers.
func tcpBlackHole(t *testing.T) (string, <-chan struct{}) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		for _, c := range conns {
			c.Close()
		}
	})
	got := make(chan struct{}, 100)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				buf := make([]byte, 65536)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					select {
					case got <- struct{}{}:
					default:
					}
				}
			}()
		}
	}()
	return l.Addr().String(), got
}

func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatalf("after 30 s still waiting for %s", what)
	}
}

// TestStopWithin5s: SIGTERM ends the daemon within 5 s, exit 0 and the
// position file written, from every state it can be stuck in (issue 26
// item 10): a FIFO at a log path, at the keytab (the probe loop and a
// /probe reloading it), at the configuration file (a SIGHUP reading it);
// a KDC that never answers over UDP, and one that accepts and never
// answers over TCP, with a probe loop and a /probe waiting on each; a
// scrape whose client does not read the reply.
func TestStopWithin5s(t *testing.T) {
	t.Parallel()
	probe := func(addr string) string {
		return fmt.Sprintf("[{name: k, address: %q, module: m, interval: 1s}]", addr)
	}
	t.Run("fifo at a log path", func(t *testing.T) {
		t.Parallel()
		r := startRig(t, "udp", "[]")
		later := filepath.Join(r.dir, "later.log")
		if err := syscall.Mkfifo(later, 0o600); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 30*time.Second, "the FIFO counted as a read error", func() bool {
			l := metric(t, r.base, `krb5_kdc_log_read_errors_total{path="`+later+`"}`)
			return l != "" && !strings.HasSuffix(l, " 0")
		})
		r.stop(t)
	})
	t.Run("fifo at the keytab", func(t *testing.T) {
		t.Parallel()
		addr, got := udpBlackHole(t)
		r := startRig(t, "udp", probe(addr))
		waitFor(t, got, "the probe loop's first request")
		os.Remove(r.keytab)
		if err := syscall.Mkfifo(r.keytab, 0o600); err != nil {
			t.Fatal(err)
		}
		// The keytab is checked for changes once a second: after that
		// every load is of the FIFO.
		time.Sleep(1100 * time.Millisecond)
		done := r.probeInFlight(t, addr)
		select {
		case <-done:
		case <-time.After(stopLimit):
			t.Error("a /probe with a FIFO at the module's keytab still runs after 5 s")
		}
		r.stop(t)
	})
	t.Run("fifo at the config file", func(t *testing.T) {
		t.Parallel()
		r := startRig(t, "udp", "[]")
		os.Remove(r.cfg)
		if err := syscall.Mkfifo(r.cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		r.cmd.Process.Signal(syscall.SIGHUP)
		testutil.Eventually(t, 30*time.Second, "the failed reload", func() bool {
			return strings.Contains(r.logs.String(), "configuration not reloaded")
		})
		r.stop(t)
	})
	for transport, blackHole := range map[string]func(*testing.T) (string, <-chan struct{}){
		"udp kdc never answers":             udpBlackHole,
		"tcp kdc accepts and never answers": tcpBlackHole,
	} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			addr, got := blackHole(t)
			r := startRig(t, strings.Fields(transport)[0], probe(addr))
			waitFor(t, got, "the probe loop's request")
			r.probeInFlight(t, addr)
			waitFor(t, got, "the /probe's request")
			r.stop(t)
		})
	}
	t.Run("scrapes in progress", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		kdcConf := filepath.Join(dir, "kdc.conf")
		os.WriteFile(kdcConf, []byte("[realms]\n\tPERF.TEST = {\n\t}\n"), 0o644)
		krb5Conf := filepath.Join(dir, "krb5.conf")
		os.WriteFile(krb5Conf, []byte("[libdefaults]\n"), 0o644)
		r := startRig(t, "udp", "[]", "--collector.kdcconf.path", kdcConf, "--collector.kdcconf.krb5-config", krb5Conf)
		// A FIFO at kdc.conf's path: a scrape reading it.
		os.Remove(kdcConf)
		if err := syscall.Mkfifo(kdcConf, 0o600); err != nil {
			t.Fatal(err)
		}
		scrape := make(chan struct{})
		go func() {
			defer close(scrape)
			if resp, err := http.Get(r.base + "/metrics"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		select {
		case <-scrape:
		case <-time.After(stopLimit):
			t.Error("a scrape with a FIFO at kdc.conf's path still runs after 5 s")
		}
		// A client that asks and does not read: a receive buffer of the
		// minimum, the reply stuck in the server's write.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1)
		host, port, _ := net.SplitHostPort(strings.TrimPrefix(r.base, "http://"))
		var sa unix.SockaddrInet4
		copy(sa.Addr[:], net.ParseIP(host).To4())
		fmt.Sscan(port, &sa.Port)
		if err := unix.Connect(fd, &sa); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(fd, []byte("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 30*time.Second, "the reply to arrive", func() bool {
			n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
			return err == nil && n > 0
		})
		r.stop(t)
	})
}

// `top --once` with a FIFO as its log exits at once with an error naming
// it (issue 26 item 5: it never exited).
func TestTopOnceFIFOLog(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "krb5kdc.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, stderr, code := exporter(t, "top", "--once", "--interval", "200ms", "--log", fifo, "--daemon.url", "")
	if code != 1 || !strings.Contains(stderr, fifo+`": not a regular file: a FIFO`) {
		t.Errorf("exit %d after %v, want 1 and the FIFO named:\n%s", code, time.Since(start), stderr)
	}
}

// --config.check says in one line, at once, what is wrong with a FIFO as
// the configuration file, a FIFO as a log path and an empty keytab (issue
// 26 items 5 and 8: the first two hung or passed, the last passed).
func TestConfigCheckRefusesWhatIsNotAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	emptyKeytab := filepath.Join(dir, "empty.keytab")
	os.WriteFile(emptyKeytab, nil, 0o600)
	logFIFO := filepath.Join(dir, "log.yml")
	os.WriteFile(logFIFO, []byte("logs:\n  - path: "+fifo+"\n    type: kdc\n"), 0o600)
	keytab := filepath.Join(dir, "keytab.yml")
	os.WriteFile(keytab, []byte("modules:\n  m:\n    realm: R\n    client: c\n    keytab: "+emptyKeytab+"\n"), 0o600)
	for cfg, want := range map[string]string{
		fifo:    "not a regular file: a FIFO",
		logFIFO: logFIFO + `:2: logs.0.path: log file \"` + fifo + `\": not a regular file: a FIFO`,
		keytab:  keytab + ":5: modules.m.keytab: malformed keytab: not a keytab (bad header)",
	} {
		_, stderr, code := exporter(t, "--config.file", cfg, "--config.check")
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", cfg, code)
		}
		oneErrorLine(t, stderr, want)
	}
}
