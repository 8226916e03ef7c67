package realm

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Ports for the harness's daemons come from a pool outside the kernel's
// ephemeral range (net.ipv4.ip_local_port_range), so no client socket on
// the machine is ever given one as its own source port, and each port is
// reserved by an flock on a file in a directory every process shares
// (PortLockDir), so that two suites, two `realm up` or a suite and a
// `realm up` never hand out the same number. A reservation is held until
// Release (Down) or until the process exits. A cursor file there makes
// the processes walk the pool in turn, so a port released is the last one
// handed out again, not the next.

// PortLockDirEnv names the directory of the port locks when set; default
// PortLockDir.
const PortLockDirEnv = "KRB5_EXPORTER_PORT_LOCKS"

// poolBase is where the pool starts when the ephemeral range leaves room
// below it: above the ports well-known services use.
const poolBase = 20000

// PortLockDir is the directory of the port locks: $KRB5_EXPORTER_PORT_LOCKS
// or /tmp/krb5-exporter-ports, shared by every user (mode 1777, as /tmp),
// since ports are. Not $TMPDIR: a process with a private temporary
// directory (a test's, a bench daemon's) must still see the others'
// leases, or two KDCs get one port (krb5kdc binds UDP with SO_REUSEADDR,
// so the second one silently takes the first one's requests).
func PortLockDir() string {
	if d := os.Getenv(PortLockDirEnv); d != "" {
		return d
	}
	return "/tmp/krb5-exporter-ports"
}

// PortNeed says what a port must be free for.
type PortNeed int

const (
	// TCP on 127.0.0.1 (kadmind, the exporter's web listener).
	TCP PortNeed = iota
	// TCPUDP on 127.0.0.1, one number for both (krb5kdc, kpasswd).
	TCPUDP
	// Wildcard TCP on every address (kpropd, which has no listen option).
	Wildcard
)

// PortLease is a port reserved for this process until Release.
type PortLease struct {
	Port int
	lock *os.File
}

// Release gives the port back to the pool; nil-safe and idempotent.
func (l *PortLease) Release() {
	if l != nil && l.lock != nil {
		l.lock.Close() // closing the descriptor drops the flock
		l.lock = nil
	}
}

// EphemeralRange is the kernel's range of ports for client sockets.
func EphemeralRange() (low, high int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, fmt.Errorf("realm: the ephemeral port range: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 2 {
		low, err1 := strconv.Atoi(f[0])
		high, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil && low > 0 && low <= high {
			return low, high, nil
		}
	}
	return 0, 0, fmt.Errorf("realm: the ephemeral port range: cannot parse %q", strings.TrimSpace(string(b)))
}

// portPool lists the ports the allocator may hand out: those between
// poolBase (1024 when the ephemeral range starts lower) and the ephemeral
// range, then those above it.
func portPool() ([]int, error) {
	low, high, err := EphemeralRange()
	if err != nil {
		return nil, err
	}
	base := poolBase
	if low <= poolBase+1024 {
		base = 1024
	}
	var pool []int
	for p := base; p < low; p++ {
		pool = append(pool, p)
	}
	for p := high + 1; p <= 65535; p++ {
		pool = append(pool, p)
	}
	if len(pool) == 0 {
		return nil, fmt.Errorf("realm: the ephemeral port range %d-%d leaves no port outside it for the harness", low, high)
	}
	return pool, nil
}

// LeasePort reserves a port from the pool that is free for need now and
// that no other process using this allocator holds.
func LeasePort(need PortNeed) (*PortLease, error) {
	pool, err := portPool()
	if err != nil {
		return nil, err
	}
	dir, err := lockDir()
	if err != nil {
		return nil, err
	}
	// The cursor file, locked while the pool is walked, says where the
	// previous allocation (of any process) stopped.
	cur, err := openLock(filepath.Join(dir, "cursor"), true)
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	if err := syscall.Flock(int(cur.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("realm: lock %s: %w", cur.Name(), err)
	}
	start := readCursor(cur) % len(pool)
	for i := 0; i < len(pool); i++ {
		idx := (start + i) % len(pool)
		l, err := claim(dir, pool[idx], need)
		if err != nil {
			continue
		}
		writeCursor(cur, idx+1)
		return l, nil
	}
	return nil, fmt.Errorf("realm: none of the harness's %d ports outside the ephemeral range (from %d) is free", len(pool), pool[0])
}

// ClaimPort reserves a port chosen by the user (pinned), with a clear
// error when it is taken or reserved by another process.
func ClaimPort(port int, need PortNeed) (*PortLease, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("realm: port %d out of range", port)
	}
	dir, err := lockDir()
	if err != nil {
		return nil, err
	}
	return claim(dir, port, need)
}

