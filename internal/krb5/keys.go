package krb5

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/enctype"
	"github.com/krb5-exporter/krb5-exporter/internal/keytab"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// Credentials hold the long-term keys of one client principal, from a keytab
// (the normal case, re-read when the file changes) or from a password (each
// string-to-key result computed once per enctype, salt and parameters, not
// per login). Safe for concurrent use; several Clients may share one.
type Credentials struct {
	principal Principal

	mu sync.Mutex
	// keytab
	path          string
	checked       time.Time // last stat of the keytab file
	modTime       time.Time
	size          int64
	worldReadable bool
	keys          []ltKey // newest kvno first
	generation    uint64  // bumped whenever keys change, so Clients drop derived keys
	// password
	pwPath   string // the password file, when the password comes from one
	password string
	s2k      map[s2kInput][]byte
	s2kSlot  chan struct{} // held while a string-to-key runs: one at a time
	// pendingCheck runs before each load of PendingCredentials' file.
	pendingCheck func() error
}

type ltKey struct {
	etype int32
	kvno  uint32
	key   []byte
}

type s2kInput struct {
	etype           int32
	salt, s2kparams string
}

// keytabRecheck bounds how often the keytab file is stat'ed for changes.
const keytabRecheck = time.Second

// NewKeytabCredentials loads the keys of p from the keytab at path. It fails
// when the file is unreadable or holds no supported key for p.
func NewKeytabCredentials(path string, p Principal) (*Credentials, error) {
	c := &Credentials{principal: p, path: path}
	if err := c.load(time.Now()); err != nil {
		return nil, err
	}
	return c, nil
}

// NewPasswordCredentials derives keys for p from a password, lazily, once per
// enctype and salt the KDC announces.
func NewPasswordCredentials(password string, p Principal) *Credentials {
	return &Credentials{principal: p, password: password, s2k: map[s2kInput][]byte{}}
}

// NewPasswordFileCredentials reads the password from the first line of a file
// (kept out of the configuration file, URLs and logs).
func NewPasswordFileCredentials(path string, p Principal) (*Credentials, error) {
	c := &Credentials{principal: p, pwPath: path, s2k: map[s2kInput][]byte{}}
	if err := c.loadPasswordLocked(); err != nil {
		return nil, err
	}
	return c, nil
}

// PendingCredentials are the credentials of a module whose keytab or
// password file could not be loaded: every refresh (each probe) tries again,
// and fails with the reason until the file loads. check, when not nil, is
// run before each try (the configuration's own check of the file) and its
// error is the refresh's.
func PendingCredentials(keytabPath, passwordPath string, p Principal, check func() error) *Credentials {
	if keytabPath != "" {
		return &Credentials{principal: p, path: keytabPath, pendingCheck: check}
	}
	return &Credentials{principal: p, pwPath: passwordPath, s2k: map[s2kInput][]byte{}, pendingCheck: check}
}

func (c *Credentials) loadPasswordLocked() error {
	b, fi, err := safefile.ReadFile(c.pwPath, MaxPasswordFile, 0)
	if err != nil {
		return fileError("password file", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return errors.New("password file: the first line is empty")
	}
	c.password = line
	c.worldReadable = fi.Mode().Perm()&0o004 != 0
	return nil
}

// Bounds of the key files read (package keytab's, which the configuration
// check uses too).
const (
	MaxKeytab       = keytab.MaxFile
	MaxPasswordFile = keytab.MaxPasswordFile
)

// readKeytab reads a keytab file through safefile: a FIFO or device put in
// its place fails at once instead of hanging every caller of the
// credentials' lock (a /probe, the module's probe loop).
func readKeytab(path string) ([]byte, os.FileInfo, error) {
	b, fi, err := safefile.ReadFile(path, MaxKeytab, 0)
	if err != nil {
		return nil, nil, fileError("keytab", err)
	}
	return b, fi, nil
}

// Principal returns the client principal the credentials are for.
func (c *Credentials) Principal() Principal { return c.principal }

// WorldReadable reports whether the keytab (or password) file was readable by
// everyone when last loaded: a leaked keytab is a leaked password.
func (c *Credentials) WorldReadable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.worldReadable
}

