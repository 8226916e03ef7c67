package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Setup is how the bench gets the system it tests: the configured
// existing realm, or an ephemeral one it creates, and the CPUs it pins.
type Setup struct {
	// Realm is the ephemeral realm's options (`realm up`'s); its Dir is a
	// new temporary directory.
	Realm realm.Options
	// KeepRealm leaves the ephemeral realm running afterwards.
	KeepRealm bool
	// AllowWrites lets the tests that write (kadmin) or restart the KDC
	// (startup) run against an existing realm, as its allow_writes does.
	AllowWrites bool
	// KDCCPU pins the ephemeral realm's KDC to one CPU, GeneratorCPU this
	// process; -1 leaves them.
	KDCCPU, GeneratorCPU int
}

// PinGenerator pins this process, the load generator, to GeneratorCPU
// (nothing when it is -1).
func (s Setup) PinGenerator() error {
	if s.GeneratorCPU < 0 {
		return nil
	}
	if err := pin(os.Getpid(), s.GeneratorCPU); err != nil {
		return err
	}
	// One CPU: more Go threads would only take turns on it.
	runtime.GOMAXPROCS(1)
	return nil
}

// System is cfg's existing realm (locked against a second bench), or a
// new ephemeral one; cleanup unlocks the first and removes the second.
// logf tells what happens to the ephemeral realm.
func (s Setup) System(ctx context.Context, cfg Config, logf func(format string, args ...any)) (sys *System, cleanup func(), err error) {
	if cfg.Realm != nil {
		unlock, err := lockRealm(cfg.Realm, cfg.Shard)
		if err != nil {
			return nil, nil, err
		}
		return existingSystem(cfg.Realm, s.AllowWrites || cfg.Realm.AllowWrites), unlock, nil
	}
	dir, err := os.MkdirTemp("", "krb5-bench-realm-")
	if err != nil {
		return nil, nil, err
	}
	opts := s.Realm
	opts.Dir = dir
	logf("creating an ephemeral realm in %s", dir)
	r, err := realm.Up(ctx, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	cleanup = func() {
		if s.KeepRealm {
			logf("the realm stays up: krb5-exporter realm down --dir %s", dir)
			return
		}
		if err := r.Down(); err != nil {
			logf("removing the realm: %v", err)
		}
	}
	sys = RealmSystem(r)
	if s.KDCCPU >= 0 {
		pinKDC := func() error {
			for _, p := range r.KDCPids() {
				if err := pin(p, s.KDCCPU); err != nil {
					return err
				}
			}
			return nil
		}
		if err := pinKDC(); err != nil {
			cleanup()
			return nil, nil, err
		}
		start := sys.StartKDC
		sys.StartKDC = func(ctx context.Context) error {
			if err := start(ctx); err != nil {
				return err
			}
			return pinKDC()
		}
		sys.Settings["kdc_cpu"] = strconv.Itoa(s.KDCCPU)
	}
	if s.GeneratorCPU >= 0 {
		sys.Settings["generator_cpu"] = strconv.Itoa(s.GeneratorCPU)
	}
	return sys, cleanup, nil
}

// lockRealm refuses a second bench against the same realm and KDC on this
// machine at the same time: their loads would mix and kadmin prefixes
// would be cleaned up under each other. The lock is a flock on a file in
// the temporary directory, released when the process ends however it ends.
func lockRealm(e *ExistingRealm, shard string) (func(), error) {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, e.Name+"@"+e.KDC+shardSuffix(shard))
	path := filepath.Join(os.TempDir(), "krb5-bench-"+name+".lock")
	f, err := safefile.OpenOwned(path, os.O_RDWR|os.O_CREATE, 0o600) // in /tmp: no planted link or file
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another bench is running against realm %s at %s%s (lock %s is held); refusing to run a second at the same time", e.Name, e.KDC, shardSuffix(shard), path)
	}
	return func() { f.Close() }, nil
}

// shardSuffix names a shard in the lock: shards of one run lock apart.
func shardSuffix(shard string) string {
	if shard == "" || shard == "1/1" {
		return ""
	}
	return " shard " + shard
}

// existingSystem describes a configured realm.
func existingSystem(e *ExistingRealm, allowWrites bool) *System {
	s := &System{
		Realm: e.Name, KDC: e.KDC, Domain: e.Domain, UserKeytab: e.UsersKeytab, Users: e.Users, Services: e.Services,
		KadminAddr: e.Kadmind, AdminPrincipal: e.AdminName, AdminKeytab: e.AdminKeytab, KDCLog: e.KDCLog,
		AllowWrites: allowWrites, DumpCommand: e.DumpCommand,
		Settings: map[string]string{"realm_kind": "existing realm"},
	}
	if e.Krb5Config != "" {
		s.Env = append(s.Env, "KRB5_CONFIG="+e.Krb5Config)
	}
	if e.KDCConf != "" {
		s.Env = append(s.Env, "KRB5_KDC_PROFILE="+e.KDCConf)
	}
	if e.UserFormat != "" {
		f := e.UserFormat
		s.UserName = func(i int) string { return fmt.Sprintf(f, i) }
	}
	if e.ServiceFormat != "" {
		f := e.ServiceFormat
		s.ServiceName = func(i int) string { return fmt.Sprintf(f, i) }
	}
	if e.KDCPidFile != "" {
		path := e.KDCPidFile
		s.KDCPids = func() []int { return kdcPids(path) }
	}
	if len(e.StopCommand) > 0 && len(e.StartCommand) > 0 {
		stopC, startC := e.StopCommand, e.StartCommand
		s.StopKDC = func() error { return runCommand(context.Background(), stopC) }
		s.StartKDC = func(ctx context.Context) error { return runCommand(ctx, startC) }
	}
	return s
}

func runCommand(ctx context.Context, argv []string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// kdcPids lists the processes of the KDC whose pid file is path: its
// main process and its krb5kdc children (kdcproc.Find, by the default
// rule: root's, or this user's, MIT krb5kdc); none when it is not running
// or /proc cannot be read.
func kdcPids(path string) []int {
	procs, err := kdcproc.Find("/proc", path, nil)
	if err != nil {
		return nil
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.PID
	}
	return pids
}

// pin moves every thread of pid to one CPU.
func pin(pid, cpu int) error {
	out, err := exec.Command("taskset", "-a", "-p", "-c", strconv.Itoa(cpu), strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p -c %d %d: %v: %s", cpu, pid, err, strings.TrimSpace(string(out)))
	}
	return nil
}
