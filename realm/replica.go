package realm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
	"github.com/krb5-exporter/krb5-exporter/internal/ulog"
)

// Replica is what a replica realm adds: a kpropd that pulls the primary's
// updates from its kadmind over iprop, and receives full resyncs (kadmind
// runs kdb5_util dump and kprop) on KpropPort.
type Replica struct {
	// PrimaryDir is the directory of the primary realm.
	PrimaryDir     string `json:"primary_dir"`
	PrimaryKDCAddr string `json:"primary_kdc_addr"`
	// Poll is iprop_replica_poll, a krb5 duration ("1s").
	Poll string `json:"poll"`

	Keytab  string `json:"keytab"` // kiprop/<host> and host/<host>
	ACL     string `json:"acl"`    // kpropd.acl
	PidFile string `json:"pid_file"`
	Log     string `json:"log"` // kpropd -d output (stdout and stderr)
	// Received is where kpropd writes a full propagation (kpropd -f).
	Received string `json:"received"`
}

// DefaultPoll is the harness's iprop_replica_poll: MIT's default, 2m, would
// make every test wait minutes.
const DefaultPoll = time.Second

// ResyncTimeout is the replicas' iprop_resync_timeout (see ipropConf):
// short enough that a lost full resync is asked for again well within
// UpReplica's wait, long enough to receive and load a test database on a
// loaded machine.
const ResyncTimeout = "15s"

// host is the name MIT's kprop, kpropd and kadmind derive for this machine
// (gethostname, lower-cased; the profiles turn DNS canonicalisation off).
// Primary and replica run on the same host, so kiprop/<host> and
// host/<host> serve both ends.
func (r *Realm) host() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.ToLower(h)
}

func (r *Realm) primaryKDC() string {
	if r.Replica == nil {
		return ""
	}
	// Listed after the replica's own KDC: kpropd needs a ticket for iprop
	// before the replica's database exists.
	return fmt.Sprintf("\t\tkdc = %s\n", r.Replica.PrimaryKDCAddr)
}

// UpReplica creates a replica of the running primary realm p in
// opts.Dir: a realm with the primary's name and master key (its stash),
// whose database comes from the primary by a real iprop full resync
// (kpropd asks, the primary's kadmind dumps and runs kprop), and a krb5kdc
// serving it. On the primary it turns iprop on (iprop_listen on loopback),
// creates kiprop/<host> and host/<host>, and restarts kadmind, updating p
// and its realm.json. MIT's kpropd cannot be told a listen address: its
// full-propagation port is bound on the wildcard address (only kprop as
// host/<host> of this realm gets in). A primary has one replica at a time:
// kadmind pushes full resyncs to one kpropd port.
func UpReplica(ctx context.Context, p *Realm, opts Options, poll time.Duration) (*Realm, error) {
	if p.Replica != nil {
		return nil, fmt.Errorf("realm: %s is itself a replica", p.Dir)
	}
	if p.KadmindPid() == 0 {
		return nil, fmt.Errorf("realm: the primary in %s has no kadmind running; iprop needs it", p.Dir)
	}
	if p.bins.Kpropd == "" {
		return nil, fmt.Errorf("realm: kpropd not found; on Debian: apt-get install krb5-kpropd")
	}
	if poll <= 0 {
		poll = DefaultPoll
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("realm: a directory is required")
	}
	o := p.Opts
	o.Dir, o.KDCPort, o.NoKadmind, o.Workers = opts.Dir, opts.KDCPort, true, opts.Workers
	o.Trust = "" // the primary's trusted realm is the primary's own
	// A replica of a primary that logs to syslog does too; its relay (if
	// a process) is the caller's, for the replica's directory.
	o.LogToSyslog, o.SyslogRelay = o.LogToSyslog || opts.LogToSyslog, opts.SyslogRelay
	r, err := p.createReplica(ctx, o, poll)
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	if err := r.StartKpropd(ctx); err != nil {
		r.Down()
		return nil, err
	}
	// The database exists once the first full resync has been loaded.
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := r.WaitSerial(wctx, p.IpropLog); err != nil {
		// The logs first: Down removes the replica's directory.
		err = fmt.Errorf("realm: replica did not receive the primary's database: %v; kpropd log: %s; kadmind log: %s; dump and kprop log: %s",
			err, logTail(r.Replica.Log), logTail(p.KadmindLog), logTail(p.resyncLog()))
		r.Down()
		return nil, err
	}
	// kprop records its success (<dump>.<host>.last_prop) once kpropd
	// acknowledged, which may be after the replica loaded the database:
	// the resync is complete, for whoever reads the primary, only then.
	if err := p.waitLastProp(wctx, r.host(), begin); err != nil {
		err = fmt.Errorf("realm: kprop did not record the full resync: %v; kadmind log: %s; dump and kprop log: %s",
			err, logTail(p.KadmindLog), logTail(p.resyncLog()))
		r.Down()
		return nil, err
	}
	if err := r.StartKDC(ctx); err != nil {
		r.Down()
		return nil, err
	}
	return r, nil
}

