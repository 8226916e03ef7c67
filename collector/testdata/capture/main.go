// Command capture writes the /proc fixture of the collector's golden tests
// from a real MIT KDC: it starts a throwaway harness realm (krb5kdc -w 2
// and kadmind), kills one worker and restarts the KDC (MIT's supervisor
// then shuts down and, where PID 1 does not reap, stays behind as a
// zombie), sends some requests so that the workers have used CPU time,
// holds one TCP connection open, and copies the files the collectors read.
//
//	go run ./collector/testdata/capture -out collector/testdata/fixture
//
// The realm is removed afterwards; nothing in the fixture is secret.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Per-process files the collectors read.
var procFiles = []string{"comm", "stat", "status", "io", "limits", "cmdline"}

// Network namespace files, copied for the processes holding sockets.
var netFiles = []string{"udp", "udp6", "tcp", "tcp6", "snmp", "snmp6", "netstat"}

func main() {
	out := flag.String("out", "collector/testdata/fixture", "fixture directory to (re)write")
	requests := flag.Int("requests", 3000, "AS requests sent over UDP before the capture")
	flag.Parse()
	if err := run(*out, *requests); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
		os.Exit(1)
	}
}

func run(out string, requests int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp("", "capture-realm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r, err := realm.Up(ctx, realm.Options{Dir: filepath.Join(tmp, "realm"), Users: 5, Services: 2, Fillers: -1, Workers: 2})
	if err != nil {
		return err
	}
	defer r.Down()

	// Kill a worker: the supervisor ends the whole KDC; start it again.
	old := r.KDCPids()
	if len(old) != 3 {
		return fmt.Errorf("expected supervisor and 2 workers, got %v", old)
	}
	syscall.Kill(old[1], syscall.SIGKILL)
	for deadline := time.Now().Add(15 * time.Second); len(r.KDCPids()) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("KDC still running 15s after a worker was killed")
		}
	}
	if err := r.StartKDC(ctx); err != nil {
		return err
	}
	if err := load(r.Realm, r.KDCAddr, requests); err != nil {
		return err
	}
	conn, err := net.Dial("tcp", r.KDCAddr) // one established connection
	if err != nil {
		return err
	}
	defer conn.Close()
	time.Sleep(200 * time.Millisecond)

	pids := r.KDCPids()
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	proc := filepath.Join(out, "proc")
	for _, f := range []string{"stat", "sys/net/core/somaxconn"} {
		if err := copyFile(filepath.Join("/proc", f), filepath.Join(proc, f)); err != nil {
			return err
		}
	}
	for i, pid := range pids {
		if err := captureProc(proc, pid, i > 0); err != nil {
			return err
		}
	}
	if pid := r.KadmindPid(); pid > 0 {
		if err := captureProc(proc, pid, false); err != nil {
			return err
		}
	}
	// The old supervisor, if it is an unreaped zombie, and this program
	// as a process that is none of ours.
	if st, err := procStat(old[0]); err == nil && st.State == "Z" && st.Comm == "krb5kdc" {
		if err := captureProc(proc, old[0], false); err != nil {
			return err
		}
	}
	if err := captureProc(proc, os.Getpid(), false); err != nil {
		return err
	}
	for _, c := range []struct{ src, dst string }{{r.KDCConf, "kdc.conf"}, {r.Krb5Conf, "krb5.conf"}} {
		b, err := os.ReadFile(c.src)
		if err != nil {
			return err
		}
		b = []byte(strings.ReplaceAll(string(b), r.Dir, "@REALMDIR@"))
		if err := os.WriteFile(filepath.Join(out, c.dst), b, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("captured KDC %v (old supervisor %d), kadmind %d into %s\n", pids, old[0], r.KadmindPid(), out)
	return nil
}

func procStat(pid int) (procfs.ProcStat, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, err
	}
	return p.Stat()
}

// captureProc copies the per-process files, recreates fd/ as symlinks with
// the same targets, and with withNet the network namespace files.
func captureProc(root string, pid int, withNet bool) error {
	src := filepath.Join("/proc", strconv.Itoa(pid))
	dst := filepath.Join(root, strconv.Itoa(pid))
	for _, f := range procFiles {
		if err := copyFile(filepath.Join(src, f), filepath.Join(dst, f)); err != nil && !os.IsPermission(err) {
			return err
		}
	}
	fds, err := os.ReadDir(filepath.Join(src, "fd"))
	if err == nil {
		if err := os.MkdirAll(filepath.Join(dst, "fd"), 0o755); err != nil {
			return err
		}
		for _, fd := range fds {
			t, err := os.Readlink(filepath.Join(src, "fd", fd.Name()))
			if err != nil {
				continue
			}
			if err := os.Symlink(t, filepath.Join(dst, "fd", fd.Name())); err != nil {
				return err
			}
		}
	}
	if withNet {
		for _, f := range netFiles {
			if err := copyFile(filepath.Join(src, "net", f), filepath.Join(dst, "net", f)); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyFile copies a procfs file (whose size reads as 0) by reading it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// load sends AS requests for a principal that does not exist (cheap for
// the KDC, no database write) and waits for each answer.
func load(realmName, addr string, n int) error {
	c := config.New()
	c.LibDefaults.DefaultTktEnctypeIDs = []int32{18, 17}
	req, err := messages.NewASReqForTGT(realmName, c, types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, "capture-load"))
	if err != nil {
		return err
	}
	b, err := req.Marshal()
	if err != nil {
		return err
	}
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		if _, err := conn.Write(b); err != nil {
			return err
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := conn.Read(buf); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	return nil
}
