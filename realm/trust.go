package realm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Peer is the other realm of a two-way trust, as a realm's krb5.conf
// names it.
type Peer struct {
	Realm   string `json:"realm"`
	Domain  string `json:"domain"`
	KDCPort int    `json:"kdc_port"`
}

// trustDir is where Up creates the realm of Options.Trust: inside this
// realm's directory, so that its database (which holds the cross-realm
// keys) is under the same 0700 directory and Down removes it too.
const trustDir = "trust"

// TrustDir is the directory of the trusted realm Up creates with
// Options.Trust.
func (r *Realm) TrustDir() string { return r.path(trustDir) }

// upTrusted creates the realm of r.Opts.Trust in TrustDir and the trust
// between them; it starts nothing.
func (r *Realm) upTrusted(ctx context.Context) (*Realm, error) {
	b, err := Create(ctx, Options{
		Dir:      r.TrustDir(),
		Realm:    r.Opts.Trust,
		Domain:   strings.ToLower(r.Opts.Trust),
		Users:    -1,
		Services: 1,
		Fillers:  -1,
		// The same enctypes on both sides, so the shared password gives
		// both databases the same keys.
		Enctypes:  r.Opts.Enctypes,
		NoSPAKE:   r.Opts.NoSPAKE,
		NoKadmind: true,
	})
	if err != nil {
		return nil, err
	}
	if err := Trust(ctx, r, b); err != nil {
		b.Down()
		return nil, err
	}
	return b, nil
}

// Trust makes a two-way trust between the created realms a and b: the
// principals krbtgt/B@A and krbtgt/A@B in both databases with the same
// keys (each from a random password given to kadmin.local on its standard
// input, with the same salt, enctypes and kvno 1 on both sides), and both
// krb5.conf files naming the other realm's KDC, its domain and the direct
// path in [capaths]. The passwords are written nowhere: the keys exist
// only in the two databases. Running KDCs read the new principals at
// once; krb5.conf is read by clients (and KDCs) when they start.
func Trust(ctx context.Context, a, b *Realm) error {
	if a.Realm == b.Realm {
		return fmt.Errorf("realm: a realm cannot trust itself")
	}
	var cmds []string
	for _, p := range []string{"krbtgt/" + b.Realm + "@" + a.Realm, "krbtgt/" + a.Realm + "@" + b.Realm} {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return fmt.Errorf("realm: %w", err)
		}
		cmds = append(cmds, "addprinc -clearpolicy -pw "+hex.EncodeToString(secret)+" "+p)
	}
	for _, r := range []*Realm{a, b} {
		if _, err := r.KadminLocal(ctx, cmds...); err != nil {
			// kadmin.local's messages name the principal, never the password.
			return fmt.Errorf("realm: trust between %s and %s: %w", a.Realm, b.Realm, err)
		}
	}
	a.Peer = &Peer{Realm: b.Realm, Domain: b.Domain, KDCPort: b.KDCPort}
	b.Peer = &Peer{Realm: a.Realm, Domain: a.Domain, KDCPort: a.KDCPort}
	for _, r := range []*Realm{a, b} {
		if err := r.writeConfigs(); err != nil {
			return err
		}
		if err := r.save(); err != nil {
			return err
		}
	}
	return nil
}

// loadTrusted loads the trusted realm of a realm Up created with
// Options.Trust.
func (r *Realm) loadTrusted() error {
	if r.Opts.Trust == "" {
		return nil
	}
	b, err := Load(r.TrustDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed by hand: Down still removes this realm
	}
	if err != nil {
		return err
	}
	if b.Realm != r.Opts.Trust {
		return fmt.Errorf("realm: %s holds realm %s, not %s", r.TrustDir(), b.Realm, r.Opts.Trust)
	}
	r.Trusted = b
	return nil
}

// RestartKDCShifted restarts the KDC with its clock moved by offset
// (libfaketime, Debian's faketime package, preloaded into krb5kdc): a KDC
// whose clock is off, as its clients see it. Zero restarts it with the
// true time.
func (r *Realm) RestartKDCShifted(ctx context.Context, offset time.Duration) error {
	if r.Opts.MovableClock {
		return fmt.Errorf("realm: %s's KDC clock is movable: MoveKDCClock", r.Realm)
	}
	if offset != 0 {
		if _, err := fakeTimeLib(); err != nil {
			return err
		}
	}
	if err := r.StopKDC(); err != nil {
		return err
	}
	r.clockShift = offset
	return r.StartKDC(ctx)
}

// fakeTimeLibs are where Debian installs libfaketime.
var fakeTimeLibs = []string{
	"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/faketime/libfaketime.so.1",
}

func fakeTimeLib() (string, error) {
	for _, p := range fakeTimeLibs {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("realm: a shifted KDC clock needs libfaketime (apt-get install faketime)")
}

// clockFile holds the offset of a MovableClock KDC's clock, as
// libfaketime reads it ("+600s").
const clockFile = "kdc-clock-offset"

// MoveKDCClock steps the clock of the running KDC (Options.MovableClock)
// to offset from the true time; zero sets it right again. The KDC's
// processes read the offset again within a second (libfaketime's cache).
func (r *Realm) MoveKDCClock(offset time.Duration) error {
	if !r.Opts.MovableClock {
		return fmt.Errorf("realm: %s's KDC clock is not movable (Options.MovableClock)", r.Realm)
	}
	return writeClockFile(r.path(clockFile), offset)
}

// writeClockFile replaces the offset file at once (libfaketime opens it
// at each read): a half-written offset is never read.
func writeClockFile(path string, offset time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%+ds\n", int64(offset/time.Second)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// shiftEnv is the environment that shifts the KDC's clock (the faketime
// program itself cannot be used: it waits for its child, and krb5kdc's
// daemonised process outlives that child): by clockShift, or by the
// offset in clockFile for a MovableClock (created at zero).
func (r *Realm) shiftEnv(bin string) ([]string, error) {
	if bin != r.bins.KDC || (r.clockShift == 0 && !r.Opts.MovableClock) {
		return nil, nil
	}
	lib, err := fakeTimeLib()
	if err != nil {
		return nil, err
	}
	env := []string{"LD_PRELOAD=" + lib, "DONT_FAKE_MONOTONIC=1"}
	if !r.Opts.MovableClock {
		return append(env, fmt.Sprintf("FAKETIME=%+ds", int64(r.clockShift/time.Second))), nil
	}
	path := r.path(clockFile)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		if err := writeClockFile(path, 0); err != nil {
			return nil, err
		}
	}
	return append(env, "FAKETIME_TIMESTAMP_FILE="+path, "FAKETIME_CACHE_DURATION=1"), nil
}

// downTrusted stops and removes the trusted realm, if any.
func (r *Realm) downTrusted() error {
	if r.Trusted == nil {
		if err := r.loadTrusted(); err != nil || r.Trusted == nil {
			return err
		}
	}
	return r.Trusted.Down()
}
