package collector

import (
	"bytes"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// isProcfs tells a live procfs from a copied tree (the fixtures).
func isProcfs(path string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(path, &fs) == nil && fs.Type == unix.PROC_SUPER_MAGIC
}

// countFDs returns the number of open files of a process from its
// /proc/PID/fd, as procfs does: since Linux 6.2, stat() of that directory
// gives the count as its size (for anyone, like the process's stat),
// far cheaper than listing it. The directory stays open (O_PATH) between
// scrapes: each fstat counts afresh, without the path lookup of a stat
// (measured 0.9 against 2.9 µs per process). Before 6.2, or for a process
// with no files, or in a copied tree (onProcfs false), the entries are
// counted.
func countFDs(files *fileCache, dir string, buf []byte, onProcfs bool) (int, error) {
	if onProcfs {
		var st unix.Stat_t
		if err := files.fstat(dir, &st); err != nil {
			return 0, err
		}
		if st.Size > 0 {
			return int(st.Size), nil
		}
	}
	return countDir(dir, buf)
}

// countDir counts the entries of a directory without allocating their
// names.
func countDir(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	count := 0
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return 0, &os.PathError{Op: "getdents", Path: path, Err: err}
		}
		if n <= 0 {
			return count, nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name
			d := buf[off:n]
			reclen := int(uint16(d[16]) | uint16(d[17])<<8)
			if reclen == 0 || reclen > len(d) {
				return 0, fmt.Errorf("%s: malformed directory entry", path)
			}
			name := d[19:reclen]
			if k := bytes.IndexByte(name, 0); k >= 0 {
				name = name[:k]
			}
			if string(name) != "." && string(name) != ".." {
				count++
			}
			off += reclen
		}
	}
}
