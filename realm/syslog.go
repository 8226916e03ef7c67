package realm

// A KDC that logs the Debian way: kdc.conf without a [logging] section, so
// krb5kdc and kadmind log through syslog(3) to /dev/log, and journald
// turns each datagram into a journal entry. This harness has neither
// journald nor /dev/log (CI runs as root without systemd), so it runs the
// daemons in a private mount namespace whose /dev/log is a socket it
// serves, and writes each datagram as a journal entry through
// systemd-journal-remote into JournalDir: what journald would have done.
// The host's /dev is never touched.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// JournalRemote writes journal files from the journal export format
// (Debian package systemd-journal-remote).
const JournalRemote = "/lib/systemd/systemd-journal-remote"

// RelayCommand is the subcommand that serves a realm's syslog socket in a
// process of its own (`realm up` exits; the relay must outlive it).
const RelayCommand = "syslog-relay"

// nsScript runs in the daemon's new mount namespace: /dev becomes a tmpfs
// of links to the host's devices (bound below the realm directory, seen
// only in this namespace) plus /dev/log, the relay's socket; then it execs
// the daemon.
const nsScript = `set -e
mount --make-rprivate /
mount --rbind /dev "$1"
mount -t tmpfs -o mode=0755,size=1m krb5-exporter-dev /dev
for f in "$1"/* "$1"/.[!.]*; do [ -e "$f" ] || [ -L "$f" ] || continue; ln -s "$f" /dev/; done
ln -s "$2" /dev/log
shift 2
exec "$@"
`

// unshareArgs are the arguments of unshare(1) that give a process a private
// mount namespace: as root -m; otherwise a user namespace too (-Urm).
func unshareArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"-m"}
	}
	return []string{"-U", "-r", "-m"}
}

// checkNamespaces refuses clearly when mount namespaces are not permitted.
func checkNamespaces(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "unshare", append(unshareArgs(), "--", "sh", "-c", "mount -t tmpfs none /mnt")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("realm: --log-to-syslog runs krb5kdc and kadmind in a private mount namespace (unshare %s), which is not permitted here: %v: %s",
			strings.Join(unshareArgs(), " "), err, firstLines(out, 2))
	}
	return nil
}

// checkSyslog checks what LogToSyslog needs: journal-remote and mount
// namespaces.
func checkSyslog(ctx context.Context) error {
	if _, err := os.Stat(JournalRemote); err != nil {
		return fmt.Errorf("realm: --log-to-syslog needs %s (Debian package systemd-journal-remote): %v", JournalRemote, err)
	}
	return checkNamespaces(ctx)
}

// syslogPaths are the socket, the directory the host's /dev is bound to
// inside the namespace, and the journal directory.
func (r *Realm) syslogPaths() (sock, hostDev string) {
	return r.path("syslog.sock"), r.path("ns-dev")
}

// wrapSyslog returns the command line that runs bin in a namespace whose
// /dev/log is the realm's syslog socket.
func (r *Realm) wrapSyslog(bin string, args []string) (string, []string) {
	sock, hostDev := r.syslogPaths()
	if r.Opts.SyslogSocket != "" {
		sock = r.Opts.SyslogSocket
	}
	a := append(unshareArgs(), "--", "/bin/sh", "-c", nsScript, "sh", hostDev, sock, bin)
	return "unshare", append(a, args...)
}

// startSyslog checks that namespaces work, then starts serving the socket:
// in a process of its own when SyslogRelay names one (the CLI), else in
// this process until Down.
func (r *Realm) startSyslog(ctx context.Context) error {
	if !r.Opts.LogToSyslog {
		return nil
	}
	if r.Opts.SyslogSocket != "" { // a journald serves it
		_, hostDev := r.syslogPaths()
		return os.MkdirAll(hostDev, 0o700)
	}
	if err := checkSyslog(ctx); err != nil {
		return err
	}
	sock, hostDev := r.syslogPaths()
	if len(sock) >= 108 {
		return fmt.Errorf("realm: the syslog socket path %s is too long for a unix socket; use a shorter --dir", sock)
	}
	for _, d := range []string{hostDev, r.JournalDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("realm: %w", err)
		}
	}
	if r.relayPid() > 0 || r.relay != nil {
		return nil
	}
	if len(r.Opts.SyslogRelay) > 0 {
		return r.startRelayProcess(ctx)
	}
	relay, err := ListenSyslog(sock, r.JournalDir)
	if err != nil {
		return err
	}
	r.relay = relay
	go relay.Serve()
	return nil
}

