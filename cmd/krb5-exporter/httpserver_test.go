package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// fdCount is the number of open file descriptors of pid.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// Idle keep-alive connections are closed after --web.idle-timeout, their
// file descriptors released (issue 26 item 8: 300 idle connections held
// 300 fds for ever). Counted in the daemon's own /proc fd table.
func TestIdleConnectionsClosed(t *testing.T) {
	t.Parallel()
	base, cmd, _ := daemon(t, "--web.idle-timeout", "2s",
		"--no-collector.process", "--no-collector.network", "--no-collector.kdcconf")
	addr := strings.TrimPrefix(base, "http://")
	before := fdCount(t, cmd.Process.Pid)
	const n = 300
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		// One request and its whole reply: the connection is then idle,
		// kept alive.
		if _, err := c.Write([]byte("GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The first may be closed already (the connections take a while
	// under load): most are still held.
	if open := fdCount(t, cmd.Process.Pid); open < before+n/2 {
		t.Fatalf("%d fds with %d connections open, %d before: the test does not hold them", open, n, before)
	}
	testutil.Eventually(t, 30*time.Second, "the idle connections' fds released", func() bool {
		return fdCount(t, cmd.Process.Pid) <= before+5
	})
	// The server closed them: each client reads EOF.
	for _, c := range conns[:10] {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("an idle connection still open")
		}
	}
}

// Scrapes whose client goes away before the reply is sent are one log
// line, not a line per metric family of each (issue 26 item 8: 20 aborted
// scrapes wrote 1,940 error lines).
func TestAbortedScrapesLogOnce(t *testing.T) {
	t.Parallel()
	base, _, logs := daemon(t, "--no-collector.process", "--no-collector.network", "--no-collector.kdcconf")
	addr := strings.TrimPrefix(base, "http://")
	for i := range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		req := "GET /metrics HTTP/1.1\r\nHost: x\r\n"
		if i%2 == 0 {
			req += "Accept-Encoding: gzip\r\n"
		}
		if _, err := c.Write([]byte(req + "\r\n")); err != nil {
			t.Fatal(err)
		}
		// Close with a reset, as a client whose scrape timeout expired:
		// the server's writes fail.
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
	aborted := func() []string {
		var out []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "went away") || strings.Contains(l, "error encoding and sending") {
				out = append(out, l)
			}
		}
		return out
	}
	testutil.Eventually(t, 30*time.Second, "the aborted scrapes logged", func() bool { return len(aborted()) > 0 })
	// The 20 scrapes are served by now or within moments; a normal scrape
	// after them goes through the same server.
	if metric(t, base, "go_goroutines") == "" {
		t.Fatal("no go_goroutines in a normal scrape")
	}
	time.Sleep(500 * time.Millisecond)
	if l := aborted(); len(l) != 1 {
		t.Errorf("%d lines for 20 aborted scrapes, want 1:\n%s", len(l), strings.Join(l, "\n"))
	}
}
