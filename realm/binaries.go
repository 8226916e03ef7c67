package realm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// binaries are the MIT programs the harness runs.
type binaries struct {
	KDC, Kadmind, KDB5Util, KadminLocal string
	// Kpropd is optional (Debian package krb5-kpropd): only replicas need it.
	Kpropd string
}

// sbinDirs are searched after PATH: Debian and RHEL keep the servers in
// /usr/sbin, which a non-root PATH often lacks; kadmin is in /usr/bin.
var sbinDirs = []string{"/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin"}

// LookPath finds a program (krb5kdc, kadmin.local, gunicorn...): in
// PATH, then in the sbin directories a non-root PATH often lacks; there,
// only an executable regular file.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range sbinDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

func findBinaries() (binaries, error) {
	var b binaries
	var missing []string
	for _, x := range []struct {
		name string
		dst  *string
	}{{"krb5kdc", &b.KDC}, {"kadmind", &b.Kadmind}, {"kdb5_util", &b.KDB5Util}, {"kadmin.local", &b.KadminLocal}} {
		p, err := LookPath(x.name)
		if err != nil {
			missing = append(missing, x.name)
			continue
		}
		*x.dst = p
	}
	b.Kpropd, _ = LookPath("kpropd")
	if len(missing) > 0 {
		return b, fmt.Errorf("realm: MIT Kerberos server programs missing (%s); on Debian: apt-get install krb5-kdc krb5-admin-server krb5-user",
			strings.Join(missing, ", "))
	}
	return b, nil
}

// Available reports whether the MIT server programs are installed; tests
// skip with this error when they are not.
func Available() error {
	_, err := findBinaries()
	return err
}

// KpropdAvailable reports whether kpropd, which replicas need, is
// installed.
func KpropdAvailable() error {
	if _, err := LookPath("kpropd"); err != nil {
		return fmt.Errorf("realm: kpropd missing; on Debian: apt-get install krb5-kpropd")
	}
	return nil
}