func (p *Realm) createReplica(ctx context.Context, o Options, poll time.Duration) (*Realm, error) {
	dir, err := absDir(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	o.Dir = dir
	r := &Realm{Opts: o, Realm: p.Realm, Domain: p.Domain, bins: p.bins}
	r.setPaths(dir)
	// The keys are the primary's.
	r.UserKeytab, r.ServiceKeytab, r.AdminKeytab, r.ProbeKeytab = p.UserKeytab, p.ServiceKeytab, p.AdminKeytab, p.ProbeKeytab
	r.AdminPrincipal, r.ProbePrincipal = p.AdminPrincipal, p.ProbePrincipal
	r.Replica = &Replica{
		PrimaryDir:     p.Dir,
		PrimaryKDCAddr: p.KDCAddr,
		Poll:           fmt.Sprintf("%ds", max(1, int(poll.Round(time.Second)/time.Second))),
	}
	r.Replica.setPaths(r)
	fail := func(err error) (*Realm, error) {
		os.RemoveAll(dir)
		r.releasePorts()
		return nil, err
	}
	// kadmind, kpasswd: the primary's (admin_server in krb5.conf).
	r.KadmindPort, r.KadmindAddr, r.KpasswdPort = p.KadmindPort, p.KadmindAddr, p.KpasswdPort
	if r.KDCPort, err = r.lease(o.KDCPort, TCPUDP); err != nil {
		return fail(err)
	}
	r.KDCAddr = "127.0.0.1:" + strconv.Itoa(r.KDCPort)
	// kpropd binds the wildcard address: its port must be free there.
	if r.KpropPort, err = r.lease(0, Wildcard); err != nil {
		return fail(err)
	}
	if err := p.enableIprop(ctx, r.KpropPort); err != nil {
		return fail(err)
	}
	r.IpropPort = p.IpropPort
	start := time.Now()
	if err := r.writeConfigs(); err != nil {
		return fail(err)
	}
	stash, err := os.ReadFile(p.path("stash"))
	if err != nil {
		return fail(fmt.Errorf("realm: the primary's master key: %w", err))
	}
	if err := os.WriteFile(r.path("stash"), stash, 0o600); err != nil {
		return fail(fmt.Errorf("realm: %w", err))
	}
	if _, err := p.KadminLocal(ctx, fmt.Sprintf("ktadd -k %s -norandkey kiprop/%s host/%s", r.Replica.Keytab, r.host(), r.host())); err != nil {
		return fail(err)
	}
	r.Created = time.Since(start)
	if err := r.save(); err != nil {
		return fail(err)
	}
	return r, nil
}

func absDir(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("realm: %w", err)
	}
	return d, nil
}

