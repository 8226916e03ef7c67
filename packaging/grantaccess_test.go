package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// grant-access (root, every start) refuses a symbolic link or a FIFO at a
// log path: an ACL for the service user landed on the link's target (issue
// 26 item 8). The regular log next to them gets its grant; the link's
// target, as getfacl reads it, gets nothing, also from --revoke.
func TestGrantAccessRefusesLinks(t *testing.T) {
	for _, tool := range []string{"setfacl", "getfacl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not installed (make deps installs it)", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	// The packaged script, granting to nobody instead of the service
	// user this machine may not have.
	b, err := os.ReadFile("files/grant-access")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nuser="+svcUser+"\n") {
		t.Fatal("grant-access sets no user=" + svcUser)
	}
	script := filepath.Join(dir, "grant-access")
	if err := os.WriteFile(script, []byte(strings.Replace(string(b), "\nuser="+svcUser+"\n", "\nuser=nobody\n", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	logs := filepath.Join(dir, "logs")
	os.WriteFile(secret, []byte("x"), 0o600)
	os.Mkdir(logs, 0o755)
	link, fifo, real := filepath.Join(logs, "krb5kdc.log"), filepath.Join(logs, "fifo.log"), filepath.Join(logs, "kadmind.log")
	os.Symlink(secret, link)
	syscall.Mkfifo(fifo, 0o600)
	os.WriteFile(real, nil, 0o600)

	run := func(args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, script, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	acl := func(path string) string {
		t.Helper()
		out, err := exec.Command("getfacl", "-p", path).CombinedOutput()
		if err != nil {
			t.Fatalf("getfacl %s: %v %s", path, err, out)
		}
		return string(out)
	}
	out, code := run(link, fifo, real)
	if code != 1 || !strings.Contains(out, link+" is a symbolic link") || !strings.Contains(out, fifo+" is not a regular file") {
		t.Errorf("exit %d, want 1 and both refusals:\n%s", code, out)
	}
	if a := acl(secret); strings.Contains(a, "user:nobody") {
		t.Errorf("the link's target was granted:\n%s", a)
	}
	if a := acl(real); !strings.Contains(a, "user:nobody:r--") {
		t.Errorf("the regular log was not granted (%s):\n%s", out, a)
	}

	if out, err := exec.Command("setfacl", "-m", "u:nobody:r", secret).CombinedOutput(); err != nil {
		t.Fatalf("setfacl: %v %s", err, out)
	}
	run("--revoke", link)
	if a := acl(secret); !strings.Contains(a, "user:nobody:r--") {
		t.Errorf("--revoke changed the link's target:\n%s", a)
	}
}

// grant-access without arguments: read access to the log files kdc.conf's
// and krb5.conf's [logging] name for the KDC and kadmind (what an entry
// without a path follows), never to another FILE: value there (a keytab);
// and traverse only on the database directory (Debian's is 0700): as the
// user, stat() of a real database made by kdb5_util works (the kdcconf
// collector's size and age), reading it, its stash or the directory's
// list does not. --revoke takes it all back.
func TestGrantAccessLogsAndDatabase(t *testing.T) {
	needRoot(t, "setfacl", "getfacl", "setpriv", "kdb5_util")
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	b, err := os.ReadFile("files/grant-access")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	for _, v := range []string{"user=" + svcUser, "config=/etc/krb5-exporter/config.yml", `kdcconfs="/etc/krb5kdc/kdc.conf /var/kerberos/krb5kdc/kdc.conf"`,
		"krb5conf=/etc/krb5.conf", `dbdirs="/var/lib/krb5kdc /var/kerberos/krb5kdc"`} {
		if !strings.Contains(script, "\n"+v+"\n") {
			t.Fatalf("grant-access sets no %s", v)
		}
	}
	db, logs := filepath.Join(dir, "krb5kdc"), filepath.Join(dir, "logs")
	os.Mkdir(db, 0o700)
	os.Mkdir(logs, 0o700)
	kdcConf, krb5Conf := filepath.Join(dir, "kdc.conf"), filepath.Join(dir, "krb5.conf")
	for old, new := range map[string]string{"\nuser=" + svcUser + "\n": "\nuser=nobody\n", "\nconfig=/etc/krb5-exporter/config.yml\n": "\nconfig=/nonexistent\n",
		"\nkdcconfs=\"/etc/krb5kdc/kdc.conf /var/kerberos/krb5kdc/kdc.conf\"\n": "\nkdcconfs=" + kdcConf + "\n",
		"\nkrb5conf=/etc/krb5.conf\n":                                           "\nkrb5conf=" + krb5Conf + "\n", "\ndbdirs=\"/var/lib/krb5kdc /var/kerberos/krb5kdc\"\n": "\ndbdirs=" + db + "\n"} {
		script = strings.Replace(script, old, new, 1)
	}
	path := filepath.Join(dir, "grant-access")
	os.WriteFile(path, []byte(script), 0o755)
	kdcLog, kadmLog, libLog, keytab := filepath.Join(logs, "kdc.log"), filepath.Join(logs, "kadmind.log"), filepath.Join(logs, "libs.log"), filepath.Join(dir, "host.keytab")
	for _, f := range []string{kdcLog, kadmLog, libLog, keytab} {
		os.WriteFile(f, []byte("x\n"), 0o600)
	}
	principal, stash := filepath.Join(db, "principal"), filepath.Join(db, "stash")
	os.WriteFile(kdcConf, []byte("[realms]\n\tGA.TEST = {\n\t\tdatabase_name = "+principal+"\n\t\tkey_stash_file = "+stash+"\n\t}\n[logging]\n\tkdc = FILE:"+kdcLog+"\n"), 0o600)
	os.WriteFile(krb5Conf, []byte("[libdefaults]\n\tdefault_realm = GA.TEST\n\tdefault_keytab_name = FILE:"+keytab+"\n[logging]\n\tadmin_server = FILE="+kadmLog+"\n\tdefault = FILE:"+libLog+"\n"), 0o644)
	create := exec.Command("kdb5_util", "create", "-s", "-r", "GA.TEST", "-P", "master-password")
	create.Env = append(os.Environ(), "KRB5_KDC_PROFILE="+kdcConf, "KRB5_CONFIG="+krb5Conf)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("kdb5_util create: %v %s", err, out)
	}
	fi, err := os.Stat(principal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stash); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(path).CombinedOutput(); err != nil {
		t.Fatalf("grant-access: %v\n%s", err, out)
	}
	asNobody := func(args ...string) (string, error) {
		out, err := exec.Command("setpriv", append([]string{"--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := asNobody("stat", "-c", "%s %Y", principal); err != nil || out != fmt.Sprintf("%d %d\n", fi.Size(), fi.ModTime().Unix()) {
		t.Errorf("stat of the database as the user: %v %q, want its size and mtime", err, out)
	}
	for _, f := range []string{principal, stash, db, keytab, libLog} {
		if out, err := asNobody("cat", f); err == nil {
			t.Errorf("the user can read %s: %q", f, out)
		}
	}
	if out, err := asNobody("ls", db); err == nil {
		t.Errorf("the user can list %s: %q", db, out)
	}
	for _, f := range []string{kdcLog, kadmLog} {
		if out, err := asNobody("cat", f); err != nil {
			t.Errorf("the user cannot read %s: %v %s", f, err, out)
		}
	}
	if out, err := exec.Command(path, "--revoke").CombinedOutput(); err != nil {
		t.Fatalf("grant-access --revoke: %v\n%s", err, out)
	}
	for _, f := range []string{db, kdcLog, kadmLog, logs} {
		if out, _ := exec.Command("getfacl", "-p", f).CombinedOutput(); strings.Contains(string(out), "nobody") {
			t.Errorf("--revoke left a grant on %s:\n%s", f, out)
		}
	}
}
