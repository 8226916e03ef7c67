package krb5

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ownWords is text the loaders write themselves: an 8-byte window of the
// input that happens to be part of it is not a leak.
const ownWords = "malformed keytab: not a keytab (bad header) entry is truncated does not parse " +
	"no AES key for probe@PERF.TEST password file: the first line is empty bytes is not a keytab"

// FuzzKeyFileErrors loads arbitrary bytes as a keytab and as a password
// file: whatever the error says, it must quote no 8-byte sequence of the
// file (keys, passwords) and not its path (issue 10 item 1: gokrb5's parser
// error quoted a truncated keytab whole).
func FuzzKeyFileErrors(f *testing.F) {
	dir := f.TempDir()
	good := filepath.Join(dir, "good.keytab")
	writeTestKeytab(f, good, "probe@PERF.TEST")
	kt, err := os.ReadFile(good)
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range []int{0, 1, 2, 6, 40, 77, 100, len(kt) / 2, len(kt) - 1} {
		f.Add(kt[:n])
	}
	f.Add(kt)
	bad := append([]byte{}, kt...)
	bad[5]++ // the first entry's length one too long: every later entry shifts
	f.Add(bad)
	f.Add([]byte("hello world, this is not a keytab"))
	f.Add([]byte{5, 2, 0x7f, 0xff, 0xff, 0xff, 1})
	f.Add([]byte("\nsecret-password-on-line-two\n"))
	p := mustPrincipal(f, "probe@PERF.TEST")
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "key-file-under-test")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, ktErr := NewKeytabCredentials(path, p)
		_, pwErr := NewPasswordFileCredentials(path, p)
		for _, err := range []error{ktErr, pwErr} {
			if err == nil {
				continue
			}
			msg := err.Error()
			if strings.Contains(msg, path) || strings.Contains(msg, "key-file-under-test") {
				t.Fatalf("error names the file's path: %q", msg)
			}
			for i := 0; i+8 <= len(data); i++ {
				w := string(data[i : i+8])
				if strings.Contains(msg, w) && !strings.Contains(ownWords, w) {
					t.Fatalf("error quotes bytes %d-%d of the file (%q): %q", i, i+8, w, msg)
				}
			}
		}
	})
}
