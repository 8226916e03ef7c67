//go:build !linux

package collector

import "os"

func isProcfs(string) bool { return false }

func countFDs(_ *fileCache, dir string, _ []byte, _ bool) (int, error) {
	entries, err := os.ReadDir(dir)
	return len(entries), err
}