// enableIprop turns iprop on in the primary (once), points kadmind's full
// resyncs at kpropPort, and restarts kadmind.
func (p *Realm) enableIprop(ctx context.Context, kpropPort int) error {
	var err error
	if p.IpropPort == 0 {
		if p.IpropPort, err = p.lease(0, TCP); err != nil {
			return err
		}
	}
	p.IProp = true
	p.KpropPort = kpropPort
	p.KpropKeytab = p.path("kprop.keytab")
	if err := p.writeConfigs(); err != nil {
		return err
	}
	if err := p.StopKadmind(); err != nil {
		return err
	}
	if !p.ReplicaPrincipals {
		h := p.host()
		// kiprop/127.0.0.1 is kadmind's iprop service (kiprop/<admin_server>);
		// kiprop/<host> the replica's kpropd; host/<host> both ends of kprop.
		if _, err := p.KadminLocal(ctx,
			"addprinc -randkey -clearpolicy kiprop/127.0.0.1",
			"addprinc -randkey -clearpolicy kiprop/"+h,
			"addprinc -randkey -clearpolicy host/"+h,
			fmt.Sprintf("ktadd -k %s -norandkey host/%s", p.KpropKeytab, h)); err != nil {
			return err
		}
		p.ReplicaPrincipals = true
	}
	if err := p.save(); err != nil {
		return err
	}
	return p.StartKadmind(ctx)
}

