package collector

import (
	"reflect"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5profile"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

func TestRegisterFlags(t *testing.T) {
	t.Setenv("KRB5_KDC_PROFILE", "")
	t.Setenv("KRB5_CONFIG", "")
	app := kingpin.New("test", "")
	cfg := RegisterFlags(app)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	// The defaults the README's flag table documents, written out here
	// rather than taken from the code under test: --path.procfs /proc,
	// every collector on, the TCP connection count off, no pid files, the
	// profile paths left to kdcConfPaths/krb5ConfPaths.
	documented := Config{ProcFS: "/proc", Process: true, Network: true, KDCConf: true, Replication: true}
	if !reflect.DeepEqual(*cfg, documented) {
		t.Errorf("flag defaults = %+v, want the documented %+v", *cfg, documented)
	}
	if !reflect.DeepEqual(DefaultConfig(), documented) {
		t.Errorf("DefaultConfig() = %+v, want the documented %+v", DefaultConfig(), documented)
	}

	app = kingpin.New("test", "")
	cfg = RegisterFlags(app)
	_, err := app.Parse([]string{"--path.procfs=/host/proc", "--no-collector.network", "--collector.process.krb5kdc-pidfile=/run/krb5kdc.pid",
		"--collector.kdcconf.path=/a/kdc.conf:/b/kdc.conf", "--collector.kdcconf.krb5-config=/x/krb5.conf",
		"--collector.replication.dump-file=/srv/kprop/dump", "--collector.network.tcp-connections",
		"--collector.process.user=krb5", "--collector.process.user=4242", "--collector.process.exe=/opt/mit/sbin/krb5kdc", "--collector.process.unit=kdc-a.service"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{ProcFS: "/host/proc", Process: true, KDCConf: true, Replication: true, TCPConnections: true, KDCPidFile: "/run/krb5kdc.pid",
		DumpFile: "/srv/kprop/dump", KDCConfPath: "/a/kdc.conf:/b/kdc.conf", Krb5ConfPath: "/x/krb5.conf",
		Identity: kdcproc.Identity{Users: []string{"krb5", "4242"}, Executables: []string{"/opt/mit/sbin/krb5kdc"}, Units: []string{"kdc-a.service"}}}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("parsed = %+v, want %+v", *cfg, want)
	}
	if got := cfg.pidFiles(); len(got) != 1 || got[progKDC] != "/run/krb5kdc.pid" {
		t.Errorf("pid files = %v", got)
	}
}

func TestRegisterFlagsOnCommand(t *testing.T) {
	app := kingpin.New("test", "")
	serve := app.Command("serve", "").Default()
	cfg := RegisterFlags(serve)
	app.Command("other", "")
	if _, err := app.Parse([]string{"serve", "--no-collector.kdcconf", "--collector.process.kadmind-pidfile=/run/kadmind.pid"}); err != nil {
		t.Fatal(err)
	}
	if !cfg.Process || !cfg.Network || cfg.KDCConf || cfg.KadmindPidFile != "/run/kadmind.pid" {
		t.Errorf("parsed = %+v", *cfg)
	}
}

// TestKDCProfileEnv: like MIT, KRB5_KDC_PROFILE and KRB5_CONFIG name the
// files when no flag does.
func TestKDCProfileEnv(t *testing.T) {
	t.Setenv("KRB5_KDC_PROFILE", "/env/kdc.conf")
	t.Setenv("KRB5_CONFIG", "/env/krb5.conf")
	app := kingpin.New("test", "")
	cfg := RegisterFlags(app)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if cfg.kdcConfPaths() != "/env/kdc.conf" || cfg.krb5ConfPaths() != "/env/krb5.conf" {
		t.Errorf("paths = %q, %q", cfg.kdcConfPaths(), cfg.krb5ConfPaths())
	}
}

func TestKDCConfDefault(t *testing.T) {
	dir := t.TempDir()
	rhel := testutil.WriteFile(t, dir, "var/kerberos/krb5kdc/kdc.conf", "[realms]\n")
	old := krb5profile.KDCConfCandidates
	defer func() { krb5profile.KDCConfCandidates = old }()
	krb5profile.KDCConfCandidates = []string{dir + "/etc/krb5kdc/kdc.conf", rhel}
	if got := (Config{}).kdcConfPaths(); got != rhel {
		t.Errorf("default kdc.conf = %s, want the existing RHEL one", got)
	}
	testutil.WriteFile(t, dir, "etc/krb5kdc/kdc.conf", "[realms]\n")
	if got := (Config{}).kdcConfPaths(); got != krb5profile.KDCConfCandidates[0] {
		t.Errorf("default kdc.conf = %s, want the Debian one when both exist", got)
	}
	if got := (Config{}).krb5ConfPaths(); got != "/etc/krb5.conf" {
		t.Errorf("default krb5.conf = %s", got)
	}
	if defaultDatabase([]string{rhel}) != debianDatabase || defaultDatabase([]string{"/var/kerberos/krb5kdc/kdc.conf"}) != rhelDatabase {
		t.Error("default database does not follow the distribution of kdc.conf")
	}
}