// refresh re-reads the keytab when its modification time or size changed,
// at most once per keytabRecheck. A failed re-read keeps the old keys.
func (c *Credentials) refresh(now time.Time) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" {
		if c.pwPath != "" && c.password == "" {
			// Not loaded yet (PendingCredentials).
			if err := c.checkPending(); err != nil {
				return c.generation, err
			}
			return c.generation, c.loadPasswordLocked()
		}
		return c.generation, nil
	}
	if c.keys == nil {
		// Never loaded (PendingCredentials): try on every probe.
		if err := c.checkPending(); err != nil {
			return c.generation, err
		}
		err := c.loadLocked(now)
		return c.generation, err
	}
	if now.Sub(c.checked) < keytabRecheck {
		return c.generation, nil
	}
	c.checked = now
	fi, err := os.Stat(c.path)
	if err != nil {
		return c.generation, fileError("keytab", err)
	}
	// chmod changes neither modification time nor size: take the mode
	// from every check.
	c.worldReadable = fi.Mode().Perm()&0o004 != 0
	if fi.ModTime().Equal(c.modTime) && fi.Size() == c.size {
		return c.generation, nil
	}
	err = c.loadLocked(now)
	return c.generation, err // the generation after the load
}

// gen is the generation of the keys now held.
func (c *Credentials) gen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.generation
}

func (c *Credentials) checkPending() error {
	if c.pendingCheck == nil {
		return nil
	}
	return c.pendingCheck()
}

func (c *Credentials) load(now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loadLocked(now)
}

func (c *Credentials) loadLocked(now time.Time) error {
	b, fi, err := readKeytab(c.path)
	if err != nil {
		return err
	}
	keys, err := keytabKeys(b, c.principal)
	if err != nil {
		return fmt.Errorf("keytab: %w", err)
	}
	c.keys = keys
	c.modTime, c.size, c.checked = fi.ModTime(), fi.Size(), now
	c.worldReadable = fi.Mode().Perm()&0o004 != 0
	c.generation++
	return nil
}

// CheckKeytab reports whether keytab bytes parse and hold a key of p of a
// supported enctype: what loading them for a probe needs. The error quotes
// no byte of b.
func CheckKeytab(b []byte, p Principal) error {
	_, err := keytabKeys(b, p)
	return err
}

// keytabKeys extracts p's keys of supported enctypes, newest kvno first.
func keytabKeys(b []byte, p Principal) ([]ltKey, error) {
	kt, err := keytab.Parse(b)
	if err != nil {
		return nil, err
	}
	return principalKeys(kt, p)
}

// principalKeys are p's keys in a keytab's entries of supported enctypes,
// newest kvno first.
func principalKeys(kt []keytab.Entry, p Principal) (keys []ltKey, err error) {
	for _, e := range kt {
		if e.Realm != p.Realm || !slices.Equal(e.Components, p.Components) {
			continue
		}
		et := lookupEtype(e.EncType)
		if et == nil || len(e.Key) != et.keyLen {
			// A key of the wrong length cannot be the principal's (and an
			// empty one would crash the key schedule): skip it like an
			// unsupported enctype.
			continue
		}
		keys = append(keys, ltKey{etype: e.EncType, kvno: e.KVNO, key: e.Key})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no AES key for %s", p)
	}
	slices.SortStableFunc(keys, func(a, b ltKey) int { return int(int64(b.kvno) - int64(a.kvno)) })
	return keys, nil
}

// NewKeytabCredentialsFor loads the keys of each of ps from one read of the
// keytab at path: a load generator with a thousand users parses the file
// once, not a thousand times. Each result refreshes on its own afterwards,
// as NewKeytabCredentials's does.
func NewKeytabCredentialsFor(path string, ps []Principal) ([]*Credentials, error) {
	// The fstat of the open comes before the read: a change in between
	// looks like a change after, and the next refresh reads the file again.
	b, fi, err := readKeytab(path)
	if err != nil {
		return nil, err
	}
	kt, err := keytab.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("keytab: %w", err)
	}
	now := time.Now()
	out := make([]*Credentials, len(ps))
	for i, p := range ps {
		keys, err := principalKeys(kt, p)
		if err != nil {
			return nil, fmt.Errorf("keytab: %w", err)
		}
		out[i] = &Credentials{principal: p, path: path, keys: keys, modTime: fi.ModTime(), size: fi.Size(),
			checked: now, worldReadable: fi.Mode().Perm()&0o004 != 0, generation: 1}
	}
	return out, nil
}

