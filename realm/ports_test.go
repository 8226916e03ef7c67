package realm

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const (
	portChildEnv = "KRB5_EXPORTER_PORT_TEST_CHILD"
	portsEach    = 100
)

// TestPortLeaseChild is the other process of TestPortLeasesAcrossProcesses
// (the test binary run again): it leases ports, prints them, and holds
// them until its stdin closes.
func TestPortLeaseChild(t *testing.T) {
	if os.Getenv(portChildEnv) == "" {
		t.Skip("run by TestPortLeasesAcrossProcesses")
	}
	for i := 0; i < portsEach; i++ {
		l, err := LeasePort(TCPUDP)
		if err != nil {
			fmt.Println("error", err)
			return
		}
		defer l.Release()
		fmt.Println("port", l.Port)
	}
	fmt.Println("holding")
	io.Copy(io.Discard, os.Stdin)
}

// Two other processes and this one, each with its own $TMPDIR, lease ports
// at the same time: every port is different, none is in the kernel's ephemeral range, and a port
// another process holds cannot be claimed until that process exits.
func TestPortLeasesAcrossProcesses(t *testing.T) {
	t.Parallel()
	low, high, err := EphemeralRange()
	if err != nil {
		t.Fatal(err)
	}
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		ports []int
		err   error
	}
	children := make([]*child, 2)
	var wg sync.WaitGroup
	for i := range children {
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestPortLeaseChild$", "-test.count=1")}
		// Each child with a temporary directory of its own, as a bench
		// daemon or a test may have: the leases are machine-wide still.
		c.cmd.Env = append(os.Environ(), portChildEnv+"=1", "TMPDIR="+t.TempDir())
		c.cmd.Stderr = os.Stderr
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.stdin.Close(); c.cmd.Wait() })
		children[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				switch {
				case len(f) == 2 && f[0] == "port":
					p, _ := strconv.Atoi(f[1])
					c.ports = append(c.ports, p)
				case len(f) > 0 && f[0] == "holding":
					go io.Copy(io.Discard, out) // the test binary's own summary
					return
				case len(f) > 0 && f[0] == "error":
					c.err = fmt.Errorf("%s", sc.Text())
				}
			}
			if c.err == nil {
				c.err = fmt.Errorf("child exited before holding its ports (%d leased)", len(c.ports))
			}
		}()
	}
	var mine []int
	for i := 0; i < portsEach; i++ {
		l, err := LeasePort(TCPUDP)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		mine = append(mine, l.Port)
	}
	wg.Wait()

	seen := map[int]string{}
	check := func(who string, ports []int) {
		for _, p := range ports {
			if p >= low && p <= high {
				t.Errorf("%s got port %d, inside the ephemeral range %d-%d", who, p, low, high)
			}
			if other, dup := seen[p]; dup {
				t.Errorf("port %d handed to %s and to %s", p, other, who)
			}
			seen[p] = who
		}
	}
	check("this process", mine)
	for i, c := range children {
		if c.err != nil {
			t.Fatalf("child %d: %v", i, c.err)
		}
		if len(c.ports) != portsEach {
			t.Fatalf("child %d leased %d ports, want %d", i, len(c.ports), portsEach)
		}
		check(fmt.Sprintf("child %d", i), c.ports)
	}
	// Held ports, the other processes' and this one's, cannot be claimed.
	for _, p := range []int{children[0].ports[0], children[1].ports[portsEach-1], mine[0]} {
		if l, err := ClaimPort(p, TCP); err == nil {
			l.Release()
			t.Errorf("claimed port %d while it is held", p)
		} else if !strings.Contains(err.Error(), "reserved by another process") {
			t.Errorf("claim of held port %d: %v", p, err)
		}
	}
	// A child's exit releases its ports.
	c := children[0]
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	l, err := ClaimPort(c.ports[0], TCPUDP)
	if err != nil {
		t.Fatalf("port %d of an exited process: %v", c.ports[0], err)
	}
	l.Release()
}

// A released port is not the next one handed out: the pool is walked in
// turn, so a client still talking to the old owner does not reach a new
// one.
func TestPortLeaseRotates(t *testing.T) {
	a, err := LeasePort(TCP)
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	a.Release() // idempotent
	b, err := LeasePort(TCP)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if a.Port == b.Port {
		t.Errorf("port %d handed out again right after its release", a.Port)
	}
}

// A pinned port that a listener holds gets a clear error.
func TestClaimPortInUse(t *testing.T) {
	l, err := LeasePort(TCP)
	if err != nil {
		t.Fatal(err)
	}
	port := l.Port
	l.Release()
	// Hold it as a foreign process would: bound, with no lock.
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := ClaimPort(port, TCP); err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Errorf("claim of a bound port: %v", err)
	}
}
