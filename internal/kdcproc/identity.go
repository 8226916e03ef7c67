package kdcproc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// A process's name (comm) is whatever its executable file was called:
// `cp /bin/sleep /tmp/krb5kdc` runs as a "krb5kdc" that would keep
// krb5_process_up at 1 with the real KDC stopped and supply its own -w
// and -r. Identity is what makes a process so named the MIT daemon.
//
// It must hold for an exporter that runs unprivileged (the package's),
// which cannot read /proc/PID/exe of a root process. So:
//   - the real and effective uid must be root, the exporter's own, or a
//     configured user: an unprivileged user cannot start a process as any
//     of them (a set-uid program keeps the caller's real uid);
//   - where /proc/PID/exe can be read, it must be the MIT binary at the
//     distribution's path (or a configured one);
//   - where it cannot, on a systemd host, the process must run in the
//     cgroup of one of the distributions' units (or a configured one):
//     only root can move a process into a system unit's cgroup. This
//     leaves out, for example, a root set-uid program started by a user
//     through a link named krb5kdc (its real uid is root after setuid(0)).
//
// /proc/PID/status and /proc/PID/cgroup are readable by anyone.

// Identity configures the rule; the zero value is the distributions'
// defaults. Its fields are the --collector.process.{user,exe,unit} flags.
type Identity struct {
	// Users the daemons may run as besides root and the exporter's own
	// user: names or numeric uids.
	Users []string `json:",omitempty"`
	// Executables accepted besides /usr/sbin/PROGRAM and
	// /usr/local/sbin/PROGRAM; a path's base name is the program it is.
	Executables []string `json:",omitempty"`
	// Units are systemd units (under system.slice) accepted besides the
	// distributions' (Units).
	Units []string `json:",omitempty"`
	// SystemdDir exists when systemd runs the host (sd_booted's test);
	// empty: /run/systemd/system. Tests point it elsewhere.
	SystemdDir string `json:",omitempty"`
}

// Programs are the daemons whose identity is checked, by comm.
var Programs = []string{"krb5kdc", "kadmind", "kpropd"}

// exeDirs hold the MIT servers: Debian and RHEL packages, and a source
// build's default prefix (writable by root only).
var exeDirs = []string{"/usr/sbin", "/usr/local/sbin"}

// DistUnits are the distributions' units of the daemons: Debian's
// krb5-kdc, krb5-admin-server, krb5-kpropd; RHEL's (and FreeIPA's)
// krb5kdc, kadmin, kprop.
var DistUnits = []string{"krb5-kdc.service", "krb5-admin-server.service", "krb5-kpropd.service",
	"krb5kdc.service", "kadmin.service", "kprop.service"}

// Reasons a process named like a daemon is not that daemon: bounded,
// they are label values.
const (
	RejectUser       = "user"       // runs as another user
	RejectExecutable = "executable" // /proc/PID/exe is not the MIT binary
	RejectUnit       = "unit"       // exe unreadable, and not in a KDC unit of systemd
	RejectPidFile    = "pid_file"   // the pid file is not root's (or an allowed user's), or others may write it
)

// Rule is a resolved Identity. It is safe for concurrent use.
type Rule struct {
	uids    map[uint32]bool
	exes    map[string]bool // absolute paths
	units   map[string]bool
	systemd bool
}

// Rule resolves the users and checks the paths.
func (id Identity) Rule() (*Rule, error) {
	r := &Rule{uids: map[uint32]bool{0: true, uint32(os.Geteuid()): true}, exes: map[string]bool{}, units: map[string]bool{}}
	for _, u := range id.Users {
		uid, err := lookupUID(u)
		if err != nil {
			return nil, err
		}
		r.uids[uid] = true
	}
	for _, d := range exeDirs {
		for _, p := range Programs {
			r.addExe(d + "/" + p)
		}
	}
	for _, e := range id.Executables {
		if !filepath.IsAbs(e) || !slices.Contains(Programs, filepath.Base(e)) {
			return nil, fmt.Errorf("executable %q: want an absolute path ending in /krb5kdc, /kadmind or /kpropd", e)
		}
		r.addExe(filepath.Clean(e))
	}
	for _, u := range append(slices.Clone(DistUnits), id.Units...) {
		if u == "" || strings.ContainsRune(u, '/') {
			return nil, fmt.Errorf("unit %q: want a unit name such as krb5-kdc.service", u)
		}
		r.units[u] = true
	}
	dir := id.SystemdDir
	if dir == "" {
		dir = "/run/systemd/system"
	}
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		r.systemd = true
	}
	return r, nil
}

// addExe accepts path and, through links, the file it is: /proc/PID/exe
// names the file (/sbin/krb5kdc runs as /usr/sbin/krb5kdc where /sbin is
// a link to /usr/sbin).
func (r *Rule) addExe(path string) {
	r.exes[path] = true
	if real, err := filepath.EvalSymlinks(path); err == nil && filepath.Base(real) == filepath.Base(path) {
		r.exes[real] = true
	}
}

// DefaultRule is the zero Identity's rule.
func DefaultRule() *Rule {
	r, err := Identity{}.Rule()
	if err != nil {
		panic(err) // the defaults are valid
	}
	return r
}

