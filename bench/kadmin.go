package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// kadminKinds are the seed's four operations, in the order they run, with
// the line kadmin prints on stdout for each principal it handled. kadmin
// exits 0 even when every command failed, so success is counted from
// these lines, never from the exit status.
var kadminKinds = []struct {
	kind, command, done string
}{
	{"add", "addprinc -randkey", `Principal "%s" created.`},
	{"read", "getprinc", `Principal: %s`},
	{"change", "cpw -randkey", `Key for "%s" randomized.`},
	{"delete", "delprinc -force", `Principal "%s" deleted.`},
}

// kadminPrefix starts the name of every principal the kadmin test
// creates; a random part makes each run's names its own.
const kadminPrefix = "krb5-bench-"

func (r *run) kadmin(ctx context.Context) error {
	s := r.sys
	if s.KadminAddr == "" || s.AdminKeytab == "" || s.AdminPrincipal == "" {
		return skip("no kadmind address, admin principal and admin keytab configured")
	}
	if !s.AllowWrites {
		return skip("creates and deletes principals: allow it with --allow-writes")
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	k := &Kadmin{Prefix: kadminPrefix + hex.EncodeToString(rnd[:]) + "-", Operations: r.set.KadminOperations}
	r.rep.Kadmin = k
	// Whatever happens (an error, Ctrl-C), every principal under the
	// prefix is removed, with a context of its own.
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		n, err := kadminCleanup(cctx, s, k.Prefix)
		k.Removed = n
		if err != nil {
			r.warn("kadmin: removing the test principals under %s*: %v", k.Prefix, err)
		}
	}()
	k.Slowest = -1
	for _, kd := range kadminKinds {
		names := make([]string, r.set.KadminOperations)
		for i := range names {
			names[i] = fmt.Sprintf("%s%06d@%s", k.Prefix, i+1, s.Realm)
		}
		b, err := kadminBatch(ctx, s, kd.command, kd.done, names)
		b.Kind = kd.kind
		k.Kinds = append(k.Kinds, b)
		if err != nil {
			return fmt.Errorf("kadmin %s: %w", kd.kind, err)
		}
		if b.Completed < len(names) {
			r.warn("kadmin: %s completed %d of %d (counted as 0/s); first error: %s", kd.kind, b.Completed, len(names), b.FirstErr)
		}
		if k.Slowest < 0 || b.Rate < k.Slowest {
			k.Slowest = b.Rate
		}
	}
	r.metric("kadmin", "slowest_kind_ops_per_second", "Admin operations per second (slowest kind)", "ops/s", k.Slowest, ">=", r.set.Targets.KadminMinRate, 1)
	return nil
}

// kadminArgs authenticates with the admin keytab and talks to kadmind
// over the network.
func kadminArgs(s *System) []string {
	return []string{"-k", "-t", s.AdminKeytab, "-p", s.AdminPrincipal, "-s", s.KadminAddr}
}

// kadminBatch runs one kadmin session reading `command name` for every
// name on stdin; the time includes the session start (the admin login).
// A kind that did not complete every principal has rate 0.
func kadminBatch(ctx context.Context, s *System, command, done string, names []string) (KadminBatch, error) {
	b := KadminBatch{Command: command}
	var in bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&in, "%s %s\n", command, n)
	}
	cmd := exec.CommandContext(ctx, "kadmin", kadminArgs(s)...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	b.Seconds = time.Since(start).Seconds()
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[fmt.Sprintf(done, n)] = true
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "kadmin:  ")
		if want[line] {
			b.Completed++
			delete(want, line)
		}
	}
	b.FirstErr = firstErrorLine(stderr.Bytes())
	if ctx.Err() != nil {
		return b, ctx.Err()
	}
	if err != nil {
		return b, fmt.Errorf("%v: %s", err, b.FirstErr)
	}
	if b.Completed == len(names) && b.Seconds > 0 {
		b.Rate = float64(b.Completed) / b.Seconds
	}
	return b, nil
}

// firstErrorLine is kadmin's first stderr line that is an error (it also
// prints notices like "No policy specified").
func firstErrorLine(stderr []byte) string {
	for _, l := range strings.Split(string(stderr), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "No policy specified") && !strings.HasPrefix(l, "Make sure that") {
			return l
		}
	}
	return ""
}

// kadminCleanup deletes every principal whose name starts with prefix
// and returns how many it deleted. It lists them first, so it also removes
// principals of a batch that was killed halfway.
func kadminCleanup(ctx context.Context, s *System, prefix string) (int, error) {
	names, err := kadminList(ctx, s, prefix)
	if err != nil {
		return 0, err
	}
	if len(names) == 0 {
		return 0, nil
	}
	b, err := kadminBatch(ctx, s, "delprinc -force", `Principal "%s" deleted.`, names)
	if err != nil {
		return b.Completed, err
	}
	left, err := kadminList(ctx, s, prefix)
	if err != nil {
		return b.Completed, err
	}
	if len(left) > 0 {
		return b.Completed, fmt.Errorf("%d principals are left (first %s): %s", len(left), left[0], b.FirstErr)
	}
	return b.Completed, nil
}

// kadminList lists the principals under prefix.
func kadminList(ctx context.Context, s *System, prefix string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "kadmin", append(kadminArgs(s), "-q", "listprincs "+prefix+"*")...)
	cmd.Env = append(os.Environ(), s.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kadmin listprincs: %v: %s", err, firstErrorLine(stderr.Bytes()))
	}
	var out []string
	sc := bufio.NewScanner(io.Reader(&stdout))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	if e := firstErrorLine(stderr.Bytes()); e != "" && len(out) == 0 && !strings.Contains(stdout.String(), "Authenticating") {
		return nil, fmt.Errorf("kadmin listprincs: %s", e)
	}
	return out, nil
}
