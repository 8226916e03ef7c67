package keytab_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gokeytab "github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/krb5-exporter/krb5-exporter/internal/enctype"
	"github.com/krb5-exporter/krb5-exporter/internal/keytab"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// sample is a keytab written by gokrb5 (another implementation's writer):
// two principals, the four AES types, a kvno above 255 (only the 32-bit
// field holds it), and a deleted entry (a hole) put in after the header.
func sample(t testing.TB) []byte {
	t.Helper()
	kt := gokeytab.New()
	at := time.Unix(1e9, 0)
	for _, e := range []int32{20, 19, 18, 17} {
		if err := kt.AddEntry("probe/host.example", "EXAMPLE.COM", "pw-a", at, 44, e); err != nil {
			t.Fatal(err)
		}
		kt.Entries[len(kt.Entries)-1].KVNO = 300 // 44 in the 8-bit field
	}
	if err := kt.AddEntry("user1", "OTHER.TEST", "pw-b", at, 7, 18); err != nil {
		t.Fatal(err)
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	hole := binary.BigEndian.AppendUint32(nil, negative(12))
	hole = append(hole, make([]byte, 12)...)
	return slices.Concat(b[:2], hole, b[2:])
}

// negative is -n as a keytab's 32-bit record length holds it (a hole).
func negative(n int32) uint32 { return uint32(-n) }

// TestParseAgreesWithMIT reads the sample with MIT's own klist (-K prints
// the keys) and checks that Parse finds the same entries, in order.
func TestParseAgreesWithMIT(t *testing.T) {
	testutil.RequireProgram(t, "klist")
	b := sample(t)
	path := filepath.Join(t.TempDir(), "k.keytab")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("klist", "-k", "-t", "-e", "-K", path).CombinedOutput()
	if err != nil {
		t.Fatalf("klist: %v\n%s", err, out)
	}
	var want []string
	for _, line := range strings.Split(string(out), "\n") {
		// " 300 09/09/01 01:46:40 probe/host.example@EXAMPLE.COM (aes256-cts-hmac-sha384-192)  (0x…)"
		f := strings.Fields(line)
		if len(f) != 6 || !strings.HasPrefix(f[5], "(0x") {
			continue
		}
		want = append(want, strings.Join([]string{f[0], f[3], f[4], strings.ToLower(f[5])}, " "))
	}
	entries, err := keytab.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, strings.Join([]string{
			strconv.FormatUint(uint64(e.KVNO), 10), strings.Join(e.Components, "/") + "@" + e.Realm,
			"(" + enctype.Name(e.EncType) + ")", "(0x" + hex.EncodeToString(e.Key) + ")"}, " "))
	}
	if len(want) != 5 || !slices.Equal(got, want) {
		t.Fatalf("Parse:\n%s\nMIT klist:\n%s", strings.Join(got, "\n"), out)
	}
}

// TestParseErrors: where a file goes wrong, in words and numbers only.
func TestParseErrors(t *testing.T) {
	b := sample(t)
	for name, tc := range map[string]struct {
		in   []byte
		want string
	}{
		"empty":           {nil, "not a keytab (bad header)"},
		"text":            {[]byte("hello world"), "not a keytab (bad header)"},
		"version 3":       {[]byte{5, 3, 0, 0, 0, 0}, "not a keytab (bad header)"},
		"cut in entry 2":  {b[:2+4+12+4+20], "entry 2 is truncated"},
		"hole past end":   {slices.Concat(b[:2], binary.BigEndian.AppendUint32(nil, negative(64)), make([]byte, 10)), "entry 1 is truncated"},
		"entry too short": {slices.Concat(b[:2], binary.BigEndian.AppendUint32(nil, 3), []byte{0, 1, 0}), "entry 1 does not parse"},
	} {
		_, err := keytab.Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if e, err := keytab.Parse([]byte{5, 2}); err != nil || len(e) != 0 {
		t.Errorf("a header alone: %v, %d entries; want none and no error", err, len(e))
	}
}

// FuzzParse: no input panics, no error quotes the input, and where gokrb5
// (another implementation) reads a file too, both read the same entries.
func FuzzParse(f *testing.F) {
	b := sample(f)
	f.Add(b)
	f.Add(b[:len(b)-3])
	f.Add([]byte{5, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := keytab.Parse(in)
		if err != nil {
			for _, w := range strings.Fields(strings.NewReplacer(":", " ", "(", " ", ")", " ").Replace(err.Error())) {
				if !strings.Contains("malformed keytab not a bad header entry is truncated does not parse", w) && strings.Trim(w, "0123456789") != "" {
					t.Fatalf("error %q has a word of its own: %q", err, w)
				}
			}
			return
		}
		kt := gokeytab.New()
		ok := func() (ok bool) {
			defer func() {
				if recover() != nil {
					ok = false
				}
			}()
			return kt.Unmarshal(in) == nil
		}()
		if !ok || len(kt.Entries) != len(got) {
			return // gokrb5 rejects, or reads past a record it cannot parse
		}
		for i, e := range kt.Entries {
			g := got[i]
			if g.Realm != e.Principal.Realm || !slices.Equal(g.Components, e.Principal.Components) ||
				g.KVNO != e.KVNO || g.EncType != e.Key.KeyType || !bytes.Equal(g.Key, e.Key.KeyValue) {
				t.Fatalf("entry %d: Parse %+v, gokrb5 %+v", i, g, e)
			}
		}
	})
}
