package memtrim

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A /proc/PID/maps of the daemon (static build), cut short.
const sampleMaps = `00400000-00c9a000 r-xp 00000000 fe:00 9994251                            /usr/bin/krb5-exporter
00c9a000-015b3000 r--p 0089a000 fe:00 9994251                            /usr/bin/krb5-exporter
015b3000-01b61000 rw-p 011b3000 fe:00 9994251                            /usr/bin/krb5-exporter
01b61000-03baf000 rw-p 00000000 00:00 0 
c000000000-c000400000 rw-p 00000000 00:00 0 
7f2fcbc06000-7f2fcbd5c000 r-xp 00026000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f2fcbd60000-7f2fcbd61000 r--s 00000000 fe:00 9994251                    /usr/bin/krb5-exporter
7ffd6b5e1000-7ffd6b602000 rw-p 00000000 00:00 0                          [stack]
`

// TestExecutableMappings: the private mappings of the executable (code,
// read-only data, data), the first two read-only; not other files,
// anonymous or shared mappings; a replaced binary is still its own.
func TestExecutableMappings(t *testing.T) {
	for _, exe := range []string{"/usr/bin/krb5-exporter", "/usr/bin/krb5-exporter (deleted)"} {
		maps := strings.ReplaceAll(sampleMaps, "/usr/bin/krb5-exporter", exe)
		all, err := fileMappings([]byte(maps), trimDeleted(exe))
		if err != nil {
			t.Fatal(err)
		}
		data := mapping{0x15b3000, 0x1b61000, "rw-p", exe}
		if len(all) != 3 || all[2] != data {
			t.Errorf("%s: %+v, want the data mapping %+v last", exe, all, data)
		}
		got := readOnly(all)
		want := []mapping{{0x400000, 0xc9a000, "r-xp", exe}, {0xc9a000, 0x15b3000, "r--p", exe}}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s: %+v, want %+v", exe, got, want)
		}
	}
	if _, err := fileMappings([]byte("zz-00 r-xp 0 0 0 /x\n"), "/x"); err == nil {
		t.Error("a malformed range is no error")
	}
}

// TestExecutablePagesUnmaps: of this test binary's code and read-only
// data that start-up and the tests mapped, a good part is gone from its
// resident memory after the call, as /proc/self/smaps counts it (reading
// smaps maps some back: the runtime, os, bufio, with their neighbours).
func TestExecutablePagesUnmaps(t *testing.T) {
	before := readOnlyExeRss(t)
	n, err := ExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	after := readOnlyExeRss(t)
	t.Logf("advised %d bytes; resident %d kB before, %d kB after", n, before, after)
	if n == 0 || before == 0 || after > before*4/5 {
		t.Errorf("advised %d bytes; resident %d kB before, %d kB after: want at most 80 %%", n, before, after)
	}
}

// readOnlyExeRss sums the Rss of the executable's read-only mappings in
// /proc/self/smaps.
func readOnlyExeRss(t *testing.T) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps")
	}
	defer f.Close()
	sum, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			in = len(f) >= 6 && f[5] == exe && !strings.Contains(f[1], "w")
		case in && len(f) == 3 && f[0] == "Rss:":
			kb, _ := strconv.Atoi(f[1])
			sum += kb
		}
	}
	return sum
}
