package realm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// StartKDC starts krb5kdc (daemonised, pid in KDCPidFile) and returns once
// it answers an AS request over the network.
func (r *Realm) StartKDC(ctx context.Context) error {
	if pid := r.pid(r.KDCPidFile, "krb5kdc"); pid > 0 {
		return fmt.Errorf("realm: krb5kdc already running as pid %d", pid)
	}
	args := []string{"-r", r.Realm, "-P", r.KDCPidFile}
	if r.Opts.Workers > 0 {
		args = append(args, "-w", strconv.Itoa(r.Opts.Workers))
	}
	if err := r.startDaemon(ctx, r.bins.KDC, args, r.KDCLog); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := waitKDC(ctx, r.Realm, r.KDCAddr); err != nil {
		r.StopKDC()
		return fmt.Errorf("realm: krb5kdc started but does not answer on %s: %v; log: %s", r.KDCAddr, err, logTail(r.KDCLog))
	}
	// One worker answering does not mean all are forked; callers count them.
	for r.Opts.Workers > 0 && len(r.KDCPids()) < r.Opts.Workers+1 {
		if ctx.Err() != nil {
			r.StopKDC()
			return fmt.Errorf("realm: krb5kdc -w %d started only %d workers; log: %s", r.Opts.Workers, len(r.KDCPids())-1, logTail(r.KDCLog))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// StartKadmind starts kadmind and returns once it accepts connections.
func (r *Realm) StartKadmind(ctx context.Context) error {
	if pid := r.pid(r.KadmindPidFile, "kadmind"); pid > 0 {
		return fmt.Errorf("realm: kadmind already running as pid %d", pid)
	}
	// -F keeps the dump of a full resync in Dir; -k is the port of the
	// replica's kpropd that kprop pushes it to, and kprop finds the key of
	// host/<host> through KRB5_KTNAME.
	args := []string{"-r", r.Realm, "-P", r.KadmindPidFile, "-F", r.DumpFile}
	var env []string
	if r.IProp && r.KpropPort != 0 {
		args = append(args, "-k", strconv.Itoa(r.KpropPort))
		env = append(env, "KRB5_KTNAME=FILE:"+r.KpropKeytab)
		dump, kprop, err := r.resyncWrappers()
		if err != nil {
			return err
		}
		if dump != "" {
			args = append(args, "-p", dump)
		}
		if kprop != "" {
			args = append(args, "-K", kprop)
		}
	}
	if err := r.startDaemon(ctx, r.bins.Kadmind, args, r.KadmindLog, env...); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", r.KadmindAddr)
		// kadmind accepts connections before it writes its pid file, and
		// Stop and KadmindPid need the file.
		if err == nil {
			c.Close()
			if r.KadmindPid() > 0 {
				return nil
			}
			err = fmt.Errorf("no pid in %s yet", r.KadmindPidFile)
		}
		if ctx.Err() != nil {
			r.StopKadmind()
			return fmt.Errorf("realm: kadmind does not accept connections on %s: %v; log: %s", r.KadmindAddr, err, logTail(r.KadmindLog))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startDaemon runs a daemon that forks into the background after it has
// bound its sockets: a bind error therefore shows up as its exit status.
func (r *Realm) startDaemon(ctx context.Context, bin string, args []string, logFile string, env ...string) error {
	if r.Opts.LogToSyslog {
		if err := r.startSyslog(ctx); err != nil {
			return err
		}
		bin, args = r.wrapSyslog(bin, args)
	}
	cmd := r.command(ctx, bin, args...)
	cmd.Env = append(cmd.Env, env...)
	shift, err := r.shiftEnv(bin)
	if err != nil {
		return err
	}
	cmd.Env = append(cmd.Env, shift...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := firstLines(out, 3)
		if msg == "" {
			msg = logTail(logFile)
		}
		return fmt.Errorf("realm: %s did not start: %v: %s", bin, err, msg)
	}
	return nil
}

// StopKDC stops krb5kdc and its worker processes; nil if not running.
func (r *Realm) StopKDC() error { return r.stop(r.KDCPidFile, "krb5kdc") }

// StopKadmind stops kadmind; nil if not running.
func (r *Realm) StopKadmind() error { return r.stop(r.KadmindPidFile, "kadmind") }

// KDCPids returns the running KDC processes: the one process, or with
// workers the supervisor (from the pid file) followed by its workers.
func (r *Realm) KDCPids() []int {
	pid := r.pid(r.KDCPidFile, "krb5kdc")
	if pid == 0 {
		return nil
	}
	return append([]int{pid}, children(pid, "krb5kdc")...)
}

// KadmindPid returns kadmind's pid, or 0 when it is not running.
func (r *Realm) KadmindPid() int { return r.pid(r.KadmindPidFile, "kadmind") }

func (r *Realm) stop(pidFile, comm string) error {
	pid := r.pid(pidFile, comm)
	if pid == 0 {
		os.Remove(pidFile)
		return nil
	}
	pids := append([]int{pid}, children(pid, comm)...)
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !anyAlive(pids, comm) {
			os.Remove(pidFile)
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, p := range pids {
		if alive(p, comm) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	os.Remove(pidFile)
	return fmt.Errorf("realm: %s (pid %d) ignored SIGTERM for 10s and was killed", comm, pid)
}

// pid reads a pid file and returns the pid only if that process is still
// this realm's daemon: the named program, started from the binary the
// harness runs, with this realm and this pid file on its command line. A
// stale or forged file must never make us signal a stranger.
func (r *Realm) pid(pidFile, comm string) int {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !alive(pid, comm) || !r.started(pid, comm, pidFile) {
		return 0
	}
	return pid
}

// started reports whether process pid runs the realm's binary for comm with
// the arguments startDaemon gives it (-r REALM ... -P pidFile).
func (r *Realm) started(pid int, comm, pidFile string) bool {
	bin := r.bins.KDC
	switch comm {
	case "kadmind":
		bin = r.bins.Kadmind
	case "kpropd":
		bin = r.bins.Kpropd
	}
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	exe, err := p.Executable()
	if err != nil || !sameFile(strings.TrimSuffix(exe, " (deleted)"), bin) {
		return false
	}
	args, err := p.CmdLine()
	if err != nil {
		return false
	}
	if comm == "kpropd" { // -P is its port there; StartKpropd passes --pid-file=
		return hasArgPair(args, "-r", r.Realm) && slices.Contains(args, "--pid-file="+pidFile)
	}
	return hasArgPair(args, "-r", r.Realm) && hasArgPair(args, "-P", pidFile)
}

// sameFile compares two paths after resolving links.
func sameFile(a, b string) bool {
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

func hasArgPair(args []string, flag, value string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == value {
			return true
		}
	}
	return false
}

// alive is true for a running (not zombie) process named comm.
func alive(pid int, comm string) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	if err != nil {
		return false
	}
	return st.State != "Z" && st.State != "X" && st.Comm == comm
}

func anyAlive(pids []int, comm string) bool {
	for _, p := range pids {
		if alive(p, comm) {
			return true
		}
	}
	return false
}

// children lists live processes named comm whose parent is pid: the
// workers of krb5kdc -w N.
func children(pid int, comm string) []int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range procs {
		st, err := p.Stat()
		if err == nil && st.PPID == pid && st.Comm == comm && st.State != "Z" {
			out = append(out, p.PID)
		}
	}
	return out
}

// logTail returns the last lines of a daemon's log for error messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "(no log written)"
		}
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return string(bytes.Join(lines, []byte(" | ")))
}