// startRelayProcess runs SyslogRelay (this program's `realm syslog-relay
// --dir D`) in a session of its own and waits for its socket.
func (r *Realm) startRelayProcess(ctx context.Context) error {
	sock, _ := r.syslogPaths()
	cmd := exec.Command(r.Opts.SyslogRelay[0], r.Opts.SyslogRelay[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	logf, err := os.OpenFile(r.path("syslog-relay.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("realm: syslog relay: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := os.WriteFile(r.path("syslog-relay.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		cmd.Process.Kill()
		return fmt.Errorf("realm: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("realm: syslog relay exited at start (%v): %s", err, logTail(r.path("syslog-relay.log")))
		case <-wctx.Done():
			cmd.Process.Kill()
			return fmt.Errorf("realm: syslog relay did not create %s", sock)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// relayPid is the pid of this realm's relay process, or 0: only a process
// whose command line is this realm's relay command is believed.
func (r *Realm) relayPid() int {
	b, err := os.ReadFile(r.path("syslog-relay.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	args, err := p.CmdLine()
	st, serr := p.Stat()
	if err != nil || serr != nil || st.State == "Z" || !slices.Contains(args, RelayCommand) || !hasArgPair(args, "--dir", r.Dir) {
		return 0
	}
	return pid
}

// ServeSyslog serves the realm's syslog socket until ctx ends: the body
// of the relay process that SyslogRelay names.
func (r *Realm) ServeSyslog(ctx context.Context) error {
	if !r.Opts.LogToSyslog {
		return fmt.Errorf("realm: %s does not log to syslog", r.Dir)
	}
	sock, _ := r.syslogPaths()
	relay, err := ListenSyslog(sock, r.JournalDir)
	if err != nil {
		return err
	}
	go relay.Serve()
	<-ctx.Done()
	return relay.Close()
}

// stopSyslog stops the relay after the daemons: its journal-remote writes
// what it has and exits.
func (r *Realm) stopSyslog() error {
	if r.relay != nil {
		err := r.relay.Close()
		r.relay = nil
		return err
	}
	pid := r.relayPid()
	if pid == 0 {
		return nil
	}
	// A pidfd names the relay for good and tells when it has exited:
	// while it exits its cmdline reads empty, so relayPid said 0 (gone)
	// while it still ran, and its pid may name another process later.
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil // gone already
	}
	defer unix.Close(fd)
	unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(pfd, int(time.Until(deadline).Milliseconds())+1); n > 0 {
			return nil
		} else if err != nil && err != unix.EINTR {
			break
		}
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	return fmt.Errorf("realm: syslog relay (pid %d) ignored SIGTERM for 10s and was killed", pid)
}

// SyslogRelay serves a syslog socket (/dev/log in the daemons' namespace)
// and writes each datagram as a journal entry, with the fields journald
// gives a syslog message, through systemd-journal-remote.
type SyslogRelay struct {
	conn   *net.UnixConn
	sock   string
	remote *exec.Cmd
	in     io.WriteCloser
	w      *bufio.Writer
	bootID string
	host   string
	done   chan error

	closing atomic.Bool
	mu      sync.Mutex // w, werr, comms: the reader's and the flusher's
	werr    error
	// comms caches /proc/PID/comm of the senders (_COMM).
	comms map[int]string
}

// ListenSyslog creates the socket and starts journal-remote writing
// dir/system.journal. Serve relays until Close.
func ListenSyslog(sock, dir string) (*SyslogRelay, error) {
	os.Remove(sock) // a stale socket of a relay that was killed
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("realm: syslog socket: %w", err)
	}
	// SO_PASSCRED: the kernel's pid/uid/gid of each sender (_PID, _UID, _GID).
	raw, err := conn.SyscallConn()
	if err == nil {
		raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) })
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("realm: syslog socket: %w", err)
	}
	os.Chmod(sock, 0o666) // as /dev/log: any daemon of the namespace may log
	cmd := exec.Command(JournalRemote, "--output="+filepath.Join(dir, "system.journal"), "-")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	in, err := cmd.StdinPipe()
	if err != nil {
		conn.Close()
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("realm: %s: %w", JournalRemote, err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	host, _ := os.Hostname()
	s := &SyslogRelay{conn: conn, sock: sock, remote: cmd, in: in, w: bufio.NewWriterSize(in, 256<<10), comms: map[int]string{},
		bootID: strings.ReplaceAll(strings.TrimSpace(string(boot)), "-", ""), host: host, done: make(chan error, 1)}
	// As journald's first entry: the journal file exists before any
	// daemon logs, so a follower can start at once.
	s.write(map[string]string{"SYSLOG_IDENTIFIER": "krb5-exporter-relay", "PRIORITY": "6", "_TRANSPORT": "driver",
		"MESSAGE": "syslog relay started on " + sock}, 0, 0, 0)
	if err := s.w.Flush(); err != nil {
		s.Close()
		return nil, fmt.Errorf("realm: %s: %v: %s", JournalRemote, err, stderr.String())
	}
	return s, nil
}

// Serve relays datagrams until Close; an entry reaches the journal file as
// soon as it is received.
func (s *SyslogRelay) Serve() {
	// Written entries reach journal-remote within flushEvery: one write
	// per burst, not per message, so that a busy KDC is not slowed by
	// its logging (syslog(3) blocks when the socket's queue is full).
	stop := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		t := time.NewTicker(flushEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.mu.Lock()
				if s.w.Buffered() > 0 {
					s.werr = s.w.Flush()
				}
				s.mu.Unlock()
			}
		}
	}()
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	var err error
	for {
		var n, oobn int
		n, oobn, _, _, err = s.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			if s.closing.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
				err = nil // drained
			}
			break
		}
		if s.closing.Load() {
			s.conn.SetReadDeadline(time.Now().Add(drainQuiet))
		}
		var pid, uid, gid int
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if c, cerr := unix.ParseUnixCredentials(&m); cerr == nil {
					pid, uid, gid = int(c.Pid), int(c.Uid), int(c.Gid)
				}
			}
		}
		s.mu.Lock()
		s.write(parseSyslog(buf[:n]), pid, uid, gid)
		err = s.werr
		s.mu.Unlock()
		if err != nil {
			break
		}
	}
	close(stop)
	<-flushed
	if ferr := s.w.Flush(); err == nil || errors.Is(err, net.ErrClosed) {
		err = ferr
	}
	s.done <- err
}

// flushEvery bounds how long a received message waits before it is
// handed to journal-remote.
const flushEvery = 10 * time.Millisecond

// drainQuiet is how long the socket must stay empty for Close to end.
const drainQuiet = 100 * time.Millisecond

// Close stops serving and lets journal-remote finish the file.
func (s *SyslogRelay) Close() error {
	// No new senders; what is queued is read until the socket has been
	// quiet for drainQuiet (the daemons have stopped by now).
	os.Remove(s.sock)
	s.closing.Store(true)
	s.conn.SetReadDeadline(time.Now().Add(drainQuiet))
	err := <-s.done
	s.conn.Close()
	s.in.Close()
	if werr := s.remote.Wait(); err == nil {
		err = werr
	}
	return err
}

// write appends one entry in the journal export format.
func (s *SyslogRelay) write(f map[string]string, pid, uid, gid int) {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	fmt.Fprintf(s.w, "__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=%s\n_HOSTNAME=%s\n",
		time.Now().UnixMicro(), ts.Nano()/1000, s.bootID, s.host)
	if pid > 0 {
		fmt.Fprintf(s.w, "_PID=%d\n_UID=%d\n_GID=%d\n", pid, uid, gid)
		comm, ok := s.comms[pid]
		if !ok {
			if len(s.comms) > 4096 {
				clear(s.comms)
			}
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			comm = string(bytes.TrimSpace(b))
			s.comms[pid] = comm
		}
		if comm != "" {
			fmt.Fprintf(s.w, "_COMM=%s\n", comm)
		}
	}
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := f[k]
		if !strings.Contains(v, "\n") {
			fmt.Fprintf(s.w, "%s=%s\n", k, v)
			continue
		}
		// The export format's binary field: name, newline, le64 size, data.
		var size [8]byte
		binary.LittleEndian.PutUint64(size[:], uint64(len(v)))
		fmt.Fprintf(s.w, "%s\n%s%s\n", k, size[:], v)
	}
	s.w.WriteString("\n")
}

