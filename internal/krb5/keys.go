package krb5

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jcmturner/gokrb5/v8/keytab"
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
// and fails with the reason until the file loads.
func PendingCredentials(keytabPath, passwordPath string, p Principal) *Credentials {
	if keytabPath != "" {
		return &Credentials{principal: p, path: keytabPath}
	}
	return &Credentials{principal: p, pwPath: passwordPath, s2k: map[s2kInput][]byte{}}
}

func (c *Credentials) loadPasswordLocked() error {
	f, err := os.Open(c.pwPath)
	if err != nil {
		return fmt.Errorf("password file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("password file: %w", err)
	}
	const maxPasswordFile = 64 << 10
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile))
	if err != nil {
		return fmt.Errorf("password file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return fmt.Errorf("password file %s: the first line is empty", c.pwPath)
	}
	c.password = line
	c.worldReadable = fi.Mode().Perm()&0o004 != 0
	return nil
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
			return c.generation, c.loadPasswordLocked()
		}
		return c.generation, nil
	}
	if c.keys == nil {
		// Never loaded (PendingCredentials): try on every probe.
		err := c.loadLocked(now)
		return c.generation, err
	}
	if now.Sub(c.checked) < keytabRecheck {
		return c.generation, nil
	}
	c.checked = now
	fi, err := os.Stat(c.path)
	if err != nil {
		return c.generation, fmt.Errorf("keytab: %w", err)
	}
	if fi.ModTime().Equal(c.modTime) && fi.Size() == c.size {
		return c.generation, nil
	}
	err = c.loadLocked(now)
	return c.generation, err // the generation after the load
}

func (c *Credentials) load(now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loadLocked(now)
}

func (c *Credentials) loadLocked(now time.Time) error {
	f, err := os.Open(c.path)
	if err != nil {
		return fmt.Errorf("keytab: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("keytab: %w", err)
	}
	const maxKeytab = 64 << 20
	if fi.Size() > maxKeytab {
		return fmt.Errorf("keytab %s: %d bytes is not a keytab", c.path, fi.Size())
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return fmt.Errorf("keytab: %w", err)
	}
	keys, err := keytabKeys(b, c.principal)
	if err != nil {
		return fmt.Errorf("keytab %s: %w", c.path, err)
	}
	c.keys = keys
	c.modTime, c.size, c.checked = fi.ModTime(), fi.Size(), now
	c.worldReadable = fi.Mode().Perm()&0o004 != 0
	c.generation++
	return nil
}

// keytabKeys extracts p's keys of supported enctypes, newest kvno first.
func keytabKeys(b []byte, p Principal) (keys []ltKey, err error) {
	// gokrb5's keytab parser indexes without bounds checks on some malformed
	// inputs; a bad file must be an error, not a crash of the daemon.
	defer func() {
		if r := recover(); r != nil {
			keys, err = nil, fmt.Errorf("malformed keytab")
		}
	}()
	kt := keytab.New()
	if err := kt.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("malformed keytab: %w", err)
	}
	for _, e := range kt.Entries {
		if e.Principal.Realm != p.Realm || !slices.Equal(e.Principal.Components, p.Components) {
			continue
		}
		et := lookupEtype(e.Key.KeyType)
		if et == nil || len(e.Key.KeyValue) != et.keyLen {
			// A key of the wrong length cannot be the principal's (and an
			// empty one would crash the key schedule): skip it like an
			// unsupported enctype.
			continue
		}
		keys = append(keys, ltKey{etype: e.Key.KeyType, kvno: e.KVNO, key: slices.Clone(e.Key.KeyValue)})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no AES key for %s", p)
	}
	slices.SortStableFunc(keys, func(a, b ltKey) int { return int(int64(b.kvno) - int64(a.kvno)) })
	return keys, nil
}

// keyFor returns the key of the given enctype. kvno 0 means the newest. For
// password credentials salt and s2kparams select the string-to-key input
// (empty: the defaults).
func (c *Credentials) keyFor(etype int32, kvno uint32, salt, s2kparams string) (ltKey, bool, error) {
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
	password := c.password
	c.mu.Unlock()
	k, err := et.gk.StringToKey(password, salt, s2kparams)
	c.mu.Lock()
	if err != nil {
		return ltKey{}, false, fmt.Errorf("string-to-key %s: %w", et.name, err)
	}
	if len(c.s2k) >= maxS2KCache {
		// The KDC chooses salts and parameters: bound what it can make us keep.
		clear(c.s2k)
	}
	c.s2k[in] = k
	return ltKey{etype: etype, key: k}, true, nil
}

// maxS2KCache bounds the string-to-key results kept per Credentials; a KDC
// normally announces one salt and parameter set per enctype.
const maxS2KCache = 8

// maxS2KIterations bounds the PBKDF2 iteration count a KDC may ask for:
// string-to-key cannot be interrupted, and 2^32 iterations would keep a
// probe busy for hours.
const maxS2KIterations = 1 << 24

// checkS2KParams validates the s2kparams of an ETYPE-INFO2 entry: the four
// AES enctypes take a 4-byte big-endian iteration count, at least the
// enctype's default (RFC 3962's 0 even means 2^32) and at most
// maxS2KIterations.
func checkS2KParams(etype int32, p []byte) error {
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
	if min := binary.BigEndian.Uint32(def); n < min || n > maxS2KIterations {
		return fmt.Errorf("%s s2kparams: %d iterations, want %d to %d", et.name, n, min, maxS2KIterations)
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
