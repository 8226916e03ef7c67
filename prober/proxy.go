package prober

import (
	"fmt"
	"os"
	"syscall"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// proxyCA is a module's proxy_ca_file, read again when it changes (a
// renewed CA needs no reload) and, when it does not load, failing the
// probe before anything is sent: a probe never falls back to other roots.
type proxyCA struct {
	mod   config.ProbeModule
	stamp string // size, mtime and inode of the file last read
	err   error  // why the file last read did not load
}

// PhaseProxyCA is the phase of a probe that failed on its proxy_ca_file.
const PhaseProxyCA = "proxy_ca"

// refresh loads the CA file into c when it changed since the last read.
func (ca *proxyCA) refresh(c *krb5.Client) error {
	stamp := ""
	if fi, err := os.Stat(ca.mod.ProxyCAFile); err == nil {
		ino := uint64(0)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		stamp = fmt.Sprint(fi.Size(), fi.ModTime().UnixNano(), ino)
	}
	if stamp != "" && stamp == ca.stamp {
		return ca.err
	}
	ca.stamp = stamp
	roots, err := ca.mod.ProxyRoots()
	if err == nil {
		err = c.SetProxyRoots(roots)
	}
	ca.err = err
	return err
}

// refreshCA is the step before a login over transport https with a
// proxy_ca_file: the login's error when the file does not load, else nil.
func (t *Target) refreshCA() error {
	if t.ca == nil {
		return nil
	}
	if err := t.ca.refresh(t.client); err != nil {
		return &krb5.Error{Class: krb5.ClassTLS, Phase: PhaseProxyCA, Err: err}
	}
	return nil
}
