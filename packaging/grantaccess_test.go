package main

import (
	"context"
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
