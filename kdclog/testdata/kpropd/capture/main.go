// Command capture writes the kpropd log fixture of the kpropd parser's
// tests from a real MIT kpropd: it starts a harness primary and replica
// (kpropd -d, whose output carries the same events it sends to syslog,
// and more), and walks the replica through what happens in production:
// the initial full resync, incremental updates, the primary's kadmind
// going away and coming back, iprop permission withdrawn on the primary
// (kpropd gives up and exits), a restart, a reset update log (full resync
// again). It copies kpropd's output to -out.
//
//	go run ./kdclog/testdata/kpropd/capture -out kdclog/testdata/kpropd/mit-1.20-kpropd-debug.log
//
// Both realms are removed afterwards; the log holds no key.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

func main() {
	out := flag.String("out", "mit-1.20-kpropd-debug.log", "where to write kpropd's output")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "kpropd-capture")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := realm.Up(ctx, realm.Options{Dir: filepath.Join(dir, "p"), Users: 3, Services: 1, Fillers: -1})
	if err != nil {
		return err
	}
	defer p.Down()
	r, err := realm.UpReplica(ctx, p, realm.Options{Dir: filepath.Join(dir, "r")}, time.Second)
	if err != nil {
		return err
	}
	defer r.Down()
	log := r.Replica.Log
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w; kpropd: %s\nkadmind: %s", what, err, tail(log), tail(p.KadmindLog))
		}
		return nil
	}
	// Incremental updates, two batches.
	for _, batch := range [][]string{{"addprinc -randkey -clearpolicy a1"}, {"addprinc -randkey -clearpolicy a2", "addprinc -randkey -clearpolicy a3", "cpw -randkey a1"}} {
		n := count(log, "Incremental updates:")
		if _, err := p.KadminLocal(ctx, batch...); err != nil {
			return err
		}
		if err := step("incremental updates", await(func() bool { return count(log, "Incremental updates:") > n })); err != nil {
			return err
		}
	}
	// The primary's kadmind goes away and comes back.
	if err := p.StopKadmind(); err != nil {
		return err
	}
	if err := step("kadmind gone", await(func() bool { return count(log, "Sleeping") > 0 })); err != nil {
		return err
	}
	if err := p.StartKadmind(ctx); err != nil {
		return err
	}
	if err := step("kadmind back", await(func() bool { return count(log, "kadm5 initialization succeeded") > 1 })); err != nil {
		return err
	}
	// iprop permission withdrawn: kpropd gives up and exits.
	acl := filepath.Join(p.Dir, "kadm5.acl")
	orig, err := os.ReadFile(acl)
	if err != nil {
		return err
	}
	var kept []string
	for _, l := range strings.Split(string(orig), "\n") {
		if !strings.HasPrefix(l, "kiprop/") {
			kept = append(kept, l)
		}
	}
	if err := os.WriteFile(acl, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		return err
	}
	if err := p.StopKadmind(); err != nil {
		return err
	}
	if err := p.StartKadmind(ctx); err != nil {
		return err
	}
	if err := step("permission denied", await(func() bool { return r.KpropdPid() == 0 })); err != nil {
		return err
	}
	if err := os.WriteFile(acl, orig, 0o600); err != nil {
		return err
	}
	if err := p.StopKadmind(); err != nil {
		return err
	}
	if err := p.StartKadmind(ctx); err != nil {
		return err
	}
	// Restarted with a reset update log: a full resync again.
	cmd := exec.Command("kproplog", "-R")
	cmd.Env = append(os.Environ(), r.Env()...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kproplog -R: %v: %s", err, b)
	}
	n := count(log, "Database load process for full propagation completed")
	if err := r.StartKpropd(ctx); err != nil {
		return err
	}
	if err := step("second full resync", await(func() bool {
		return count(log, "Database load process for full propagation completed") > n && count(log, "KDC is synchronized") > 2
	})); err != nil {
		return err
	}
	if err := r.StopKpropd(); err != nil {
		return err
	}
	b, err := os.ReadFile(log)
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

func count(path, s string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte(s))
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	os.WriteFile("/tmp/capture-fail-"+filepath.Base(path), b, 0o600)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// await polls cond for at most 60 seconds.
func await(cond func() bool) error {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return nil
		}
	}
	return fmt.Errorf("not seen in 60s")
}
