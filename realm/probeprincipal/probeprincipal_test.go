package probeprincipal

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// The printed snippet names no log file unless told: the exporter then
// follows what kdc.conf says, on Debian (the journal) as on RHEL (a file),
// for the KDC and kadmind, as the packaged configuration does.
func TestProbeConfigLog(t *testing.T) {
	v := map[string]string{"Principal": "p@R", "Realm": "R", "Keytab": "/k", "KDC": "127.0.0.1:88", "Keys": "4", "Kvno": "2", "Owner": ""}
	for kdcLog, want := range map[string][]config.LogSource{
		"":                     {{Type: "kdc", ProbePrincipals: []string{"p@R"}}, {Type: "kadmind"}},
		"/var/log/krb5kdc.log": {{Type: "kdc", Path: "/var/log/krb5kdc.log", ProbePrincipals: []string{"p@R"}}, {Type: "kadmind"}},
	} {
		v["KDCLog"] = kdcLog
		var b strings.Builder
		if err := probeConfigTmpl.Execute(&b, v); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "snippet.yml")
		os.WriteFile(path, []byte(b.String()), 0o600)
		cfg, err := config.LoadDeferringKeys(path) // no keytab here
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cfg.Logs, want) {
			t.Errorf("--kdc-log %q: logs %+v, want %+v\n%s", kdcLog, cfg.Logs, want, b.String())
		}
	}
}

// prepareInstall refuses, before kadmin changes any key, a destination
// that is a link (its replacement would move the keytab elsewhere), a FIFO
// or a directory, and leaves nothing behind; installKeytab then puts a
// keytab in place mode 0600 whatever mode kadmin wrote it with.
func TestPrepareInstall(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere.keytab")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	link, fifo, sub := filepath.Join(dir, "link.keytab"), filepath.Join(dir, "fifo.keytab"), filepath.Join(dir, "sub.keytab")
	if err := errors.Join(os.Symlink(target, link), syscall.Mkfifo(fifo, 0o600), os.Mkdir(sub, 0o700)); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	for dest, want := range map[string]string{link: "symbolic link", fifo: "not a regular file", sub: "not a regular file"} {
		if tmp, err := prepareInstall(dest, uid, gid); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q, %v; want an error saying %q", filepath.Base(dest), tmp, err, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Errorf("left behind in %s: %v", dir, entries)
	}

	dest := filepath.Join(dir, "probe.keytab")
	tmpDir, err := prepareInstall(dest, uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(tmpDir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(tmpDir) != dir || fi.Mode().Perm() != 0o700 {
		t.Fatalf("private directory %s of mode %v; want 0700 next to the keytab", tmpDir, fi.Mode().Perm())
	}
	tmp := filepath.Join(tmpDir, "probe.keytab")
	if err := os.WriteFile(tmp, []byte("keys"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := installKeytab(tmp, dest, uid, gid); err != nil {
		t.Fatal(err)
	}
	if fi, err = os.Lstat(dest); err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("installed keytab: %v, want a regular file of mode 0600", fi.Mode())
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Errorf("the link's target changed: %q", b)
	}
}
