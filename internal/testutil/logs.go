package testutil

import (
	"os"
	"regexp"
	"testing"
)

// LogCount counts the lines of a daemon log matching re, from offset.
func LogCount(t testing.TB, path string, from int64, re string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return len(regexp.MustCompile(re).FindAll(b[from:], -1))
}

// LogSize is the size of a log: where what is logged next begins.
func LogSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
