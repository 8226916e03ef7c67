// Package realm creates, runs and removes a private MIT Kerberos realm in a
// directory: its own kdc.conf and krb5.conf (through KRB5_KDC_PROFILE and
// KRB5_CONFIG, never /etc), a populated principal database, keytabs, and
// krb5kdc/kadmind on free loopback ports, and replicas of such a realm
// (UpReplica: a second KDC fed by kpropd over iprop). It is the embedded
// default of the bench and the demo, and the fixture of every integration
// test.
package realm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// stateFile records a realm in its directory, so that another process
// (krb5-exporter realm down) can find and stop it.
const stateFile = "realm.json"

// ReadyPrincipal is the client name of the one AS-REQ the harness sends to
// see that a freshly started KDC answers; it does not exist in the
// database, so each KDC start logs exactly one CLIENT_NOT_FOUND line for it.
const ReadyPrincipal = "krb5-exporter-ready"

// ProbeName is the client principal (without realm) the harness creates
// for the exporter's synthetic probes.
const ProbeName = "krb5-exporter-probe"

// Realm is a created realm. Paths are absolute.
type Realm struct {
	Opts   Options `json:"options"`
	Realm  string  `json:"realm"`
	Domain string  `json:"domain"`
	Dir    string  `json:"dir"`

	KDCPort     int    `json:"kdc_port"`
	KadmindPort int    `json:"kadmind_port"`
	KpasswdPort int    `json:"kpasswd_port"`
	KDCAddr     string `json:"kdc_addr"`
	KadmindAddr string `json:"kadmind_addr"`

	KDCConf  string `json:"kdc_conf"`
	Krb5Conf string `json:"krb5conf"`
	CCache   string `json:"ccache"`

	UserKeytab     string `json:"user_keytab"`
	ServiceKeytab  string `json:"service_keytab"`
	AdminPrincipal string `json:"admin_principal"`
	// ProbePrincipal is the exporter's own synthetic client, with its key
	// alone in ProbeKeytab, so its log lines can be told from users'.
	ProbePrincipal string `json:"probe_principal"`
	ProbeKeytab    string `json:"probe_keytab"`
	AdminKeytab    string `json:"admin_keytab"`

	KDCLog         string `json:"kdc_log"`
	KadmindLog     string `json:"kadmind_log"`
	KDCPidFile     string `json:"kdc_pid_file"`
	KadmindPidFile string `json:"kadmind_pid_file"`

	// Replication. Every realm names its update log (iprop_logfile) and
	// kadmind's dump file (kadmind -F) inside Dir; IProp turns iprop on,
	// which UpReplica does on a primary. Replica is set on a replica.
	IProp     bool   `json:"iprop"`
	IpropLog  string `json:"iprop_log"`
	IpropPort int    `json:"iprop_port,omitempty"`
	DumpFile  string `json:"dump_file"`
	// KpropPort is the port of the replica's kpropd: on a replica the one
	// it listens on, on a primary the one kadmind pushes full resyncs to.
	KpropPort   int      `json:"kprop_port,omitempty"`
	KpropKeytab string   `json:"kprop_keytab,omitempty"`
	Replica     *Replica `json:"replica,omitempty"`
	// ReplicaPrincipals records that the iprop principals exist.
	ReplicaPrincipals bool `json:"replica_principals,omitempty"`

	// KDCProxy is set when the realm has a KDC proxy (Opts.KDCProxy).
	KDCProxy *KDCProxy `json:"kdc_proxy,omitempty"`

	// JournalDir holds the journal written from the daemons' syslog
	// messages (Opts.LogToSyslog).
	JournalDir string `json:"journal_dir,omitempty"`

	// Peer is the realm this one trusts both ways (Trust); Trusted is that
	// realm when Up created it (Options.Trust), in TrustDir.
	Peer    *Peer  `json:"peer,omitempty"`
	Trusted *Realm `json:"-"`

	// Created is how long creating the database and keytabs took.
	Created time.Duration `json:"created_ns"`

	bins  binaries
	relay *SyslogRelay // serving the syslog socket in this process
	// clockShift moves the KDC's clock (RestartKDCShifted).
	clockShift time.Duration
	// leases are the ports this process reserved for the realm (none
	// after Load: the running daemons hold them then).
	leases []*PortLease
}

func (r *Realm) path(name string) string { return filepath.Join(r.Dir, name) }

