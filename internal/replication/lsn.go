package replication

import (
	"fmt"
	"strconv"
	"strings"
)

// LSN is a WAL position in bytes (pg_lsn).
type LSN uint64

// String renders the LSN as PostgreSQL does: high/low 32 bits in hex.
func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint64(l)&0xFFFFFFFF) }

// MarshalText makes an LSN a JSON string in PostgreSQL's form.
func (l LSN) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// ParseLSN reads PostgreSQL's "X/Y" form.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("%q is not a WAL position (want X/Y in hex)", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%q is not a WAL position (want X/Y in hex)", s)
	}
	return LSN(h<<32 | l), nil
}

// WAL page header sizes on 64-bit builds (MAXALIGNed XLogPageHeaderData and
// XLogLongPageHeaderData).
const (
	shortPageHeader = 24
	longPageHeader  = 40
)

// InsertCover turns pg_current_wal_insert_lsn() into the position a standby
// will actually report once it has every record inserted so far.
//
// The insert position is the next free byte; when the last record ended
// exactly at a page boundary, PostgreSQL reports that byte as the first one
// after the next page's header (boundary + 24, or + 40 at a segment start),
// a position no flush reaches until more WAL is written. On an idle primary
// that would make a writer wait for ever on a standby that already has
// everything. No byte of the new page is in use then, so the boundary itself
// covers every inserted record.
func InsertCover(insert LSN, blockSize, segmentSize uint64) LSN {
	if segmentSize > 0 && uint64(insert)%segmentSize == longPageHeader {
		return insert - longPageHeader
	}
	if blockSize > 0 && uint64(insert)%blockSize == shortPageHeader {
		return insert - shortPageHeader
	}
	return insert
}
