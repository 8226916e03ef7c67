package dashboards

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// `make test` runs the packages in the Makefile's NORACE list without
// -race. That is honest only while nothing in them, code or tests, starts a
// goroutine: the race detector could find nothing there. This test holds
// every listed package to it, so a `go` statement added to one fails here
// instead of quietly losing its race checks.
func TestNoRacePackagesStartNoGoroutine(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^NORACE\s*:=\s*(.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no NORACE := line")
	}
	var dirs []string
	for _, pat := range strings.Fields(string(m[1])) {
		root := filepath.Join("..", strings.TrimSuffix(pat, "/..."))
		if !strings.HasSuffix(pat, "/...") {
			dirs = append(dirs, root)
			continue
		}
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Name() != "testdata" {
				dirs = append(dirs, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	files := 0
	for _, dir := range dirs {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			for name, f := range pkg.Files {
				files++
				ast.Inspect(f, func(n ast.Node) bool {
					if g, ok := n.(*ast.GoStmt); ok {
						t.Errorf("%s: a go statement in a NORACE package (%s); take it out of NORACE in the Makefile", fset.Position(g.Pos()), name)
					}
					return true
				})
			}
		}
	}
	if files == 0 {
		t.Fatalf("NORACE (%s) names no Go files", m[1])
	}
	t.Logf("%d files in %d directories start no goroutine", files, len(dirs))
}