// Up creates the realm in opts.Dir and starts krb5kdc (and kadmind unless
// NoKadmind), returning once the KDC answers a request. On error nothing is
// left running and the directory is removed. With opts.Trust the trusted
// realm is created and started too (Trusted).
func Up(ctx context.Context, opts Options) (*Realm, error) {
	r, err := Create(ctx, opts)
	if err != nil {
		return nil, err
	}
	if r.Opts.Trust != "" {
		if r.Trusted, err = r.upTrusted(ctx); err != nil {
			r.Down()
			return nil, err
		}
	}
	if err := r.Start(ctx); err != nil {
		r.Down()
		return nil, err
	}
	if r.Trusted != nil {
		if err := r.Trusted.Start(ctx); err != nil {
			r.Down()
			return nil, err
		}
	}
	return r, nil
}

// Create writes the configuration and the populated database but starts
// nothing.
func Create(ctx context.Context, opts Options) (*Realm, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	if opts.LogToSyslog { // refused before anything is written
		check := checkSyslog
		if opts.SyslogSocket != "" {
			check = checkNamespaces
		}
		if err := check(ctx); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("realm: %w", err)
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	r := &Realm{Opts: opts, Realm: opts.Realm, Domain: opts.Domain, bins: bins}
	r.setPaths(dir)
	if err := r.assignPorts(); err != nil {
		os.RemoveAll(dir)
		r.releasePorts()
		return nil, err
	}
	if opts.KDCProxy {
		if err := r.setupKDCProxy(); err != nil {
			os.RemoveAll(dir)
			r.releasePorts()
			return nil, err
		}
	}
	start := time.Now()
	if err := r.writeConfigs(); err != nil {
		os.RemoveAll(dir)
		r.releasePorts()
		return nil, err
	}
	if err := r.createDatabase(ctx); err != nil {
		os.RemoveAll(dir)
		r.releasePorts()
		return nil, err
	}
	r.Created = time.Since(start)
	if err := r.save(); err != nil {
		os.RemoveAll(dir)
		r.releasePorts()
		return nil, err
	}
	return r, nil
}

// setPaths derives every file of the realm from its directory: a realm.json
// that names other paths is never believed.
func (r *Realm) setPaths(dir string) {
	r.Dir = dir
	r.Opts.Dir = dir
	r.KDCConf = r.path("kdc.conf")
	r.Krb5Conf = r.path("krb5.conf")
	r.CCache = r.path("ccache")
	r.UserKeytab = r.path("users.keytab")
	r.ServiceKeytab = r.path("services.keytab")
	r.AdminPrincipal = "admin/admin@" + r.Realm
	r.AdminKeytab = r.path("admin.keytab")
	r.ProbePrincipal = ProbeName + "@" + r.Realm
	r.ProbeKeytab = r.path("probe.keytab")
	r.KDCLog = r.path("krb5kdc.log")
	r.KadmindLog = r.path("kadmind.log")
	r.KDCPidFile = r.path("krb5kdc.pid")
	r.KadmindPidFile = r.path("kadmind.pid")
	r.IpropLog = r.path("principal.ulog")
	r.DumpFile = r.path("replica_datatrans")
	if r.Opts.LogToSyslog && r.Opts.SyslogSocket == "" {
		r.JournalDir = r.path("journal")
	}
}

// prepareDir makes dir (0700: it will hold keytabs) or accepts it empty,
// a real directory (not a link) owned by the effective user: whoever owns
// the directory controls the keys written into it.
func prepareDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return fmt.Errorf("realm: %w", err)
		}
		// Mkdir, not MkdirAll: it fails if someone created dir meanwhile.
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("realm: %w", err)
		}
		return os.Chmod(dir, 0o700)
	}
	if err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	if err := ownDir(dir, fi); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("realm: directory %s is not empty; refusing to write a realm into it", dir)
	}
	return os.Chmod(dir, 0o700)
}

// ownDir checks that fi (from Lstat of dir) is a directory, not a link,
// owned by the effective user and writable by no one else.
func ownDir(dir string, fi os.FileInfo) error {
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("realm: %s is a symbolic link; refusing to use it", dir)
	case !fi.IsDir():
		return fmt.Errorf("realm: %s is not a directory", dir)
	}
	if err := ownedByMe(fi); err != nil {
		return fmt.Errorf("realm: directory %s: %w", dir, err)
	}
	return nil
}

