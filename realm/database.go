package realm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// command runs an MIT program with this realm's profiles in its
// environment, and nothing of the caller's KRB5_* variables.
func (r *Realm) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	env := make([]string, 0, len(os.Environ())+3)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "KRB5") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, r.Env()...)
	cmd.Dir = r.Dir
	return cmd
}

// createDatabase creates the db2 database and all principals and keytabs
// in one kadmin.local session: one process per principal would take
// minutes for the default 11,100.
func (r *Realm) createDatabase(ctx context.Context) error {
	master := make([]byte, 24)
	if _, err := rand.Read(master); err != nil {
		return fmt.Errorf("realm: %w", err)
	}
	// The master password goes on the command line of a short-lived local
	// process in a throwaway realm; the stash file keeps it afterwards.
	cmd := r.command(ctx, r.bins.KDB5Util, "-r", r.Realm, "create", "-s", "-W", "-P", hex.EncodeToString(master))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("realm: kdb5_util create: %v: %s", err, firstLines(out, 5))
	}

	o := r.Opts
	cmds := make([]string, 0, o.Users+o.Services+o.Fillers+8)
	// -clearpolicy: without it every addprinc warns about the missing
	// default policy on stderr, which would hide real errors.
	cmds = append(cmds, "addprinc -randkey -clearpolicy +requires_preauth "+r.AdminPrincipal)
	cmds = append(cmds, "addprinc -randkey -clearpolicy +requires_preauth "+r.ProbePrincipal)
	for i := 1; i <= o.Users; i++ {
		cmds = append(cmds, "addprinc -randkey -clearpolicy +requires_preauth "+r.userName(i))
	}
	for i := 1; i <= o.Services; i++ {
		cmds = append(cmds, "addprinc -randkey -clearpolicy +requires_preauth "+r.serviceName(i))
	}
	for i := 1; i <= o.Fillers; i++ {
		cmds = append(cmds, "addprinc -randkey -clearpolicy +requires_preauth "+r.fillerName(i))
	}
	cmds = append(cmds, fmt.Sprintf("ktadd -k %s -norandkey %s", r.AdminKeytab, r.AdminPrincipal))
	cmds = append(cmds, fmt.Sprintf("ktadd -k %s -norandkey %s", r.ProbeKeytab, r.ProbePrincipal))
	cmds = appendKtadd(cmds, r.UserKeytab, o.Users, r.userName)
	cmds = appendKtadd(cmds, r.ServiceKeytab, o.Services, r.serviceName)
	_, err := r.KadminLocal(ctx, cmds...)
	return err
}

// appendKtadd adds ktadd commands that export the keys of principals
// name(1..n) without changing them, 100 names a line. (ktadd -glob would
// do, but MIT 1.20 then also reports the pattern itself as "does not
// exist" on stderr.)
func appendKtadd(cmds []string, keytab string, n int, name func(int) string) []string {
	for first := 1; first <= n; first += 100 {
		line := []string{"ktadd -k", keytab, "-norandkey"}
		for i := first; i <= n && i < first+100; i++ {
			line = append(line, name(i))
		}
		cmds = append(cmds, strings.Join(line, " "))
	}
	return cmds
}

// KadminLocal runs commands in one kadmin.local session (commands on
// stdin) and returns its standard output. kadmin.local exits 0 even when
// a command fails and reports failures only on stderr, so anything on
// stderr is an error here.
func (r *Realm) KadminLocal(ctx context.Context, cmds ...string) (string, error) {
	cmd := r.command(ctx, r.bins.KadminLocal, "-r", r.Realm)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	switch {
	case err != nil:
		return stdout.String(), fmt.Errorf("realm: kadmin.local: %v: %s", err, firstLines(stderr.Bytes(), 5))
	case stderr.Len() > 0:
		return stdout.String(), fmt.Errorf("realm: kadmin.local: %s", firstLines(stderr.Bytes(), 5))
	}
	return stdout.String(), nil
}

// firstLines keeps error messages to a readable size.
func firstLines(b []byte, n int) string {
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, " | ")
}
