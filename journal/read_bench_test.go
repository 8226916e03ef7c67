package journal

import (
	"bytes"
	"io"

	"testing"

	"github.com/go-kit/log"
)

// pipeReader hands out at most 64 KiB per Read, as a pipe does.
type pipeReader struct{ r io.Reader }

func (p pipeReader) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), 64<<10)]) }

// BenchmarkReadLongEntry reads one 15 MiB entry as journalctl --all wrote
// it, between two short ones: what an entry that size costs the reader.
func BenchmarkReadLongEntry(b *testing.B) {
	var in bytes.Buffer
	in.WriteString(`{"__CURSOR":"s=1;i=1","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc","_UID":"0","MESSAGE":"short"}` + "\n")
	in.WriteString(`{"__CURSOR":"s=1;i=2","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc","_UID":"0","MESSAGE":"`)
	in.Write(bytes.Repeat([]byte("x"), 15<<20))
	in.WriteString(`"}` + "\n")
	in.WriteString(`{"__CURSOR":"s=1;i=3","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc","_UID":"0","MESSAGE":"short"}` + "\n")
	f, err := New(Options{Programs: []string{"krb5kdc"}, Coalesce: -1}, "bench", log.NewNopLogger(), nil, &Stats{}, func(*Entry) {})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(in.Len()))
	for i := 0; i < b.N; i++ {
		f.read(pipeReader{bytes.NewReader(in.Bytes())})
	}
}