// parseSyslog splits a datagram as glibc's syslog(3) sends it,
// "<PRI>Mmm dd hh:mm:ss ident[pid]: message", into journald's fields.
func parseSyslog(b []byte) map[string]string {
	f := map[string]string{"_TRANSPORT": "syslog"}
	msg := string(bytes.TrimRight(b, "\n\x00"))
	if strings.HasPrefix(msg, "<") {
		if end := strings.IndexByte(msg, '>'); end > 1 && end <= 4 {
			if pri, err := strconv.Atoi(msg[1:end]); err == nil {
				f["PRIORITY"] = strconv.Itoa(pri & 7)
				f["SYSLOG_FACILITY"] = strconv.Itoa(pri >> 3)
				msg = msg[end+1:]
			}
		}
	}
	// RFC 3164 timestamp "Dec  1 05:03:29 ".
	if len(msg) >= 16 && msg[3] == ' ' && msg[6] == ' ' && msg[9] == ':' && msg[12] == ':' && msg[15] == ' ' {
		f["SYSLOG_TIMESTAMP"] = msg[:16]
		msg = msg[16:]
	}
	// "ident[pid]: " or "ident: ".
	if colon := strings.Index(msg, ": "); colon > 0 && !strings.ContainsAny(msg[:colon], " \t") {
		tag := msg[:colon]
		if lb := strings.IndexByte(tag, '['); lb > 0 && strings.HasSuffix(tag, "]") {
			f["SYSLOG_PID"] = tag[lb+1 : len(tag)-1]
			tag = tag[:lb]
		}
		f["SYSLOG_IDENTIFIER"] = tag
		msg = msg[colon+2:]
	}
	f["MESSAGE"] = msg
	return f
}
