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
	"os"
	"path/filepath"
	"time"
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

	// Created is how long creating the database and keytabs took.
	Created time.Duration `json:"created_ns"`

	bins binaries
}

func (r *Realm) path(name string) string { return filepath.Join(r.Dir, name) }

// setPaths names the files every realm, primary or replica, keeps in Dir.
func (r *Realm) setPaths() {
	r.KDCConf = r.path("kdc.conf")
	r.Krb5Conf = r.path("krb5.conf")
	r.CCache = r.path("ccache")
	r.KDCLog = r.path("krb5kdc.log")
	r.KadmindLog = r.path("kadmind.log")
	r.KDCPidFile = r.path("krb5kdc.pid")
	r.KadmindPidFile = r.path("kadmind.pid")
	r.IpropLog = r.path("principal.ulog")
	r.DumpFile = r.path("replica_datatrans")
}

// Up creates the realm in opts.Dir and starts krb5kdc (and kadmind unless
// NoKadmind), returning once the KDC answers a request. On error nothing is
// left running and the directory is removed.
func Up(ctx context.Context, opts Options) (*Realm, error) {
	r, err := Create(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		r.Down()
		return nil, err
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
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("realm: %w", err)
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	r := &Realm{Opts: opts, Realm: opts.Realm, Domain: opts.Domain, Dir: dir, bins: bins}
	r.Opts.Dir = dir
	r.setPaths()
	r.UserKeytab = r.path("users.keytab")
	r.ServiceKeytab = r.path("services.keytab")
	r.AdminPrincipal = "admin/admin@" + r.Realm
	r.AdminKeytab = r.path("admin.keytab")
	r.ProbePrincipal = ProbeName + "@" + r.Realm
	r.ProbeKeytab = r.path("probe.keytab")
	if err := r.assignPorts(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	start := time.Now()
	if err := r.writeConfigs(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := r.createDatabase(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r.Created = time.Since(start)
	if err := r.save(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

// prepareDir makes dir (0700: it will hold keytabs) or accepts it empty.
func prepareDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("realm: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("realm: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("realm: directory %s is not empty; refusing to write a realm into it", dir)
	}
	return os.Chmod(dir, 0o700)
}

// Load reads the realm recorded in dir by Create.
func Load(dir string) (*Realm, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("realm: no realm in %s: %w", dir, err)
	}
	r := &Realm{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("realm: %s: %w", filepath.Join(dir, stateFile), err)
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	r.bins = bins
	return r, nil
}

func (r *Realm) save() error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	tmp := r.path(stateFile + ".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	return os.Rename(tmp, r.path(stateFile))
}

// Start starts krb5kdc, and kadmind unless NoKadmind; on a replica
// kpropd instead of kadmind.
func (r *Realm) Start(ctx context.Context) error {
	if err := r.StartKDC(ctx); err != nil {
		return err
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
	errs := []error{r.StopKpropd(), r.StopKadmind(), r.StopKDC()}
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