// fileError is err without the file's path (a *fs.PathError's Path): paths
// of key files stay in the configuration file, out of logs and replies.
func fileError(what string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot %s %s: %w", pe.Op, what, pe.Err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// keyFor returns the key of the given enctype. kvno 0 means the newest. For
// password credentials salt and s2kparams select the string-to-key input
// (empty: the defaults).
func (c *Credentials) keyFor(etype int32, kvno uint32, salt, s2kparams string) (ltKey, bool, error) {
	return c.keyForCtx(context.Background(), etype, kvno, salt, s2kparams)
}

// keyForCtx is keyFor with a string-to-key that gives up waiting when ctx
// ends (see stringToKey).
func (c *Credentials) keyForCtx(ctx context.Context, etype int32, kvno uint32, salt, s2kparams string) (ltKey, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path != "" {
		for _, k := range c.keys {
			if k.etype == etype && (kvno == 0 || k.kvno == kvno) {
				return k, true, nil
			}
		}
		if kvno != 0 {
			// The KDC names a kvno the keytab lacks; the newest key still
			// yields a meaningful answer (decrypt failure = stale keytab).
			for _, k := range c.keys {
				if k.etype == etype {
					return k, true, nil
				}
			}
		}
		return ltKey{}, false, nil
	}
	et := lookupEtype(etype)
	if et == nil {
		return ltKey{}, false, nil
	}
	if salt == "" {
		salt = c.principal.salt()
	}
	if s2kparams == "" {
		s2kparams = et.gk.GetDefaultStringToKeyParams()
	}
	in := s2kInput{etype, salt, s2kparams}
	if k, ok := c.s2k[in]; ok {
		return ltKey{etype: etype, key: k}, true, nil
	}
	// String-to-key is slow by design; other Clients sharing these
	// credentials (and WorldReadable) must not wait for it.
	if c.s2kSlot == nil {
		c.s2kSlot = make(chan struct{}, 1)
	}
	slot, password := c.s2kSlot, c.password
	c.mu.Unlock()
	k, err := c.stringToKey(ctx, slot, et, password, in)
	c.mu.Lock()
	if err != nil {
		return ltKey{}, false, err
	}
	return ltKey{etype: etype, key: k}, true, nil
}

// stringToKey derives a password key. At most one derivation runs per
// Credentials at a time (one module: a KDC answering with fresh salts
// cannot multiply the cost), and a caller stops waiting when ctx ends. The
// derivation itself cannot be interrupted: it finishes in its goroutine,
// bounded by the iteration cap, and its key is cached for the next login.
func (c *Credentials) stringToKey(ctx context.Context, slot chan struct{}, et *etypeInfo, password string, in s2kInput) ([]byte, error) {
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	k, ok := c.s2k[in] // derived by whoever held the slot before
	c.mu.Unlock()
	if ok {
		<-slot
		return k, nil
	}
	type result struct {
		key []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-slot }()
		k, err := et.gk.StringToKey(password, in.salt, in.s2kparams)
		if err != nil {
			done <- result{err: fmt.Errorf("string-to-key %s: %w", et.name, err)}
			return
		}
		c.mu.Lock()
		if len(c.s2k) >= maxS2KCache {
			// The KDC chooses salts and parameters: bound what it can make us keep.
			clear(c.s2k)
		}
		c.s2k[in] = k
		c.mu.Unlock()
		done <- result{key: k}
	}()
	select {
	case r := <-done:
		return r.key, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// maxS2KCache bounds the string-to-key results kept per Credentials; a KDC
// normally announces one salt and parameter set per enctype.
const maxS2KCache = 8

// DefaultMaxS2KIterations bounds the PBKDF2 iteration count a KDC may ask
// for, unless Options.MaxS2KIterations says otherwise: string-to-key cannot
// be interrupted, and a KDC (or whoever answers in its place) choosing 2^24
// iterations would cost seconds of CPU per login. MIT's defaults are 4,096
// (aes*-sha1) and 32,768 (aes*-sha2); 65,536 costs ~0.2 s of one core here.
const DefaultMaxS2KIterations = 1 << 16

// MaxS2KIterationsLimit is the highest cap Options.MaxS2KIterations may set.
const MaxS2KIterationsLimit = enctype.MaxS2KIterations

// checkS2KParams validates the s2kparams of an ETYPE-INFO2 entry: the four
// AES enctypes take a 4-byte big-endian iteration count, at least the
// enctype's default (RFC 3962's 0 even means 2^32) and at most
// maxIterations.
func checkS2KParams(etype int32, p []byte, maxIterations uint32) error {
	et := lookupEtype(etype)
	if et == nil {
		return fmt.Errorf("s2kparams for unsupported %s", EtypeName(etype))
	}
	if len(p) != 4 {
		return fmt.Errorf("%s s2kparams of %d bytes, want 4", et.name, len(p))
	}
	n := binary.BigEndian.Uint32(p)
	def, err := hex.DecodeString(et.gk.GetDefaultStringToKeyParams())
	if err != nil || len(def) != 4 {
		return fmt.Errorf("%s: no default s2kparams", et.name)
	}
	if min := binary.BigEndian.Uint32(def); n < min || n > maxIterations {
		return fmt.Errorf("%s s2kparams: %d iterations, want %d to %d", et.name, n, min, maxIterations)
	}
	return nil
}

// hasEtype reports whether a key of the enctype is available without asking
// the KDC for salt (always true for passwords).
func (c *Credentials) hasEtype(etype int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" {
		return lookupEtype(etype) != nil
	}
	for _, k := range c.keys {
		if k.etype == etype {
			return true
		}
	}
	return false
}