// ownedByMe checks that a file belongs to the effective user and that no
// one else may write it.
func ownedByMe(fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no owner information")
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("owned by uid %d, not by the effective user (uid %d); refusing to use it", st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("writable by others (mode %04o); refusing to use it", perm)
	}
	return nil
}

// maxStateFile bounds realm.json (a few kB when written by Create).
const maxStateFile = 1 << 20

// Load reads the realm recorded in dir by Create. dir decides where the
// realm is: the directory and its realm.json must belong to the effective
// user and be writable by no one else, the recorded directory must be dir,
// and every path is derived from dir, never taken from the file, so that
// whoever could edit realm.json cannot make Down remove or signal anything
// outside it.
func Load(dir string) (*Realm, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("realm: %w", err)
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return nil, fmt.Errorf("realm: no realm in %s: %w", dir, err)
	}
	if err := ownDir(abs, fi); err != nil {
		return nil, err
	}
	state := filepath.Join(abs, stateFile)
	f, err := os.OpenFile(state, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("realm: no realm in %s: %w", dir, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("realm: %s: %w", state, err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxStateFile {
		return nil, fmt.Errorf("realm: %s is not a realm state file", state)
	}
	if err := ownedByMe(fi); err != nil {
		return nil, fmt.Errorf("realm: %s: %w", state, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStateFile))
	if err != nil {
		return nil, fmt.Errorf("realm: %s: %w", state, err)
	}
	r := &Realm{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("realm: %s: %w", state, err)
	}
	if r.Dir != abs {
		return nil, fmt.Errorf("realm: %s records the directory %q, not %s; refusing to use it", state, r.Dir, abs)
	}
	r.setPaths(abs)
	if len(r.Opts.SyslogRelay) > 0 {
		// A command from the state file is never run: the relay is this
		// program's, for this directory.
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("realm: %w", err)
		}
		r.Opts.SyslogRelay = []string{exe, "realm", RelayCommand, "--dir", abs}
	}
	if r.KDCProxy != nil {
		r.KDCProxy.setPaths(r)
	}
	if r.Replica != nil {
		// A replica's own files, like every other path, come from the
		// directory given, never from the state file.
		r.Replica.setPaths(r)
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	r.bins = bins
	if err := r.loadTrusted(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Realm) save() error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	if err := safefile.Write(r.path(stateFile), data, 0o600); err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	return nil
}

// Start starts krb5kdc, its KDC proxy if any, and kadmind unless
// NoKadmind; on a replica kpropd instead of kadmind.
func (r *Realm) Start(ctx context.Context) error {
	if err := r.StartKDC(ctx); err != nil {
		return err
	}
	if r.KDCProxy != nil {
		if err := r.StartKDCProxy(ctx); err != nil {
			return err
		}
	}
	if r.Replica != nil {
		return r.StartKpropd(ctx)
	}
	if r.Opts.NoKadmind {
		return nil
	}
	return r.StartKadmind(ctx)
}

// Down stops the daemons and removes the directory with everything in it
// (database, stash, keytabs: they hold keys). It reports the first error
// but always tries every step.
func (r *Realm) Down() error {
	errs := []error{r.downTrusted(), r.StopKDCProxy(), r.StopKpropd(), r.StopKadmind(), r.StopKDC(), r.stopSyslog()}
	r.releasePorts()
	if err := os.RemoveAll(r.Dir); err != nil {
		errs = append(errs, fmt.Errorf("realm: %w", err))
	}
	return errors.Join(errs...)
}

// Env is what a client (kinit, kvno, kadmin, the exporter) needs to use
// this realm instead of the system's.
func (r *Realm) Env() []string {
	return []string{
		"KRB5_CONFIG=" + r.Krb5Conf,
		"KRB5_KDC_PROFILE=" + r.KDCConf,
		"KRB5CCNAME=FILE:" + r.CCache,
	}
}

// User is the principal name of user i (1-based).
func (r *Realm) User(i int) string { return fmt.Sprintf("%s@%s", r.userName(i), r.Realm) }

// Service is the principal name of service i (1-based).
func (r *Realm) Service(i int) string { return fmt.Sprintf("%s@%s", r.serviceName(i), r.Realm) }

func (r *Realm) userName(i int) string { return fmt.Sprintf("user%04d", i) }

func (r *Realm) serviceName(i int) string {
	return fmt.Sprintf("HTTP/web%04d.%s", i, r.Domain)
}

func (r *Realm) fillerName(i int) string { return fmt.Sprintf("filler%05d", i) }
