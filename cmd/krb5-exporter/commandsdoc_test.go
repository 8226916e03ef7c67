package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// TestCommandsDoc keeps docs/commands.md, the reference of every command
// and flag, what the command line model generates: a flag added, removed
// or with another default or help fails here until `make docs` is run.
func TestCommandsDoc(t *testing.T) {
	want, err := os.ReadFile("../../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	app, _ := newApp(io.Discard, io.Discard)
	var got bytes.Buffer
	if err := writeCommandsDoc(&got, app.Model()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("docs/commands.md is not what the command line generates: run make docs\n%s", firstDiff(string(want), got.String()))
	}
}

// The generated reference names every visible flag of every command with
// its default, independently of the writer's formatting: a flag the
// writer skipped, or a wrong default, fails here.
func TestCommandsDocNamesEveryFlag(t *testing.T) {
	app, _ := newApp(io.Discard, io.Discard)
	var doc bytes.Buffer
	if err := writeCommandsDoc(&doc, app.Model()); err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, s := range strings.Split(doc.String(), "\n## `")[1:] {
		name, body, _ := strings.Cut(s, "`")
		sections[name] = body
	}
	var walk func(cs []*kingpin.CmdModel)
	var all []*kingpin.CmdModel
	walk = func(cs []*kingpin.CmdModel) {
		for _, c := range cs {
			if !c.Hidden && c.FullCommand != "help" {
				all = append(all, c)
			}
			walk(c.Commands)
		}
	}
	walk(app.Model().Commands)
	for _, c := range all {
		if len(c.Commands) > 0 && len(c.Flags) == 0 {
			continue // realm: only its subcommands run
		}
		body, ok := sections[c.FullCommand]
		if !ok {
			t.Errorf("no section for %s", c.FullCommand)
			continue
		}
		for _, f := range c.Flags {
			if f.Hidden || f.Name == "help" || f.Name == "version" {
				continue
			}
			row := ""
			for _, l := range strings.Split(body, "\n") {
				if strings.Contains(l, "--"+f.Name+"` |") || strings.Contains(l, "--[no-]"+f.Name+"` |") {
					row = l
				}
			}
			if row == "" {
				t.Errorf("%s: no row for --%s", c.FullCommand, f.Name)
				continue
			}
			if d := strings.Join(f.Default, ", "); d != "" && !f.IsBoolFlag() && !strings.Contains(row, "| `"+d+"` |") {
				t.Errorf("%s --%s: row %q lacks the default %q", c.FullCommand, f.Name, row, d)
			}
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  docs/commands.md: %s\n  generated:        %s", i+1, x, y)
		}
	}
	return ""
}
