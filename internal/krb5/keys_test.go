package krb5

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"

	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// writeTestKeytab writes a keytab with AES keys of principal (name@REALM)
// derived from testPassword, at kvno 1 and 2 (2 from another password).
func writeTestKeytab(t testing.TB, path, principal string) {
	testutil.WriteKeytab(t, path, principal, testPassword)
}

func TestKeytabCredentials(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k.keytab")
	writeTestKeytab(t, path, "probe@PERF.TEST")
	p := mustPrincipal(t, "probe@PERF.TEST")
	c, err := NewKeytabCredentials(path, p)
	if err != nil {
		t.Fatal(err)
	}
	if c.WorldReadable() {
		t.Error("0600 keytab reported world-readable")
	}
	pw := NewPasswordCredentials(testPassword, p)
	for _, e := range []int32{20, 18} {
		k, ok, err := c.keyFor(e, 0, "", "")
		if err != nil || !ok || k.kvno != 2 {
			t.Fatalf("etype %d: newest key %+v %v %v, want kvno 2", e, k, ok, err)
		}
		want, _, _ := pw.keyFor(e, 0, "", "")
		if string(k.key) != string(want.key) {
			t.Errorf("etype %d: keytab key differs from string-to-key of the password", e)
		}
		if k1, ok, _ := c.keyFor(e, 1, "", ""); !ok || k1.kvno != 1 {
			t.Errorf("etype %d: kvno 1 not found", e)
		}
	}
	if _, ok, _ := c.keyFor(17, 0, "", ""); ok {
		t.Error("found an etype-17 key of another principal")
	}
	if !c.hasEtype(20) || c.hasEtype(19) {
		t.Error("hasEtype wrong")
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = NewKeytabCredentials(path, p)
	if err != nil || !c.WorldReadable() {
		t.Errorf("0644 keytab: world-readable %v, %v", c != nil && c.WorldReadable(), err)
	}

	// Errors say what is wrong.
	for name, tc := range map[string]struct {
		data []byte
		p    string
		want string
	}{
		"missing":          {nil, "probe@PERF.TEST", "no such file"},
		"not a keytab":     {[]byte("hello world"), "probe@PERF.TEST", "malformed keytab"},
		"truncated":        {testutil.MustRead(t, path)[:40], "probe@PERF.TEST", "keytab"},
		"other principal":  {testutil.MustRead(t, path), "nobody@PERF.TEST", "no AES key for nobody@PERF.TEST"},
		"other realm":      {testutil.MustRead(t, path), "probe@OTHER.TEST", "no AES key"},
		"empty":            {[]byte{}, "probe@PERF.TEST", "keytab"},
		"bad entry length": {[]byte{5, 2, 0x7f, 0xff, 0xff, 0xff, 1}, "probe@PERF.TEST", "keytab"},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if tc.data != nil {
			if err := os.WriteFile(f, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err := NewKeytabCredentials(f, mustPrincipal(t, tc.p))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to mention %q", name, err, tc.want)
		}
	}
}

func TestPasswordFile(t *testing.T) {
	dir := t.TempDir()
	p := mustPrincipal(t, "probe@PERF.TEST")
	for content, want := range map[string]string{
		testPassword + "\n":         testPassword,
		testPassword + "\r\nmore\n": testPassword,
		testPassword:                testPassword,
	} {
		f := filepath.Join(dir, "pw")
		os.WriteFile(f, []byte(content), 0o600)
		c, err := NewPasswordFileCredentials(f, p)
		if err != nil || c.password != want {
			t.Errorf("%q: %v", content, err)
		}
	}
	f := filepath.Join(dir, "empty")
	os.WriteFile(f, []byte("\nsecond line\n"), 0o600)
	if _, err := NewPasswordFileCredentials(f, p); err == nil || !strings.Contains(err.Error(), "first line is empty") {
		t.Errorf("empty first line: %v", err)
	}
	// The password never appears in an error.
	if _, err := NewPasswordFileCredentials(filepath.Join(dir, "nope"), p); err == nil || strings.Contains(err.Error(), testPassword) {
		t.Errorf("missing file: %v", err)
	}
}

// A keytab entry whose key length does not fit its enctype (empty, or a
// 16-byte key labelled aes256) is skipped, not used to build a schedule.
func TestKeytabWrongKeyLength(t *testing.T) {
	p := mustPrincipal(t, "probe@PERF.TEST")
	kt := keytab.New()
	for _, e := range []int32{20, 18} {
		if err := kt.AddEntry("probe", "PERF.TEST", testPassword, time.Unix(1e9, 0), 2, e); err != nil {
			t.Fatal(err)
		}
		if err := kt.AddEntry("probe", "PERF.TEST", testPassword, time.Unix(1e9, 0), 3, e); err != nil {
			t.Fatal(err)
		}
	}
	for i := range kt.Entries {
		if kt.Entries[i].KVNO == 3 {
			if kt.Entries[i].Key.KeyType == 18 {
				kt.Entries[i].Key.KeyValue = []byte{}
			} else {
				kt.Entries[i].Key.KeyValue = kt.Entries[i].Key.KeyValue[:16]
			}
		}
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bad.keytab")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := NewKeytabCredentials(path, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []int32{20, 18} {
		k, ok, err := creds.keyFor(e, 0, "", "")
		if !ok || err != nil || k.kvno != 2 || len(k.key) != 32 {
			t.Errorf("%s: kvno %d, %d-byte key, %v %v; want the kvno 2 key", EtypeName(e), k.kvno, len(k.key), ok, err)
		}
	}
	c, err := NewClient(Options{KDC: "127.0.0.1:1", Client: p, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, e := range []int32{20, 18} {
		if err := c.buildASReq(&preauthChoice{etype: e}, time.Now()); err != nil {
			t.Errorf("%s: %v", EtypeName(e), err)
		}
	}

	// Only bad keys: no usable key at all.
	bad := kt.Entries[:0]
	for _, e := range kt.Entries {
		if e.KVNO == 3 {
			bad = append(bad, e)
		}
	}
	kt.Entries = bad
	if b, err = kt.Marshal(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewKeytabCredentials(path, p); err == nil || !strings.Contains(err.Error(), "no AES key") {
		t.Errorf("keytab with only bad keys: %v", err)
	}
}

// Credentials whose file is missing load it on the first refresh after it
// appears, failing until then.
func TestPendingCredentials(t *testing.T) {
	dir := t.TempDir()
	p := mustPrincipal(t, "probe@PERF.TEST")
	kt, pw := filepath.Join(dir, "k.keytab"), filepath.Join(dir, "pw")
	for _, c := range []*Credentials{PendingCredentials(kt, "", p, nil), PendingCredentials("", pw, p, nil)} {
		if _, err := c.refresh(time.Now()); err == nil || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("refresh without the file: %v", err)
		}
	}
	writeTestKeytab(t, kt, "probe@PERF.TEST")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ktc, pwc := PendingCredentials(kt, "", p, nil), PendingCredentials("", pw, p, nil)
	for _, c := range []*Credentials{ktc, pwc} {
		if _, err := c.refresh(time.Now()); err != nil {
			t.Errorf("refresh with the file: %v", err)
		}
	}
	if !ktc.hasEtype(18) || pwc.password != "secret" {
		t.Error("keys not loaded")
	}
}

// refresh returns the generation of the keys it leaves in place: after a
// re-read, the new one.
func TestRefreshReturnsNewGeneration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.keytab")
	writeTestKeytab(t, path, "probe@PERF.TEST")
	c, err := NewKeytabCredentials(path, mustPrincipal(t, "probe@PERF.TEST"))
	if err != nil {
		t.Fatal(err)
	}
	before := c.generation
	writeTestKeytab(t, path, "probe@PERF.TEST")
	if err := os.Chtimes(path, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	gen, err := c.refresh(time.Now().Add(2 * keytabRecheck))
	if err != nil || gen != before+1 || gen != c.generation {
		t.Errorf("refresh after a change: generation %d, %v; want %d", gen, err, before+1)
	}
}

// NewKeytabCredentialsFor reads one keytab for many principals and gives
// each the keys NewKeytabCredentials gives it alone; a principal without
// keys is an error.
func TestKeytabCredentialsFor(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{NoKadmind: true})
	var ps []Principal
	for i := 1; i <= r.Opts.Users; i++ {
		ps = append(ps, mustPrincipal(t, r.User(i)))
	}
	cs, err := NewKeytabCredentialsFor(r.UserKeytab, ps)
	if err != nil || len(cs) != len(ps) {
		t.Fatalf("%d credentials, %v", len(cs), err)
	}
	for i, p := range ps {
		one, err := NewKeytabCredentials(r.UserKeytab, p)
		if err != nil {
			t.Fatal(err)
		}
		if cs[i].Principal().String() != p.String() || len(cs[i].keys) != 4 || len(one.keys) != 4 {
			t.Fatalf("%s: %d keys for %s, alone %d", p, len(cs[i].keys), cs[i].Principal(), len(one.keys))
		}
		for k := range one.keys {
			if string(cs[i].keys[k].key) != string(one.keys[k].key) || cs[i].keys[k].etype != one.keys[k].etype {
				t.Errorf("%s: key %d differs", p, k)
			}
		}
		if gen, err := cs[i].refresh(time.Now().Add(2 * keytabRecheck)); err != nil || gen != 1 {
			t.Errorf("%s: refresh of an unchanged keytab: generation %d, %v", p, gen, err)
		}
	}
	if _, err := NewKeytabCredentialsFor(r.UserKeytab, append(ps, mustPrincipal(t, "nosuch@"+r.Realm))); err == nil || !strings.Contains(err.Error(), "no AES key for nosuch@") {
		t.Errorf("missing principal: %v", err)
	}
}

// A FIFO put at the keytab's path while the credentials are in use (or at
// a password file's before it loads) is an error at the next refresh, at
// once, and the keys loaded before stay (issue 26 item 4: the reload's
// blocking open hung under the credentials' lock, and every /probe of the
// module with it).
func TestKeyFileFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k.keytab")
	writeTestKeytab(t, path, "probe@PERF.TEST")
	p := mustPrincipal(t, "probe@PERF.TEST")
	c, err := NewKeytabCredentials(path, p)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	pw := PendingCredentials("", path, p, nil)
	for what, refresh := range map[string]func() error{
		"keytab": func() error {
			_, err := c.refresh(time.Now().Add(2 * keytabRecheck))
			return err
		},
		"password file": func() error {
			_, err := pw.refresh(time.Now())
			return err
		},
		"new keytab credentials": func() error {
			_, err := NewKeytabCredentials(path, p)
			return err
		},
	} {
		done := make(chan error, 1)
		go func() { done <- refresh() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "a FIFO") || strings.Contains(err.Error(), dir) {
				t.Errorf("%s: %v, want a FIFO named as such, without its path", what, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the load of a FIFO still blocks after 5 s", what)
		}
	}
	if !c.hasEtype(20) {
		t.Error("the keys loaded before the FIFO were dropped")
	}
}
