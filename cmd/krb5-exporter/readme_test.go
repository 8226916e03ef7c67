package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// readmeFlags parses the flag tables of README.md: for each section whose
// heading names a command in backticks (`serve`, `realm up`), the rows
// "| `--flag` | default | meaning |". A row may name several flags
// (`--a`, `--b`), use `--[no-]x` and `{a,b}` alternatives.
func readmeFlags(text string) (map[string]map[string]string, []string) {
	var problems []string
	tables := map[string]map[string]string{}
	var cmds []string
	cmdName := regexp.MustCompile("`([a-z][a-z -]*)`")
	flagName := regexp.MustCompile("`--([^`]+)`")
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			cmds = nil
			for _, m := range cmdName.FindAllStringSubmatch(line, -1) {
				cmds = append(cmds, strings.TrimPrefix(m[1], "krb5-exporter "))
			}
			continue
		}
		if len(cmds) == 0 || !strings.HasPrefix(line, "| `-") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			problems = append(problems, "README row with fewer than 3 cells: "+line)
			continue
		}
		def := strings.TrimSpace(cells[1])
		for _, m := range flagName.FindAllStringSubmatch(cells[0], -1) {
			for _, name := range expandFlag(m[1]) {
				for _, c := range cmds {
					if tables[c] == nil {
						tables[c] = map[string]string{}
					}
					tables[c][name] = def
				}
			}
		}
	}
	return tables, problems
}

// expandFlag turns "[no-]collector.x" into "collector.x" and
// "a.{b,c}-d" into "a.b-d", "a.c-d".
func expandFlag(s string) []string {
	s = strings.TrimPrefix(s, "[no-]")
	i, j := strings.Index(s, "{"), strings.Index(s, "}")
	if i < 0 || j < i {
		return []string{s}
	}
	var out []string
	for _, alt := range strings.Split(s[i+1:j], ",") {
		out = append(out, expandFlag(s[:i]+alt+s[j+1:])...)
	}
	return out
}

// defaultMatches says whether the README's default cell describes the
// flag's real default.
func defaultMatches(f *kingpin.FlagModel, cell string) bool {
	cell = strings.TrimSpace(cell)
	def := strings.Join(f.Default, ",")
	if f.IsBoolFlag() {
		if def == "true" {
			return cell == "on"
		}
		return cell == "off" || cell == ""
	}
	if def == "" {
		// None, or one computed at run time from the environment.
		return cell == "" || cell == "none" || cell == "off" || strings.HasPrefix(cell, "`$")
	}
	return cell == def || cell == "`"+def+"`" || strings.HasPrefix(cell, "`"+def+"`")
}

// TestREADMEFlags keeps the README's flag tables true to the command line:
// every visible flag of every command is in its command's table with its
// real default, and the tables name no flag that does not exist.
func TestREADMEFlags(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range readmeProblems(string(text)) {
		t.Error(p)
	}
}

func readmeProblems(text string) []string {
	app, _ := newApp(io.Discard, io.Discard)
	tables, problems := readmeFlags(text)
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, c := range app.Model().FlattenedCommands() {
		if c.Hidden || c.FullCommand == "help" || (len(c.Flags) == 0 && len(c.Commands) > 0) {
			continue
		}
		table := tables[c.FullCommand]
		seen := map[string]bool{}
		for _, f := range c.Flags {
			if f.Hidden || f.Name == "help" || f.Name == "version" {
				continue
			}
			seen[f.Name] = true
			cell, ok := table[f.Name]
			switch {
			case !ok:
				errorf("README: `%s` has no row for --%s (default %q)", c.FullCommand, f.Name, strings.Join(f.Default, ","))
			case !defaultMatches(f, cell):
				errorf("README: `%s` --%s: default cell %q, the flag's default is %q", c.FullCommand, f.Name, cell, strings.Join(f.Default, ","))
			}
		}
		for name := range table {
			if !seen[name] {
				errorf("README: `%s` lists --%s, which it does not have", c.FullCommand, name)
			}
		}
	}
	return problems
}

// The check itself fails on a missing row, a wrong default and a stale
// row.
func TestREADMEFlagsCheckFails(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"missing row": func(s string) string {
			return regexp.MustCompile("(?m)^\\| `--web.max-requests`.*\n").ReplaceAllString(s, "")
		},
		"wrong default": func(s string) string {
			return strings.Replace(s, "| `--web.max-requests` | 40 |", "| `--web.max-requests` | 50 |", 1)
		},
		"stale row": func(s string) string {
			return strings.Replace(s, "| `--web.max-requests` |", "| `--web.max-request` | 40 | |\n| `--web.max-requests` |", 1)
		},
	} {
		if len(readmeProblems(edit(string(text)))) == 0 {
			t.Errorf("%s: the README check passed", name)
		}
	}
}
