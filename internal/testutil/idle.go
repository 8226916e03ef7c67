package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// idleScript forks n children that sleep (bound seconds at most), says
// "ready", and waits for its standard input to close: then it kills and
// reaps them all, so that none is left to an init that does not reap. A
// fork that fails does the same, then exits 1. Forked from one perl (in
// Debian's essential set), the children share its pages: thousands of
// them cost little memory.
const idleScript = `
my ($n, $bound) = @ARGV;
my @kids;
sub reap { kill 'KILL', @kids; 1 while wait() != -1; }
for (1 .. $n) {
	my $p = fork();
	if (!defined $p) { my $e = $!; reap(); die "fork after " . scalar(@kids) . " children: $e\n"; }
	if ($p == 0) { close STDIN; close STDOUT; sleep $bound; exit 0; }
	push @kids, $p;
}
$| = 1;
print "ready\n";
1 while <STDIN>;
reap();
`

// Idle is a group of idle processes started by StartIdle.
type Idle struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// Pid is the parent's; the n children are its.
	Pid int
}

// StartIdle starts n idle processes (children of one more), each ending by
// itself after bound at the latest, and returns once all are forked. They
// are none of the watched programs (their comm is perl).
func StartIdle(n int, bound time.Duration) (*Idle, error) {
	cmd := exec.Command("perl", "-e", idleScript, strconv.Itoa(n), strconv.Itoa(int(bound.Seconds())+1))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("starting %d idle processes: %q %v %s", n, line, err, stderr.Bytes())
	}
	return &Idle{cmd: cmd, stdin: stdin, Pid: cmd.Process.Pid}, nil
}

// Stop kills and reaps the idle processes: the parent does on its stdin's
// end; the whole process group is killed if it has not within 30 s.
func (i *Idle) Stop() error {
	i.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- i.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		syscall.Kill(-i.Pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("idle processes of %d not gone after 30 s: killed their group", i.Pid)
	}
}

// IdleProcesses starts n idle processes for the test (StartIdle), bounded
// by 5 minutes, stopped when it ends.
func IdleProcesses(t testing.TB, n int) *Idle {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		if InCI() {
			t.Fatal("perl missing in CI")
		}
		t.Skip("no perl")
	}
	idle, err := StartIdle(n, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := idle.Stop(); err != nil {
			t.Error(err)
		}
	})
	return idle
}

// OpenFDs counts this process's open files.
func OpenFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries) - 1 // the directory's own
}
