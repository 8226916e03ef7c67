// Package probeprincipal provisions the exporter's own probe principal,
// for `krb5-exporter realm probe-principal`: on a KDC host with
// kadmin.local, or anywhere with an admin keytab with kadmin, it creates
// the principal with a random key, exports the key to a keytab readable by
// the service user alone, and prints the configuration that probes with
// it. The key is never printed.
package probeprincipal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/keytab"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Options are what `realm probe-principal` takes, each the flag of its
// name; the errors name the flags.
type Options struct {
	Principal string // name or name@REALM
	Realm     string // empty: the principal's, else the default realm of krb5.conf
	Keytab    string // replaced atomically
	Owner     string // the keytab's owner; empty: the user running this
	Rotate    bool   // give an existing principal a new random key
	KDC       string // written into the printed configuration
	KDCLog    string // likewise; empty: none, the exporter follows kdc.conf

	// With AdminKeytab, kadmin over the network as AdminPrincipal (at
	// AdminServer, else krb5.conf's admin_server) instead of kadmin.local.
	AdminPrincipal, AdminKeytab, AdminServer string
}

// commandLimit bounds each kadmin command.
const commandLimit = time.Minute

// Create makes the probe principal of o with a random key (an existing one
// only with o.Rotate), installs its keytab at o.Keytab (mode 0600, owned by
// o.Owner) and writes to w the configuration that probes with it, once the
// exporter accepts it. Everything the install needs is checked before the
// key changes; a failure after it keeps the new keytab and says where.
func Create(o Options, w io.Writer) error {
	name, realm, _ := strings.Cut(o.Principal, "@")
	if o.Realm != "" {
		realm = o.Realm
	}
	if name == "" || strings.ContainsAny(name, " \t\n\"'") || strings.ContainsAny(realm, " \t\n\"'") {
		return fmt.Errorf("invalid principal %q", o.Principal)
	}
	if (o.AdminKeytab == "") != (o.AdminPrincipal == "") {
		return errors.New("--admin-keytab and --admin-principal go together")
	}
	uid, gid, err := lookupOwner(o.Owner)
	if err != nil {
		return err
	}
	dest, err := filepath.Abs(o.Keytab)
	if err != nil {
		return err
	}
	princ := name
	if realm != "" {
		princ += "@" + realm
	}

	// Everything installing the keytab needs is checked before kadmin
	// changes a key: a failure after it would leave the principal with a
	// key that no deployed keytab holds.
	tmpDir, err := prepareInstall(dest, uid, gid)
	if err != nil {
		return err
	}
	tmp := filepath.Join(tmpDir, "probe.keytab")
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmpDir)
		}
	}()
	// kept is an error after the key changed: the new keytab stays where
	// kadmin wrote it, and the error says where.
	kept := func(err error) error {
		if fi, serr := os.Stat(tmp); serr != nil || fi.Size() == 0 {
			return err
		}
		keep = true
		return fmt.Errorf("%w; the principal's new key is kept in %s (its old keytabs no longer work): put that file in place of %s (mode 0600, owner %s)",
			err, tmp, dest, ownerSpec(uid, gid))
	}

	ctx, cancel := context.WithTimeout(context.Background(), commandLimit)
	defer cancel()
	out, err := o.kadminRun(ctx, realm, "addprinc -randkey +requires_preauth "+princ)
	if err != nil {
		if !strings.Contains(err.Error(), "already exists") {
			return err
		}
		if !o.Rotate {
			return fmt.Errorf("principal %s already exists; --rotate gives it a new key (its current keytabs stop working)", princ)
		}
	} else if !strings.Contains(out, "created") {
		return fmt.Errorf("kadmin did not confirm creating %s: %s", princ, strings.TrimSpace(out))
	}

	// ktadd gives the principal a fresh random key as it exports it, into
	// the private directory next to the destination; the file is then
	// owned, fsynced and renamed into place.
	if _, err := o.kadminRun(ctx, realm, "ktadd -k "+tmp+" "+princ); err != nil {
		return kept(err)
	}
	entries, err := readKeytab(tmp)
	if err != nil {
		return kept(err)
	}
	if len(entries) == 0 {
		return fmt.Errorf("kadmin wrote an empty keytab for %s", princ)
	}
	e := entries[0]
	if realm == "" {
		realm = e.Realm
		princ += "@" + realm
	}
	if err := installKeytab(tmp, dest, uid, gid); err != nil {
		return kept(fmt.Errorf("installing the keytab at %s: %w", dest, err))
	}
	return printProbeConfig(w, map[string]string{
		"Principal": princ, "Realm": realm, "Keytab": dest, "KDC": o.KDC, "KDCLog": o.KDCLog,
		"Owner": o.Owner, "Kvno": strconv.Itoa(int(e.KVNO)), "Keys": strconv.Itoa(len(entries)),
	})
}