// claim takes the port's lock without waiting, then checks the port is
// bindable for need.
func claim(dir string, port int, need PortNeed) (*PortLease, error) {
	f, err := openLock(filepath.Join(dir, strconv.Itoa(port)), false)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("realm: port %d is reserved by another process (lock %s)", port, f.Name())
		}
		return nil, fmt.Errorf("realm: lock %s: %w", f.Name(), err)
	}
	if err := bindable(port, need); err != nil {
		f.Close()
		return nil, err
	}
	return &PortLease{Port: port, lock: f}, nil
}

// bindable reports a clear error when port cannot be bound for need.
func bindable(port int, need PortNeed) error {
	host := "127.0.0.1"
	if need == Wildcard {
		host = ""
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("realm: port %s/tcp is already in use", addr)
	}
	defer l.Close()
	if need == TCPUDP {
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return fmt.Errorf("realm: port %s/udp is already in use", addr)
		}
		u.Close()
	}
	return nil
}

// lockDir makes the shared lock directory (sticky and writable by all,
// as /tmp) or checks that it is a directory, not a link.
func lockDir() (string, error) {
	dir := PortLockDir()
	if err := os.Mkdir(dir, 0o700); err == nil {
		// Chmod, not Mkdir's mode: the umask would take the bits away.
		if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
			return "", fmt.Errorf("realm: port locks: %w", err)
		}
	} else if !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("realm: port locks: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("realm: port locks: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("realm: port locks: %s is not a directory", dir)
	}
	return dir, nil
}

// openLock opens (creating) a lock file, never through a link. Another
// user's lock file opens read-only: flock needs no write access. The
// cursor is written, so it needs write access; without it the walk starts
// at the pool's beginning.
func openLock(path string, write bool) (*os.File, error) {
	flags := os.O_CREATE | syscall.O_NOFOLLOW
	if write {
		if f, err := os.OpenFile(path, flags|os.O_RDWR, 0o666); err == nil {
			return f, nil
		}
	}
	f, err := os.OpenFile(path, flags|os.O_RDONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("realm: port lock: %w", err)
	}
	return f, nil
}

func readCursor(f *os.File) int {
	b := make([]byte, 16)
	n, _ := f.ReadAt(b, 0)
	v, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || v < 0 {
		return 0
	}
	return v
}

func writeCursor(f *os.File, v int) {
	s := strconv.Itoa(v) + "\n"
	if _, err := f.WriteAt([]byte(s), 0); err == nil {
		f.Truncate(int64(len(s)))
	}
}

// lease reserves a port for the realm (pinned when port is not 0) and
// keeps the reservation until Down.
func (r *Realm) lease(port int, need PortNeed) (int, error) {
	var l *PortLease
	var err error
	if port != 0 {
		l, err = ClaimPort(port, need)
	} else {
		l, err = LeasePort(need)
	}
	if err != nil {
		return 0, err
	}
	r.leases = append(r.leases, l)
	return l.Port, nil
}

// releasePorts gives back every port the realm reserved.
func (r *Realm) releasePorts() {
	for _, l := range r.leases {
		l.Release()
	}
	r.leases = nil
}

// assignPorts reserves the ports of a primary's KDC, kadmind and kpasswd
// (the ones Opts pins, free ones for the rest).
func (r *Realm) assignPorts() error {
	var err error
	if r.KDCPort, err = r.lease(r.Opts.KDCPort, TCPUDP); err != nil {
		r.releasePorts()
		return err
	}
	if r.KadmindPort, err = r.lease(r.Opts.KadmindPort, TCP); err != nil {
		r.releasePorts()
		return err
	}
	// kpasswd listens on UDP and TCP as well; leases never repeat a port.
	if r.KpasswdPort, err = r.lease(0, TCPUDP); err != nil {
		r.releasePorts()
		return err
	}
	r.KDCAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KDCPort))
	r.KadmindAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KadmindPort))
	return nil
}
