// Package safefile writes files that hold or name secrets (configurations
// naming keytabs, realm state) so that neither a crash nor a link planted at
// the path can misdirect them, and reads files whose place someone else
// can fill (keytabs, password files, configurations, logs) so that a FIFO,
// a device or a huge file there is an error, never a hang or a flood.
package safefile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode perm. The data goes to a new
// file created exclusively (O_EXCL) in path's directory, is synced, and is
// renamed over path: a symlink planted at path is replaced, never followed,
// and a crash leaves the old content or the new, never a mix.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// CreateTemp makes the file 0600; Chmod sets perm under any umask.
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // make the rename durable; not every file system can
		d.Close()
	}
	return nil
}
