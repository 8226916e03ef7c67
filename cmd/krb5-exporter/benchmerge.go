package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/alecthomas/kingpin/v2"

	"github.com/krb5-exporter/krb5-exporter/bench"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
)

// mergeArgs are `bench merge`'s.
type mergeArgs struct {
	cmd  *kingpin.CmdClause
	dirs []string
}

func (b *benchCmd) addMerge(c *kingpin.CmdClause) {
	a := &b.merge
	a.cmd = c.Command("merge", "Merge the results of the shards of one run (--shard i/n on several machines against one KDC) into one report under --output-dir: rates summed, latencies from every request, each metric judged again on the merged numbers. Exit 0 (PASS), 1 (a FAIL), 2 when the directories are not the shards of one run.")
	a.cmd.Arg("dirs", "Every shard's results/<timestamp> directory (or report.json).").Required().StringsVar(&a.dirs)
}

// mergeRuns is `bench merge DIR...`.
func (b *benchCmd) mergeRuns(stdout, stderr io.Writer) int {
	cfg, err := b.flags.Config()
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench merge: %v\n", err)
		return 2
	}
	var shards []bench.Shard
	for _, d := range b.merge.dirs {
		rep, dir, err := report.ReadRun(d)
		if err != nil {
			fmt.Fprintf(stderr, "krb5-exporter bench merge: %v\n", err)
			return 2
		}
		shards = append(shards, bench.Shard{Path: dir, Report: rep})
	}
	rep, err := bench.Merge(shards)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench merge: %v\n", err)
		return 2
	}
	dir := filepath.Join(cfg.OutputDir, rep.Started.UTC().Format("20060102T150405Z")+"-merged")
	report.WriteSummary(stdout, rep)
	if err := writeResults(rep, dir, cfg.Textfile); err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench merge: writing results: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "results: %s\n", dir)
	if rep.Verdict != bench.Pass {
		return 1
	}
	return 0
}
