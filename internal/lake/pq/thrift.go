package pq

// A Thrift compact-protocol encoder for the few Parquet structures the
// small-file writer (small.go) emits: PageHeader, ColumnChunk and
// FileMetaData. It appends to a byte slice and allocates nothing itself.
// Fields must be written in increasing id order within a struct, which is
// also the order arrow-go's generated code writes them in, so the bytes are
// the same as arrow-go's for the same values.

// Compact-protocol type codes.
const (
	tBoolTrue  = 1
	tBoolFalse = 2
	tByte      = 3
	tI32       = 5
	tI64       = 6
	tBinary    = 8
	tList      = 9
	tStruct    = 12
)

type thriftWriter struct {
	b     []byte
	last  int16   // the last field id written in the current struct
	stack []int16 // the enclosing structs' last field ids
}

func (t *thriftWriter) uvarint(v uint64) {
	for v >= 0x80 {
		t.b = append(t.b, byte(v)|0x80)
		v >>= 7
	}
	t.b = append(t.b, byte(v))
}

func (t *thriftWriter) field(id int16, typ byte) {
	if d := id - t.last; d > 0 && d <= 15 {
		t.b = append(t.b, byte(d)<<4|typ)
	} else {
		t.b = append(t.b, typ)
		t.uvarint(uint64(uint16((id << 1) ^ (id >> 15))))
	}
	t.last = id
}

func zigzag32(v int32) uint64 { return uint64(uint32((v << 1) ^ (v >> 31))) }
func zigzag64(v int64) uint64 { return uint64((v << 1) ^ (v >> 63)) }

func (t *thriftWriter) i32(id int16, v int32) { t.field(id, tI32); t.uvarint(zigzag32(v)) }
func (t *thriftWriter) i64(id int16, v int64) { t.field(id, tI64); t.uvarint(zigzag64(v)) }
func (t *thriftWriter) i8(id int16, v int8)   { t.field(id, tByte); t.b = append(t.b, byte(v)) }

func (t *thriftWriter) boolean(id int16, v bool) {
	if v {
		t.field(id, tBoolTrue)
	} else {
		t.field(id, tBoolFalse)
	}
}

func (t *thriftWriter) binary(id int16, v []byte) {
	t.field(id, tBinary)
	t.uvarint(uint64(len(v)))
	t.b = append(t.b, v...)
}

func (t *thriftWriter) str(id int16, v string) {
	t.field(id, tBinary)
	t.uvarint(uint64(len(v)))
	t.b = append(t.b, v...)
}

// begin opens a struct field; end closes it (or a list element opened with
// elem).
func (t *thriftWriter) begin(id int16) {
	t.field(id, tStruct)
	t.elem()
}

// elem opens a struct that is a list element.
func (t *thriftWriter) elem() {
	t.stack = append(t.stack, t.last)
	t.last = 0
}

func (t *thriftWriter) end() {
	t.b = append(t.b, 0)
	t.last = t.stack[len(t.stack)-1]
	t.stack = t.stack[:len(t.stack)-1]
}

// list writes a list field's header; the n elements follow.
func (t *thriftWriter) list(id int16, elemType byte, n int) {
	t.field(id, tList)
	if n < 15 {
		t.b = append(t.b, byte(n)<<4|elemType)
	} else {
		t.b = append(t.b, 0xF0|elemType)
		t.uvarint(uint64(n))
	}
}

// listI32 writes one i32 list element.
func (t *thriftWriter) listI32(v int32) { t.uvarint(zigzag32(v)) }

// listStr writes one string list element.
func (t *thriftWriter) listStr(v string) {
	t.uvarint(uint64(len(v)))
	t.b = append(t.b, v...)
}
