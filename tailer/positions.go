package tailer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// FilePos is how far one file has been read.
type FilePos struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	// Birth is the file's creation time (Unix nanoseconds; 0: unknown):
	// with Dev and Ino it tells the file from a later one that reuses
	// its inode number.
	Birth  int64 `json:"birth,omitempty"`
	Offset int64 `json:"offset"` // end of the last complete line handled
	// Hash is FNV-1a of the HashLen bytes before Offset: it tells the same
	// file from one truncated and rewritten (copytruncate, a reused inode).
	Hash    uint64 `json:"hash"`
	HashLen int    `json:"hash_len"`
	// HeadHash is FNV-1a of the file's first HeadLen bytes (at most 1 KiB,
	// at most Offset): the file's identity. Dev and Ino are only a hint.
	HeadHash uint64 `json:"head_hash"`
	HeadLen  int    `json:"head_len"`
}

// Position is the state of one followed path: the file it names and the
// files it named before (renamed or deleted, still being read).
type Position struct {
	// Current is nil when the path did not exist: a file that appears
	// there later is read from its beginning.
	Current *FilePos  `json:"current,omitempty"`
	Rotated []FilePos `json:"rotated,omitempty"`
	// Done are files read to their end and let go (rotated away, or the
	// content before a truncation): a rotated sibling with one of these
	// fingerprints is known, one with none that changed after Saved is a
	// file the exporter never saw, read from its start.
	Done []FilePos `json:"done,omitempty"`
	// Saved is when this position was taken (Unix nanoseconds).
	Saved int64 `json:"saved,omitempty"`
	// Cursor is a journal source's position: the journal cursor of the
	// last entry counted (package journal).
	Cursor string `json:"cursor,omitempty"`
}

func (p Position) equal(q Position) bool {
	if (p.Current == nil) != (q.Current == nil) {
		return false
	}
	if p.Current != nil && *p.Current != *q.Current {
		return false
	}
	return p.Cursor == q.Cursor && slices.Equal(p.Rotated, q.Rotated) && slices.Equal(p.Done, q.Done)
}

type positionsFile struct {
	Version int                 `json:"version"`
	Files   map[string]Position `json:"files"`
}

// Positions keeps the read positions of all tailers and writes them to a
// small JSON file, atomically (temporary file, fsync, rename, fsync of the
// directory), so a restart resumes exactly where the last run stopped. An
// empty path keeps positions in memory only (still used across reloads).
type Positions struct {
	path   string
	logger log.Logger

	mu    sync.Mutex
	files map[string]Position
	dirty bool

	// WriteErrors counts failed writes of the file.
	WriteErrors atomic.Uint64
	// Writes counts successful writes.
	Writes atomic.Uint64

	lock *os.File // holds the flock on path+".lock" until Close
}

// maxPositionFile caps what is read of a position file: a few hundred
// bytes per log. A larger file is not one this program wrote.
const maxPositionFile = 4 << 20

// OpenPositions takes the lock on path (a second process using the same
// file would count the same lines again, or save positions over the
// other's) and loads path if it exists. A file that cannot be parsed is
// renamed to path+".corrupt" and reported; tailing then starts afresh
// rather than not at all. Close releases the lock.
func OpenPositions(path string, logger log.Logger) (*Positions, error) {
	p := &Positions{path: path, logger: logger, files: map[string]Position{}}
	if path == "" {
		return p, nil
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	p.lock = lock
	data, err := readPositionFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return p, nil
	case err != nil:
		p.Close()
		return nil, fmt.Errorf("position file: %w", err)
	}
	var pf positionsFile
	if err := json.Unmarshal(data, &pf); err != nil || pf.Version != 1 {
		if err == nil {
			err = fmt.Errorf("unknown version %d", pf.Version)
		}
		level.Error(logger).Log("msg", "position file is unreadable; moving it aside and starting every log at its start_at", "file", path, "err", err)
		if rerr := os.Rename(path, path+".corrupt"); rerr != nil {
			p.Close()
			return nil, fmt.Errorf("position file %s is corrupt (%v) and cannot be moved aside: %w", path, err, rerr)
		}
		return p, nil
	}
	for k, v := range pf.Files {
		p.files[k] = v
	}
	return p, nil
}

// Close releases the lock on the position file.
func (p *Positions) Close() error {
	if p.lock == nil {
		return nil
	}
	err := p.lock.Close() // closing the descriptor releases the flock
	p.lock = nil
	return err
}

// lockFile takes an exclusive flock on path (created 0600; never through
// a symbolic link, nor a FIFO or another user's file planted there) and
// writes the process id into it, so the refusal of a second process can
// name the first.
func lockFile(path string) (*os.File, error) {
	f, err := safefile.OpenOwned(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("position file lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		var b [32]byte
		n, _ := f.ReadAt(b[:], 0)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			other := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b[:n]))); perr == nil && pid > 0 {
				other = fmt.Sprintf("another process (pid %d)", pid)
			}
			return nil, fmt.Errorf("position file %s is in use by %s: two exporters must not follow the same logs with one position file", strings.TrimSuffix(path, ".lock"), other)
		}
		return nil, fmt.Errorf("position file lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// readPositionFile reads path as a position file: never through a
// symbolic link, never from a FIFO or device (an open of a FIFO would
// hang the start, /dev/zero would never end), at most maxPositionFile.
func readPositionFile(path string) ([]byte, error) {
	data, _, err := safefile.ReadFile(path, maxPositionFile, syscall.O_NOFOLLOW)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("%s is a symbolic link; not following it", path)
	case errors.Is(err, safefile.ErrTooLarge):
		return nil, fmt.Errorf("%s is larger than %d bytes: not a position file", path, maxPositionFile)
	}
	return data, err
}

// Path is the position file's path ("" when positions live in memory only).
func (p *Positions) Path() string { return p.path }

// Get returns the saved position of path.
func (p *Positions) Get(path string) (Position, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pos, ok := p.files[path]
	return pos, ok
}

// Set records the position of path.
func (p *Positions) Set(path string, pos Position) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.files[path]; ok && old.equal(pos) {
		return
	}
	p.files[path] = pos
	p.dirty = true
}

// Cursor returns the journal cursor saved under key ("" when none).
func (p *Positions) Cursor(key string) string {
	pos, _ := p.Get(key)
	return pos.Cursor
}

// SetCursor records the journal cursor of key.
func (p *Positions) SetCursor(key, cursor string) {
	p.Set(key, Position{Cursor: cursor, Saved: time.Now().UnixNano()})
}

// Delete forgets path (a log source removed from the configuration).
func (p *Positions) Delete(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.files[path]; ok {
		delete(p.files, path)
		p.dirty = true
	}
}

// Flush writes the file if anything changed since the last write.
func (p *Positions) Flush() error {
	if p.path == "" {
		return nil
	}
	p.mu.Lock()
	if !p.dirty {
		p.mu.Unlock()
		return nil
	}
	pf := positionsFile{Version: 1, Files: make(map[string]Position, len(p.files))}
	for k, v := range p.files {
		pf.Files[k] = v
	}
	p.dirty = false
	p.mu.Unlock()

	data, err := json.MarshalIndent(pf, "", "  ")
	if err == nil {
		err = safefile.Write(p.path, append(data, '\n'), 0o600)
	}
	if err != nil {
		p.mu.Lock()
		p.dirty = true // try again next time
		p.mu.Unlock()
		p.WriteErrors.Add(1)
		return fmt.Errorf("position file: %w", err)
	}
	p.Writes.Add(1)
	return nil
}