// kadminRun runs one kadmin command: kadmin.local, or kadmin with the admin
// keytab. Both exit 0 when the command itself fails and say so on stderr,
// so stderr decides, less the warning every addprinc prints on a realm
// without a default policy.
func (o *Options) kadminRun(ctx context.Context, realmName, command string) (string, error) {
	var args []string
	prog := "kadmin.local"
	if o.AdminKeytab != "" {
		prog = "kadmin"
		args = append(args, "-p", o.AdminPrincipal, "-k", "-t", o.AdminKeytab)
		if o.AdminServer != "" {
			args = append(args, "-s", o.AdminServer)
		}
	}
	if realmName != "" {
		args = append(args, "-r", realmName)
	}
	path, err := realm.LookPath(prog)
	if err != nil {
		return "", fmt.Errorf("%w (Debian: krb5-admin-server for kadmin.local, krb5-user for kadmin)", err)
	}
	cmd := exec.CommandContext(ctx, path, append(args, "-q", command)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var problems []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "No policy specified for") || strings.HasPrefix(l, "Authenticating as principal") {
			continue
		}
		problems = append(problems, l)
	}
	verb, _, _ := strings.Cut(command, " ")
	switch {
	case len(problems) > 0:
		return stdout.String(), fmt.Errorf("%s %s: %s", prog, verb, strings.Join(problems, " | "))
	case runErr != nil:
		return stdout.String(), fmt.Errorf("%s %s: %v", prog, verb, runErr)
	}
	return stdout.String(), nil
}

// lookupOwner resolves the keytab's owner; empty means the current user.
func lookupOwner(name string) (uid, gid int, err error) {
	if name == "" {
		return os.Getuid(), os.Getgid(), nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("keytab owner: %w (create the service user first, or pass --owner)", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// readKeytab reads the keytab kadmin wrote into the private directory.
func readKeytab(path string) ([]keytab.Entry, error) {
	b, _, err := safefile.ReadFile(path, keytab.MaxFile, 0)
	if err != nil {
		return nil, err
	}
	entries, err := keytab.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("keytab written by kadmin: %w", err)
	}
	return entries, nil
}

// prepareInstall checks that a keytab can be installed at dest, owned by
// uid:gid, and returns a new private directory next to dest for kadmin to
// write it into: dest is a regular file or absent (not a directory, nor a
// link whose replacement would silently change where the keytab lives), its
// directory takes new files and renames, and a file there can be given to
// the owner.
func prepareInstall(dest string, uid, gid int) (string, error) {
	if fi, err := os.Lstat(dest); err == nil {
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return "", fmt.Errorf("keytab %s is a symbolic link: give the path of the file itself", dest)
		case !fi.Mode().IsRegular():
			return "", fmt.Errorf("keytab %s is a %s, not a regular file", dest, safefile.Kind(fi.Mode()))
		}
		if d, err := os.Stat(filepath.Dir(dest)); err == nil && d.Mode()&os.ModeSticky != 0 && os.Geteuid() != 0 {
			if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() && int(d.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
				return "", fmt.Errorf("keytab %s belongs to uid %d in a sticky directory: it cannot be replaced", dest, st.Uid)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("keytab %s: %w", dest, err)
	}
	tmpDir, err := os.MkdirTemp(filepath.Dir(dest), ".probe-principal-")
	if err != nil {
		return "", fmt.Errorf("keytab %s: its directory takes no new file: %w", dest, err)
	}
	check := filepath.Join(tmpDir, "owner-check")
	err = os.WriteFile(check, nil, 0o600)
	if err == nil && (uid != os.Getuid() || gid != os.Getgid()) {
		if err = os.Chown(check, uid, gid); err != nil {
			err = fmt.Errorf("keytab owner %s: %w", ownerSpec(uid, gid), err)
		}
	}
	if err == nil {
		err = os.Remove(check)
	}
	if err != nil {
		os.RemoveAll(tmpDir)
		return "", err
	}
	return tmpDir, nil
}

func ownerSpec(uid, gid int) string { return strconv.Itoa(uid) + ":" + strconv.Itoa(gid) }

// installKeytab makes tmp mode 0600 owned by uid:gid, flushes it and
// renames it over dest, so that dest is never partly written or readable
// by anyone else.
func installKeytab(tmp, dest string, uid, gid int) error {
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if uid != os.Getuid() || gid != os.Getgid() {
		if err := f.Chown(uid, gid); err != nil {
			return fmt.Errorf("keytab owner: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(dest))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

var probeConfigTmpl = template.Must(template.New("").Parse(`# Probe principal {{.Principal}}: {{.Keys}} keys (kvno {{.Kvno}}) in {{.Keytab}}
# (mode 0600{{if .Owner}}, owner {{.Owner}}{{end}}). A whole /etc/krb5-exporter/config.yml, or sections to merge
# into it; then systemctl reload krb5-exporter (or: krb5-exporter probe --kdc {{.KDC}} --config.file FILE --module default).
modules:
  default:
    realm: {{.Realm}}
    client: {{.Principal}}
    keytab: {{.Keytab}}
    transport: udp
    timeout: 5s
    allowed_kdcs: ["{{.KDC}}"]   # the KDCs /probe may use this module against

probes:
  - name: local-kdc
    address: {{.KDC}}
    module: default
    interval: 15s

logs:
  - type: kdc{{if .KDCLog}}
    path: {{.KDCLog}}{{else}}   # where kdc.conf's [logging] kdc says: a file, or the journal{{end}}
    probe_principals: [{{.Principal}}]
  - type: kadmind{{if not .KDCLog}}   # where kdc.conf's [logging] admin_server says{{end}}
`))

// printProbeConfig prints the snippet after checking that the exporter
// accepts it (the keytab it names exists by now).
func printProbeConfig(w io.Writer, v map[string]string) error {
	var b strings.Builder
	if err := probeConfigTmpl.Execute(&b, v); err != nil {
		return err
	}
	if _, err := config.Parse([]byte(b.String()), "probe-principal snippet"); err != nil {
		return fmt.Errorf("the configuration for the new principal does not load: %w", err)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
