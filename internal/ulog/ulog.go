// Package ulog reads the header of an MIT krb5 incremental propagation
// (iprop) update log: the file named by iprop_logfile that kadmind keeps
// on a primary KDC and kpropd on a replica. The header is MIT's
// kdb_hlog_t (src/include/kdb_log.h), a fixed struct written in the host's
// byte order; reading its 40 bytes is all a scrape needs, where kproplog
// would map and walk the whole log.
package ulog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// HeaderMagic is KDB_ULOG_HDR_MAGIC, the first four bytes of every log.
const HeaderMagic = 0x06662323

// HeaderSize is sizeof(kdb_hlog_t) with the natural alignment of every
// Linux ABI MIT supports: the uint16 version is padded to four bytes.
const HeaderSize = 40

// State is the header's kdb_state.
type State uint16

// The states of kdb_log.h (KDB_STABLE...).
const (
	StateStable   State = 1
	StateUnstable State = 2
	StateCorrupt  State = 3
)

func (s State) String() string {
	switch s {
	case StateStable:
		return "stable"
	case StateUnstable:
		return "unstable"
	case StateCorrupt:
		return "corrupt"
	}
	return "unknown"
}

// Header is kdb_hlog_t. Times are the primary's clock when the update was
// made (a replica copies them with the entries).
type Header struct {
	Magic       uint32
	Version     uint16 // db_version_num, KDB_VERSION (1)
	Entries     uint32 // kdb_num: updates held in the log
	FirstTime   time.Time
	LastTime    time.Time
	FirstSerial uint32
	LastSerial  uint32
	State       State
	BlockSize   uint16 // kdb_block: bytes per entry slot
}

// Errors that say why a file is not a usable update log; ReadFile wraps
// them (with errors.Is) next to the file system's own errors.
var (
	ErrShort    = errors.New("shorter than an update log header")
	ErrBadMagic = errors.New("not an update log (bad header magic)")
)

// ErrNotRegular is returned for a path that is not a regular file.
var ErrNotRegular = safefile.ErrNotRegular

// ReadFile reads the header of the update log at path. It opens without
// blocking, so that a FIFO or device put in the log's place cannot hang a
// scrape.
func ReadFile(path string) (Header, error) {
	f, _, err := safefile.Open(path, 0)
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	var b [HeaderSize]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return Header{}, fmt.Errorf("%s: %w", path, ErrShort)
		}
		return Header{}, err
	}
	h, err := Parse(b[:])
	if err != nil {
		return Header{}, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// Parse decodes a header. The log is written in the writer's byte order;
// the magic tells which, so a log copied from a big-endian host reads too.
func Parse(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	var bo binary.ByteOrder = binary.LittleEndian
	switch {
	case binary.LittleEndian.Uint32(b) == HeaderMagic:
	case binary.BigEndian.Uint32(b) == HeaderMagic:
		bo = binary.BigEndian
	default:
		return Header{}, ErrBadMagic
	}
	t := func(off int) time.Time {
		s, us := bo.Uint32(b[off:]), bo.Uint32(b[off+4:])
		if s == 0 && us == 0 {
			return time.Time{}
		}
		return time.Unix(int64(s), int64(us)*1000)
	}
	return Header{
		Magic:       HeaderMagic,
		Version:     bo.Uint16(b[4:]),
		Entries:     bo.Uint32(b[8:]),
		FirstTime:   t(12),
		LastTime:    t(20),
		FirstSerial: bo.Uint32(b[28:]),
		LastSerial:  bo.Uint32(b[32:]),
		State:       State(bo.Uint16(b[36:])),
		BlockSize:   bo.Uint16(b[38:]),
	}, nil
}
