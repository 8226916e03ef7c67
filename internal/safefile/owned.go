package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenOwned opens path, created with perm when absent, for a file that
// lives in a directory others may write (/tmp): a symbolic link at path is
// refused, not followed (O_NOFOLLOW), as is anything that is not a regular
// file (a planted FIFO cannot block the open: O_NONBLOCK) or a file that
// another user owns (planted beforehand, its content and locks are theirs).
func OpenOwned(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: refusing to follow it", path)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = owned(path, fi, false)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// MkdirOwned creates the directory path with perm, or accepts the one
// there if it is a directory of the effective user: never a symbolic link
// (its target would receive what is written inside) nor another user's
// directory (they could replace its files).
func MkdirOwned(path string, perm os.FileMode) error {
	err := os.Mkdir(path, perm)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	return owned(path, fi, true)
}

// owned checks that fi, lstat'ed or fstat'ed at path, is a regular file
// (or a directory) of the effective user.
func owned(path string, fi os.FileInfo, dir bool) error {
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: refusing to follow it", path)
	case dir && !fi.IsDir():
		return fmt.Errorf("%s is a %s, not a directory", path, Kind(fi.Mode()))
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is a %s, not a regular file", path, Kind(fi.Mode()))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d): refusing to use it", path, st.Uid, os.Geteuid())
	}
	return nil
}

// Kind names a file's type for an error: "directory", "FIFO", ...
func Kind(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
