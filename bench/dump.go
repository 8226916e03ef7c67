package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// dump runs `kdb5_util dump FILE` DumpRounds times while the KDC serves.
// The file is written in a private directory and removed after each
// round: it holds every key (encrypted with the master key).
func (r *run) dump(ctx context.Context) error {
	if len(r.sys.DumpCommand) == 0 {
		return skip("no kdb5_util command configured (it needs the database on this machine)")
	}
	dir, err := os.MkdirTemp("", "krb5-bench-dump-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d := &Dump{}
	r.rep.Dump = d
	file := filepath.Join(dir, "dump")
	for i := 0; i < r.set.DumpRounds; i++ {
		args := append(append([]string(nil), r.sys.DumpCommand[1:]...), "dump", file)
		cmd := exec.CommandContext(ctx, r.sys.DumpCommand[0], args...)
		cmd.Env = append(os.Environ(), r.sys.Env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%s: %v: %s", strings.Join(r.sys.DumpCommand, " "), err, strings.TrimSpace(string(out)))
		}
		fi, err := os.Stat(file)
		if err != nil {
			return fmt.Errorf("kdb5_util wrote no dump: %w", err)
		}
		if fi.Size() == 0 {
			return errors.New("kdb5_util wrote an empty dump")
		}
		d.Bytes = fi.Size()
		for _, f := range []string{file, file + ".dump_ok"} {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		d.RoundsS = append(d.RoundsS, took.Seconds())
	}
	var sum float64
	for _, v := range d.RoundsS {
		sum += v
	}
	d.AvgS = sum / float64(len(d.RoundsS))
	r.metric("dump", "dump_seconds", "Database dump time", "s", d.AvgS, "<=", r.set.Targets.DumpMaxS, 1)
	return nil
}
