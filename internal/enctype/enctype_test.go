package enctype_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/enctype"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// MIT's own tools are the oracle: ktutil accepts each name and alias the
// table lists for a type MIT 1.20 still implements, and `klist -k -e`
// prints the canonical name, with "DEPRECATED:" exactly for the types the
// table calls weak.
func TestTableAgainstMIT(t *testing.T) {
	testutil.RequireProgram(t, "ktutil")
	testutil.RequireProgram(t, "klist")
	kt := filepath.Join(t.TempDir(), "all.keytab")
	var script strings.Builder
	var want []enctype.Type // one per addent, in order
	kvno := 0
	for _, typ := range enctype.All() {
		for _, name := range append([]string{typ.Name}, typ.Aliases...) {
			kvno++
			script.WriteString("addent -password -p x@T -k " + strconv.Itoa(kvno) + " -e " + name + "\npw\n")
			want = append(want, typ)
		}
	}
	script.WriteString("wkt " + kt + "\n")
	cmd := exec.Command("ktutil")
	cmd.Stdin = strings.NewReader(script.String())
	out, _ := cmd.CombinedOutput() // ktutil exits 0 whatever happens; read klist
	list, err := exec.Command("klist", "-k", "-e", kt).CombinedOutput()
	if err != nil {
		t.Fatalf("klist: %v\n%s\nktutil said:\n%s", err, list, out)
	}
	// "   3 x@T (DEPRECATED:arcfour-hmac) "
	re := regexp.MustCompile(`(?m)^\s*(\d+) x@T \((DEPRECATED:)?([a-z0-9-]+)\)`)
	got := map[int][2]string{}
	for _, m := range re.FindAllStringSubmatch(string(list), -1) {
		n, _ := strconv.Atoi(m[1])
		got[n] = [2]string{m[2], m[3]}
	}
	known := 0
	for i, typ := range want {
		g, ok := got[i+1]
		if !ok {
			// MIT 1.18+ dropped single DES and the raw types: it cannot
			// make keys of them, so those rows are checked by number only.
			if typ.ID >= 16 {
				t.Errorf("MIT did not accept %s (entry %d) for %d", typ.Name, i+1, typ.ID)
			}
			continue
		}
		known++
		if g[1] != typ.Name {
			t.Errorf("entry %d: MIT calls it %q, the table %q", i+1, g[1], typ.Name)
		}
		if (g[0] != "") != typ.Weak {
			t.Errorf("%s: MIT deprecated=%v, table weak=%v", typ.Name, g[0] != "", typ.Weak)
		}
	}
	if known < 15 {
		t.Errorf("only %d names checked against MIT; klist printed:\n%s", known, list)
	}
}

// The names MIT 1.20 writes into its log, in both formats, resolve to the
// table's numbers.
func TestLoggedNames(t *testing.T) {
	for logged, id := range map[string]int32{
		"aes256-cts-hmac-sha384-192(20)": 20, "aes128-cts-hmac-sha256-128(19)": 19,
		"aes256-cts-hmac-sha1-96(18)": 18, "aes128-cts-hmac-sha1-96(17)": 17,
		"DEPRECATED:arcfour-hmac(23)": 23, "DEPRECATED:des3-cbc-sha1(16)": 16,
	} {
		name := strings.TrimPrefix(logged[:strings.IndexByte(logged, '(')], "DEPRECATED:")
		typ, ok := enctype.ByName(name)
		if !ok || typ.ID != id || enctype.Name(id) != name {
			t.Errorf("%s: ByName = %+v, %v; Name(%d) = %q", logged, typ, ok, id, enctype.Name(id))
		}
	}
	for _, id := range []int32{1, 2, 3, 16, 23, 24, -128, -141} {
		if !enctype.IsWeak(id) {
			t.Errorf("%d not weak", id)
		}
	}
	for _, id := range []int32{17, 18, 19, 20, 25, 26, 99, -1} {
		if enctype.IsWeak(id) {
			t.Errorf("%d weak", id)
		}
	}
	if enctype.Name(99) != "etype-99" || enctype.Canonical(" AES256-SHA2 ") != "aes256-cts-hmac-sha384-192" {
		t.Errorf("Name(99) = %q, Canonical = %q", enctype.Name(99), enctype.Canonical(" AES256-SHA2 "))
	}
}

func TestParseClient(t *testing.T) {
	for name, want := range map[string]int32{
		"aes256-cts-hmac-sha384-192": 20, "aes128-cts-hmac-sha256-128": 19, "aes256-cts-hmac-sha1-96": 18,
		"aes128-cts-hmac-sha1-96": 17, "aes256-sha2": 20, "AES128-SHA2": 19, "aes128-sha1": 17, "AES256-CTS": 18,
	} {
		if id, err := enctype.ParseClient(name); err != nil || id != want {
			t.Errorf("ParseClient(%q) = %d, %v; want %d", name, id, err, want)
		}
	}
	for _, bad := range []string{"des3-cbc-sha1", "rc4-hmac", "camellia256-cts-cmac", "", "aes512"} {
		if _, err := enctype.ParseClient(bad); err == nil {
			t.Errorf("ParseClient(%q) accepted", bad)
		}
	}
}