// StartKpropd starts the replica's kpropd in the foreground (-d: its
// debug output, the same events it sends to syslog, goes to
// Replica.Log) in a session of its own, so that it outlives `realm up`.
func (r *Realm) StartKpropd(ctx context.Context) error {
	rep := r.Replica
	if rep == nil {
		return fmt.Errorf("realm: %s is not a replica", r.Dir)
	}
	if pid := r.KpropdPid(); pid > 0 {
		return fmt.Errorf("realm: kpropd already running as pid %d", pid)
	}
	logf, err := os.OpenFile(rep.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	defer logf.Close()
	bin, args := r.bins.Kpropd, []string{"-d", "-r", r.Realm,
		"-s", rep.Keytab, "-a", rep.ACL, "-f", rep.Received,
		"-P", strconv.Itoa(r.KpropPort), "-p", r.bins.KDB5Util, "--pid-file=" + rep.PidFile}
	if r.Opts.LogToSyslog {
		// kpropd logs through syslog (ident kpropd) besides its -d output.
		if err := r.startSyslog(ctx); err != nil {
			return err
		}
		bin, args = r.wrapSyslog(bin, args)
	}
	// Not exec.CommandContext: kpropd must not die with ctx.
	cmd := r.command(context.Background(), bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("realm: kpropd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it when it exits
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for r.KpropdPid() != cmd.Process.Pid {
		select {
		case err := <-exited:
			return fmt.Errorf("realm: kpropd exited at start (%v): %s", err, logTail(rep.Log))
		case <-wctx.Done():
			cmd.Process.Kill()
			return fmt.Errorf("realm: kpropd wrote no pid file %s: %s", rep.PidFile, logTail(rep.Log))
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// StopKpropd stops a replica's kpropd (and its full-propagation child);
// nil if not running.
func (r *Realm) StopKpropd() error {
	if r.Replica == nil {
		return nil
	}
	return r.stop(r.Replica.PidFile, "kpropd")
}

// KpropdPid returns the pid of a replica's kpropd, or 0.
func (r *Realm) KpropdPid() int {
	if r.Replica == nil {
		return 0
	}
	return r.pid(r.Replica.PidFile, "kpropd")
}

// WaitSerial waits until this realm's update log has the last serial
// number of the update log at primaryLog, and is stable.
func (r *Realm) WaitSerial(ctx context.Context, primaryLog string) error {
	var last error
	var noListener time.Time // since when kpropd has had no listener
	for {
		p, err := ulog.ReadFile(primaryLog)
		if err != nil {
			return err
		}
		h, err := ulog.ReadFile(r.IpropLog)
		switch {
		case err != nil:
			last = err
		case h.State != ulog.StateStable:
			last = fmt.Errorf("replica update log %s", h.State)
		case h.LastSerial != p.LastSerial:
			last = fmt.Errorf("replica at serial %d, primary at %d", h.LastSerial, p.LastSerial)
		default:
			if _, err := os.Stat(r.path("principal")); err == nil {
				return nil
			}
			last = errors.New("no database yet")
		}
		// A kpropd that exited never catches up: say so now, with its
		// last words, rather than when ctx ends. Its listener, though,
		// kpropd itself kills and forks again around a full resync
		// ("Killing fullprop child"): only one missing for a while is gone
		// (failing at once failed 2 runs in 30 beside another suite).
		switch err := r.kpropdRunning(); {
		case err == nil:
			noListener = time.Time{}
		case r.KpropdPid() == 0:
			return fmt.Errorf("%v, and %v", last, err)
		case noListener.IsZero():
			noListener = time.Now()
		case time.Since(noListener) > listenerGrace:
			return fmt.Errorf("%v, and %v", last, err)
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// listenerGrace is how long WaitSerial lets kpropd go without its
// full-propagation listener before it calls the replica broken.
const listenerGrace = 5 * time.Second

// kpropdRunning checks a replica's kpropd: the iprop process and its
// full-propagation listener (a child: if it exits, say because its port
// was taken, the iprop process keeps asking for full resyncs that no one
// receives).
func (r *Realm) kpropdRunning() error {
	if r.Replica == nil {
		return nil
	}
	pid := r.KpropdPid()
	if pid == 0 {
		return fmt.Errorf("kpropd is not running (log: %s)", logTail(r.Replica.Log))
	}
	if len(children(pid, "kpropd")) == 0 {
		return fmt.Errorf("kpropd (pid %d) has no full-propagation listener on port %d (log: %s)", pid, r.KpropPort, logTail(r.Replica.Log))
	}
	return nil
}

// waitLastProp waits for kprop's record of a propagation to host made
// since begin (file times are coarse: a second of slack).
func (p *Realm) waitLastProp(ctx context.Context, host string, begin time.Time) error {
	file := p.DumpFile + "." + host + ".last_prop"
	for {
		fi, err := os.Stat(file)
		if err == nil && !fi.ModTime().Before(begin.Add(-time.Second)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no new %s", filepath.Base(file))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// resyncLog is where the primary's full-resync helpers write: kadmind
// runs kdb5_util dump and kprop with their output on /dev/null (it is a
// daemon), so a failed dump or kprop would leave no trace but a replica
// that never gets its database.
func (p *Realm) resyncLog() string { return p.path("resync.log") }

// resyncWrappers writes the programs kadmind runs for a full resync (its
// -p and -K): scripts that run MIT's kdb5_util and kprop with their
// output appended to resyncLog. kadmind passes the kdb5_util path through
// sh (popen), so a directory with shell metacharacters gets none for it.
func (p *Realm) resyncWrappers() (dump, kprop string, err error) {
	wrap := func(name, bin string) (string, error) {
		path := p.path(name)
		script := fmt.Sprintf("#!/bin/sh\n# kadmind's full-resync helper (krb5-exporter realm harness).\n"+
			"echo \"$(date -u +%%FT%%TZ) %s $*\" >>%s\nexec %s \"$@\" >>%s 2>&1\n",
			filepath.Base(bin), shQuote(p.resyncLog()), shQuote(bin), shQuote(p.resyncLog()))
		if err := safefile.Write(path, []byte(script), 0o700); err != nil {
			return "", fmt.Errorf("realm: %w", err)
		}
		return path, nil
	}
	if !strings.ContainsAny(p.Dir, " \t\n'\"\\$`;&|<>()*?[]{}~#!") {
		if dump, err = wrap("resync-dump.sh", p.bins.KDB5Util); err != nil {
			return "", "", err
		}
	}
	if bin, lerr := LookPath("kprop"); lerr == nil {
		if kprop, err = wrap("resync-kprop.sh", bin); err != nil {
			return "", "", err
		}
	}
	return dump, kprop, nil
}

// shQuote quotes s for sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// setPaths names the replica's own files in r's directory.
func (rp *Replica) setPaths(r *Realm) {
	rp.Keytab = r.path("kpropd.keytab")
	rp.ACL = r.path("kpropd.acl")
	rp.PidFile = r.path("kpropd.pid")
	rp.Log = r.path("kpropd.log")
	rp.Received = r.path("from_primary")
}