func lookupUID(name string) (uint32, error) {
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(n), nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, fmt.Errorf("user %q: %w", name, err)
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("user %q: uid %q", name, u.Uid)
	}
	return uint32(n), nil
}

// Rejection says why a process is not the daemon it is named like;
// the zero value accepts it.
type Rejection struct {
	Reason string // one of the Reject constants; "" accepted
	Detail string // for the log: the uid, executable or cgroup seen
}

// Gone is the rejection of a process that exited while it was checked:
// not counted, not logged.
var Gone = Rejection{Reason: "gone"}

// Check tells whether the process whose /proc directory is dir, named
// prog, is that daemon. It reads status, and exe or cgroup: a few
// microseconds; callers keep the verdict for the process's life.
func (r *Rule) Check(dir, prog string) Rejection {
	b, err := os.ReadFile(dir + "/status")
	if err != nil {
		return Gone
	}
	ruid, euid, ok := statusUIDs(b)
	if !ok {
		return Gone
	}
	if !r.uids[ruid] || !r.uids[euid] {
		return Rejection{RejectUser, fmt.Sprintf("uid %d (effective %d)", ruid, euid)}
	}
	exe, err := os.Readlink(dir + "/exe")
	if err == nil {
		exe = strings.TrimSuffix(exe, " (deleted)") // replaced by a package upgrade
		if filepath.Base(exe) != prog || !r.exes[exe] {
			return Rejection{RejectExecutable, "executable " + quote(exe)}
		}
		return Rejection{}
	}
	// Unreadable (another user's process without CAP_SYS_PTRACE), or
	// absent (a fixture tree): the unit stands for it on a systemd host.
	if !r.systemd {
		return Rejection{}
	}
	b, err = os.ReadFile(dir + "/cgroup")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return Gone
		}
		return Rejection{RejectUnit, "cgroup unreadable: " + err.Error()}
	}
	cg := systemdCgroup(b)
	if !r.inUnit(cg) {
		return Rejection{RejectUnit, "cgroup " + quote(cg)}
	}
	return Rejection{}
}

// inUnit tells a cgroup of system.slice/UNIT (or below it: a unit may
// delegate) with UNIT accepted. A user's own units live under user.slice
// and are never accepted, whatever their name. An exporter in a cgroup
// namespace (a container) sees the host's cgroups as "/../../system.slice/...":
// the leading ".." steps lead back to the root they are relative to.
func (r *Rule) inUnit(cg string) bool {
	for strings.HasPrefix(cg, "/../") {
		cg = cg[3:]
	}
	rest, ok := strings.CutPrefix(cg, "/system.slice/")
	if !ok {
		return false
	}
	unit, _, _ := strings.Cut(rest, "/")
	return r.units[unit]
}

// ErrUntrustedPidFile is the error of a pid file TrustPidFile refuses.
var ErrUntrustedPidFile = errors.New("untrusted pid file")

// TrustPidFile tells whether a pid file of this owner and mode can be
// believed: owned by root or an accepted user, and writable by no one
// else (anyone who may write it picks the process counted).
func (r *Rule) TrustPidFile(path string, uid uint32, mode uint32) error {
	if !r.uids[uid] {
		return fmt.Errorf("%w %s: it belongs to uid %d, not to root or an accepted user", ErrUntrustedPidFile, path, uid)
	}
	if mode&0o022 != 0 {
		return fmt.Errorf("%w %s: group or others may write it (mode %04o)", ErrUntrustedPidFile, path, mode&0o7777)
	}
	return nil
}

// ReadPidFile returns the pid in the file at path if TrustPidFile trusts
// it; 0 and no error for a file without a pid (a daemon starting or
// stopped). An absent file is an fs.ErrNotExist error.
func (r *Rule) ReadPidFile(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("pid file %s: no owner", path)
	}
	if err := r.TrustPidFile(path, st.Uid, st.Mode); err != nil {
		return 0, err
	}
	b := make([]byte, 32)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return 0, nil // empty
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0, nil
	}
	return pid, nil
}

// statusUIDs reads the real and effective uid from /proc/PID/status's
// "Uid:\treal\teffective\tsaved\tfs" line.
func statusUIDs(b []byte) (ruid, euid uint32, ok bool) {
	i := bytes.Index(b, []byte("\nUid:"))
	if i < 0 {
		return 0, 0, false
	}
	line := b[i+5:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line)
	if len(f) < 2 {
		return 0, 0, false
	}
	r, err1 := strconv.ParseUint(string(f[0]), 10, 32)
	e, err2 := strconv.ParseUint(string(f[1]), 10, 32)
	return uint32(r), uint32(e), err1 == nil && err2 == nil
}

// systemdCgroup is the process's cgroup in systemd's hierarchy: the
// name=systemd line of cgroup v1 (or hybrid), else the v2 "0::" line.
func systemdCgroup(b []byte) string {
	v2 := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			v2 = p
		} else if _, p, ok := strings.Cut(line, ":name=systemd:"); ok {
			return p
		}
	}
	return v2
}

// quote bounds and quotes what a process chose (its path, its cgroup)
// for a log line.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strconv.Quote(s)
}
