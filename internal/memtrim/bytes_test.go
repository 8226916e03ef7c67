package memtrim

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"os"
	"testing"
	"unsafe"
)

// pages is embedded as the fonts the daemon releases are: a []byte in
// the executable's writable data.
//
//go:embed testdata/pages.txt
var pages []byte

// TestEmbeddedBytesUnmaps: after the call none of the whole pages of an
// embedded []byte is mapped in this process (/proc/self/pagemap, the
// page table itself), and the bytes read back as the file holds them.
func TestEmbeddedBytesUnmaps(t *testing.T) {
	want, err := os.ReadFile("testdata/pages.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pages, want) { // maps every page
		t.Fatal("the embedded bytes differ from the file before the call")
	}
	page := uintptr(os.Getpagesize())
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(pages)))
	start, end := (lo+page-1)/page*page, (lo+uintptr(len(pages)))/page*page
	if got := present(t, start, end); got != int((end-start)/page) {
		t.Fatalf("%d of %d pages mapped before the call", got, (end-start)/page)
	}
	n, err := EmbeddedBytes(pages)
	if err != nil {
		t.Fatal(err)
	}
	if n != int(end-start) {
		t.Errorf("advised %d bytes, want %d", n, end-start)
	}
	if got := present(t, start, end); got != 0 {
		t.Errorf("%d of %d pages still mapped after the call", got, (end-start)/page)
	}
	if !bytes.Equal(pages, want) {
		t.Error("the embedded bytes changed")
	}
}

// TestEmbeddedBytesRefusesHeap: bytes outside the executable would come
// back as zeros; they are refused and kept.
func TestEmbeddedBytesRefusesHeap(t *testing.T) {
	b := bytes.Repeat([]byte{'x'}, 4*os.Getpagesize())
	if _, err := EmbeddedBytes(pages, b); err == nil {
		t.Error("heap bytes accepted")
	}
	if !bytes.Equal(b, bytes.Repeat([]byte{'x'}, len(b))) {
		t.Error("heap bytes changed")
	}
}

// present counts the pages of [start, end) mapped in this process: bit
// 63 of their /proc/self/pagemap entries.
func present(t *testing.T, start, end uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skip("no /proc/self/pagemap")
	}
	defer f.Close()
	page := uintptr(os.Getpagesize())
	buf := make([]byte, 8*((end-start)/page))
	if _, err := f.ReadAt(buf, int64(start/page*8)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; i < len(buf); i += 8 {
		if binary.NativeEndian.Uint64(buf[i:])>>63 == 1 {
			n++
		}
	}
	return n
}
