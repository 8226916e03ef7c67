package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is in the error of Open for a path that names something
// other than a regular file (errors.Is).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is in the error of ReadFile for a file above its limit.
var ErrTooLarge = errors.New("file too large")

// CheckRegular returns an error wrapping ErrNotRegular unless mode is a
// regular file's; it says what the path names instead.
func CheckRegular(mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch t := mode.Type(); {
	case t&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case t&fs.ModeDir != 0:
		kind = "a directory"
	case t&fs.ModeSocket != 0:
		kind = "a socket"
	case t&fs.ModeSymlink != 0:
		kind = "a symbolic link"
	case t&fs.ModeDevice != 0:
		kind = "a device"
	}
	return fmt.Errorf("%w: %s", ErrNotRegular, kind)
}

// Open opens path for reading if it names a regular file. The open itself
// never waits: O_NONBLOCK makes a FIFO planted at the path (whose blocking
// open waits for a writer, for ever) open at once, and the fstat after it
// refuses the FIFO, a device or a directory. O_NONBLOCK means nothing to
// a regular file's reads. flag adds flags (syscall.O_NOFOLLOW where a
// symbolic link at the path must not be followed). The errors are
// *fs.PathError.
func Open(path string, flag int) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|flag, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = CheckRegular(fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return f, fi, nil
}

// ReadFile reads the regular file at path (see Open) whole, and fails
// (ErrTooLarge) rather than read more than limit bytes: a file the size
// claims is small may grow while it is read, and /proc's claim 0.
func ReadFile(path string, limit int64, flag int) ([]byte, os.FileInfo, error) {
	f, fi, err := Open(path, flag)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, nil, &fs.PathError{Op: "read", Path: path, Err: tooLarge(limit)}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(b)) > limit {
		return nil, nil, &fs.PathError{Op: "read", Path: path, Err: tooLarge(limit)}
	}
	return b, fi, nil
}

func tooLarge(limit int64) error {
	return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
}
