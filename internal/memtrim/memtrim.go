// Package memtrim takes out of the daemon's resident memory the pages of
// its own executable that only start-up used.
//
// The binary holds every command (bench with its chart fonts, top, the
// realm harness), and start-up runs the init of every package in it:
// those pages of code and read-only data, and their neighbours (the
// kernel maps up to 16 pages around each page fault from the page cache),
// stay mapped for the life of the process, about 3 MB of the daemon's
// resident memory. Once the daemon is set up, MADV_DONTNEED on the
// executable's read-only mappings unmaps them: the pages stay in the page
// cache, and those the daemon uses again are mapped back by the next
// access (a minor fault). Only read-only private mappings are touched,
// which hold nothing but the file's content (a debugger's breakpoints,
// written there before the call, would be dropped). EmbeddedBytes does
// the same for given embedded data in the writable data mapping (the
// chart fonts) that nobody writes.
package memtrim

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// mapping is one line of /proc/self/maps.
type mapping struct {
	start, end uint64
	perms      string
	path       string
}

// readOnly keeps the mappings that are not writable (code, read-only
// data): they hold nothing but the file's content.
func readOnly(ms []mapping) []mapping {
	var out []mapping
	for _, m := range ms {
		if m.perms[1] != 'w' {
			out = append(out, m)
		}
	}
	return out
}

// fileMappings lists the private mappings of the file exe in a
// /proc/PID/maps content.
func fileMappings(maps []byte, exe string) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := bytes.Fields(sc.Bytes())
		if len(f) < 6 {
			continue // anonymous
		}
		path := string(bytes.Join(f[5:], []byte(" ")))
		if path != exe && path != exe+" (deleted)" {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			return nil, fmt.Errorf("maps: malformed range %q", f[0])
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("maps: malformed range %q", f[0])
		}
		perms := string(f[1])
		if len(perms) != 4 || perms[3] != 'p' {
			continue // shared
		}
		out = append(out, mapping{start, end, perms, path})
	}
	return out, sc.Err()
}

// ExecutablePages unmaps the resident pages of the executable's
// read-only mappings (code, read-only data) and returns how many bytes
// of address space it advised.
func ExecutablePages() (int, error) {
	all, _, err := selfMappings()
	if err != nil {
		return 0, err
	}
	return dontNeedAll(readOnly(all))
}

// dontNeedAll advises MADV_DONTNEED on each range of ms and returns how
// many bytes it advised.
func dontNeedAll(ms []mapping) (int, error) {
	n := 0
	for _, m := range ms {
		if err := dontNeed(m.start, m.end-m.start); err != nil {
			return n, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, err)
		}
		n += int(m.end - m.start)
	}
	return n, nil
}

// selfMappings lists the private mappings of this process's executable
// and returns its path.
func selfMappings() ([]mapping, string, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, "", err
	}
	exe = trimDeleted(exe)
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, "", err
	}
	ms, err := fileMappings(maps, exe)
	return ms, exe, err
}

func trimDeleted(p string) string {
	const d = " (deleted)"
	if len(p) > len(d) && p[len(p)-len(d):] == d {
		return p[:len(p)-len(d)]
	}
	return p
}
