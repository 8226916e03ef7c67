package memtrim

import (
	"fmt"
	"os"
	"unsafe"
)

// EmbeddedBytes unmaps the pages lying wholly inside each of bufs and
// returns how many bytes it advised. Each buf must be data of the
// executable file itself (a //go:embed []byte) that nobody writes: such
// bytes sit in the executable's writable data mapping, which
// ExecutablePages leaves alone, but their pages hold the file's content
// and come back from it on the next access. A buf elsewhere (the heap, an
// anonymous mapping) would read back as zeros and is refused.
func EmbeddedBytes(bufs ...[]byte) (int, error) {
	ms, exe, err := selfMappings()
	if err != nil {
		return 0, err
	}
	page := uint64(os.Getpagesize())
	var spans []mapping
	for i, b := range bufs {
		if len(b) == 0 {
			continue
		}
		lo := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		hi := lo + uint64(len(b))
		start, end := (lo+page-1)/page*page, hi/page*page
		if end <= start {
			continue // no whole page
		}
		in := false
		for _, m := range ms {
			in = in || (m.start <= start && end <= m.end)
		}
		if !in {
			return 0, fmt.Errorf("bytes %d at %x-%x: not in a private mapping of %s", i, lo, hi, exe)
		}
		spans = append(spans, mapping{start: start, end: end})
	}
	return dontNeedAll(spans)
}
