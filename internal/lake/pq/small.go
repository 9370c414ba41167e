package pq

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/klauspost/compress/s2"
)

// The small-file writer: a file that is one row group of at most
// smallFileRows rows (the lake writer's data files at many tenants) is
// written here, not through arrow-go's column writers. Each column chunk is
// one data page v1 with PLAIN values and RLE/bit-packed hybrid levels; page
// headers, column chunk metadata and the footer are encoded by thriftWriter.
// The output is byte-for-byte the file arrow-go writes for the same rows with
// the layout's small-file properties (TestSmallPathFileEqualsArrowPath), at
// a few allocations per file instead of ~875: arrow-go allocates encoders,
// statistics, a page writer and a 4 KiB thrift buffer per column chunk.

// Constants of arrow-go's writer that the small path reproduces.
const (
	smallMaxStatsSize = 4096 // parquet.DefaultMaxStatsSize: larger min/max are left out
	smallBatchSize    = 1024 // parquet.DefaultWriteBatchSize: more levels may split pages
	smallCreatedBy    = "oml (arrow-go parquet v18)"
)

// fastLayout is what the small path precomputes per Layout.
type fastLayout struct {
	schema []byte // the FileMetaData "schema" list, header included
	cols   []fastCol
	codec  int32 // thrift CompressionCodec
	zstd   compress.Codec
	level  int

	mu       sync.Mutex
	free     []*smallBuf // reused buffers; survive garbage collections, unlike a sync.Pool
	freeCols [][]*colBuf // column buffers of closed small-path writers
}

const keptFree = 16 // buffers kept per layout: more than the writers running at once

// getCols returns a closed writer's column buffers, emptied, or nil.
func (f *fastLayout) getCols() []*colBuf {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.freeCols)
	if n == 0 {
		return nil
	}
	c := f.freeCols[n-1]
	f.freeCols[n-1] = nil
	f.freeCols = f.freeCols[:n-1]
	return c
}

// putCols keeps the column buffers of a writer closed by the small path
// (at most smallBatchSize levels each, so their capacity stays small).
func (f *fastLayout) putCols(cols []*colBuf) {
	for _, cb := range cols {
		cb.st = colStats{}
	}
	f.mu.Lock()
	if len(f.freeCols) < keptFree {
		f.freeCols = append(f.freeCols, cols)
	}
	f.mu.Unlock()
}

type fastCol struct {
	phys   parquet.Type
	path   []string
	signed bool // SIGNED sort order: the deprecated min/max are written too
	stats  bool // footer statistics (off for binary columns)
	defW   int
	repW   int
}

// smallBuf holds the reused buffers of one file being written.
type smallBuf struct {
	out, page, comp, stat []byte
	meta                  []byte   // the column chunks' metadata, for the footer
	chunks                [][2]int // each column chunk's metadata in meta
	tw                    thriftWriter
	rle                   rleEncoder
}

const maxKeptBuf = 4 << 20 // buffers above this are dropped, not kept

func (f *fastLayout) get() *smallBuf {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.free); n > 0 {
		b := f.free[n-1]
		f.free = f.free[:n-1]
		return b
	}
	return &smallBuf{}
}

func (f *fastLayout) put(b *smallBuf) {
	if cap(b.out) > maxKeptBuf || cap(b.page) > maxKeptBuf || cap(b.comp) > maxKeptBuf {
		return
	}
	f.mu.Lock()
	if len(f.free) < keptFree {
		f.free = append(f.free, b)
	}
	f.mu.Unlock()
}

// newFastLayout returns nil when the schema holds something the small path
// does not encode (the arrow-go path then writes every file).
func newFastLayout(tree *writeTree, opts Options) *fastLayout {
	f := &fastLayout{}
	switch opts.Compression {
	case Snappy:
		f.codec = 1
	case Zstd:
		f.codec = 6
		c, err := compress.GetCodec(compress.Codecs.Zstd)
		if err != nil {
			return nil
		}
		f.zstd, f.level = c, opts.ZstdLevel
	case Uncompressed:
		f.codec = 0
	default:
		return nil
	}
	psch := pqschema.NewSchema(tree.root)
	for i, n := range tree.leaves {
		c := psch.Column(i)
		f.cols = append(f.cols, fastCol{
			phys: n.leaf.phys, path: c.ColumnPath(), signed: c.SortOrder() == pqschema.SortSIGNED,
			stats: n.leaf.kind != KindBinary,
			defW:  bitLen(n.leaf.maxDef), repW: bitLen(n.leaf.maxRep),
		})
	}
	t := thriftWriter{last: 1} // follows FileMetaData.version
	t.list(2, tStruct, countNodes(tree.root))
	if !schemaElements(&t, tree.root, true) {
		return nil
	}
	f.schema = t.b
	return f
}

func bitLen(v int16) int {
	n := 0
	for v > 0 {
		n++
		v >>= 1
	}
	return n
}

func countNodes(n pqschema.Node) int {
	g, ok := n.(*pqschema.GroupNode)
	if !ok {
		return 1
	}
	c := 1
	for i := 0; i < g.NumFields(); i++ {
		c += countNodes(g.Field(i))
	}
	return c
}

// schemaElements writes n and its descendants as SchemaElements, as
// arrow-go's schema.ToThrift does.
func schemaElements(t *thriftWriter, n pqschema.Node, root bool) bool {
	t.elem()
	g, group := n.(*pqschema.GroupNode)
	var p *pqschema.PrimitiveNode
	if !group {
		p = n.(*pqschema.PrimitiveNode)
		t.i32(1, int32(p.PhysicalType()))
		if p.PhysicalType() == parquet.Types.FixedLenByteArray {
			t.i32(2, int32(p.TypeLength()))
		}
	}
	if !root {
		t.i32(3, int32(n.RepetitionType()))
	}
	t.str(4, n.Name())
	if group {
		t.i32(5, int32(g.NumFields()))
	}
	if ct := n.ConvertedType(); ct != pqschema.ConvertedTypes.None {
		t.i32(6, int32(ct))
	}
	if p != nil {
		if dm := p.DecimalMetadata(); dm.IsSet {
			t.i32(7, dm.Scale)
			t.i32(8, dm.Precision)
		}
	}
	if n.FieldID() >= 0 {
		t.i32(9, n.FieldID())
	}
	if lt := n.LogicalType(); lt != nil && lt.IsSerialized() {
		t.begin(10)
		switch l := lt.(type) {
		case pqschema.StringLogicalType:
			t.begin(1)
			t.end()
		case pqschema.MapLogicalType:
			t.begin(2)
			t.end()
		case pqschema.ListLogicalType:
			t.begin(3)
			t.end()
		case pqschema.DecimalLogicalType:
			t.begin(5)
			t.i32(1, l.Scale())
			t.i32(2, l.Precision())
			t.end()
		case pqschema.DateLogicalType:
			t.begin(6)
			t.end()
		case pqschema.TimestampLogicalType:
			t.begin(8)
			t.boolean(1, l.IsAdjustedToUTC())
			t.begin(2)
			switch l.TimeUnit() {
			case pqschema.TimeUnitMillis:
				t.begin(1)
			case pqschema.TimeUnitMicros:
				t.begin(2)
			default:
				t.begin(3)
			}
			t.end()
			t.end()
			t.end()
		case pqschema.IntLogicalType:
			t.begin(10)
			t.i8(1, int8(l.BitWidth()))
			t.boolean(2, l.IsSigned())
			t.end()
		default:
			return false
		}
		t.end()
	}
	t.end()
	if group {
		for i := 0; i < g.NumFields(); i++ {
			if !schemaElements(t, g.Field(i), false) {
				return false
			}
		}
	}
	return true
}

// smallFits reports whether the buffered row group can go through the small
// path: every column's levels fit one of arrow-go's write batches, so
// arrow-go too would have written one data page per column chunk.
func (w *Writer) smallFits() bool {
	if w.layout.fast == nil || w.fw != nil || w.rgRows > smallFileRows {
		return false
	}
	for _, cb := range w.cols {
		n := cb.valLen()
		if cb.li.maxDef > 0 {
			n = len(cb.defs)
		}
		if n > smallBatchSize {
			return false
		}
	}
	return true
}

// closeSmall writes the whole file (one row group, or none for zero rows)
// with one Write to the sink.
func (w *Writer) closeSmall() (FileMeta, error) {
	f := w.layout.fast
	b := f.get()
	defer f.put(b)
	b.out = append(b.out[:0], parquetMagic...)
	b.chunks = b.chunks[:0]
	b.meta = b.meta[:0]
	var totalUncompressed, totalCompressed int64
	if w.rgRows > 0 {
		for i, cb := range w.cols {
			u, c := w.smallChunk(b, &f.cols[i], cb)
			totalUncompressed += u
			totalCompressed += c
		}
	}
	meta := FileMeta{NumRows: w.rows, Columns: make([]ColumnStats, 0, len(w.cols))}
	for _, cb := range w.cols {
		meta.Columns = append(meta.Columns, cb.stats())
		cb.clearValues()
		cb.releaseChunks()
	}

	t := &b.tw
	t.b, t.last, t.stack = b.out, 0, t.stack[:0]
	footer := len(t.b)
	t.i32(1, 2)
	t.b = append(t.b, f.schema...)
	t.last = 2
	t.i64(3, w.rows)
	if w.rgRows > 0 {
		t.list(4, tStruct, 1)
		t.elem()
		t.list(1, tStruct, len(b.chunks))
		for _, c := range b.chunks {
			t.b = append(t.b, b.meta[c[0]:c[1]]...)
		}
		t.i64(2, totalUncompressed)
		t.i64(3, w.rgRows)
		t.i64(5, int64(len(parquetMagic)))
		t.i64(6, totalCompressed)
		t.field(7, 4) // i16 ordinal 0
		t.b = append(t.b, 0)
		t.end()
	} else {
		t.list(4, tStruct, 0)
	}
	t.str(6, smallCreatedBy)
	t.list(7, tStruct, len(f.cols))
	for range f.cols {
		t.elem()
		t.begin(1)
		t.end()
		t.end()
	}
	t.b = append(t.b, 0)
	t.b = binary.LittleEndian.AppendUint32(t.b, uint32(len(t.b)-footer))
	t.b = append(t.b, parquetMagic...)
	b.out = t.b
	w.rgRows, w.rgBytes = 0, 0
	f.putCols(w.cols)
	w.cols = nil
	if _, err := w.sink.Write(b.out); err != nil {
		return FileMeta{}, fmt.Errorf("pq: cannot write the Parquet file: %w", err)
	}
	meta.Size = w.sink.n
	return meta, nil
}

// smallChunk appends one column chunk (page header, page, column chunk
// metadata) to b.out and returns its uncompressed and compressed sizes.
func (w *Writer) smallChunk(b *smallBuf, fc *fastCol, cb *colBuf) (int64, int64) {
	cb.accumulate()
	li := cb.li
	// The page: repetition levels, definition levels (each a 4-byte length
	// and the RLE/bit-packed hybrid run), PLAIN values.
	page := b.page[:0]
	nLevels := cb.valLen()
	if li.maxRep > 0 {
		page = appendLevels(&b.rle, page, cb.reps, fc.repW)
		nLevels = len(cb.reps)
	}
	if li.maxDef > 0 {
		page = appendLevels(&b.rle, page, cb.defs, fc.defW)
		nLevels = len(cb.defs)
	}
	page = cb.appendPlain(page)
	b.page = page

	data := page
	switch w.layout.fast.codec {
	case 1:
		b.comp = s2.EncodeSnappy(b.comp[:cap(b.comp)], page)
		data = b.comp
	case 6:
		b.comp = w.layout.fast.zstd.EncodeLevel(b.comp[:cap(b.comp)], page, w.layout.fast.level)
		data = b.comp
	}

	// Statistics, encoded as arrow-go does (see statsOf).
	b.stat = b.stat[:0]
	var st encStats
	if fc.stats {
		st, b.stat = cb.encStats(b.stat)
		st.nullCount = int64(nLevels - cb.valLen())
		st.has = true
	}

	t := &b.tw
	t.b, t.last, t.stack = b.out, 0, t.stack[:0]
	start := len(t.b)
	t.i32(1, 0) // DATA_PAGE
	t.i32(2, int32(len(page)))
	t.i32(3, int32(len(data)))
	t.begin(5)
	t.i32(1, int32(nLevels))
	t.i32(2, 0) // PLAIN
	t.i32(3, 3) // RLE
	t.i32(4, 3)
	t.begin(5)
	st.write(t, b.stat, fc.signed)
	t.end()
	t.end()
	t.b = append(t.b, 0)
	header := int64(len(t.b) - start)
	t.b = append(t.b, data...)
	uncompressed := header + int64(len(page))
	compressed := header + int64(len(data))

	b.out = t.b

	// ColumnChunk, for the footer.
	t.b, t.last = b.meta, 0
	cstart := len(t.b)
	t.i64(2, int64(start))
	t.begin(3)
	t.i32(1, int32(fc.phys))
	t.list(2, tI32, 2)
	t.listI32(0) // PLAIN
	t.listI32(3) // RLE
	t.list(3, tBinary, len(fc.path))
	for _, p := range fc.path {
		t.listStr(p)
	}
	t.i32(4, w.layout.fast.codec)
	t.i64(5, int64(nLevels))
	t.i64(6, uncompressed)
	t.i64(7, compressed)
	t.i64(9, int64(start))
	if fc.stats {
		t.begin(12)
		st.write(t, b.stat, fc.signed)
		t.end()
	}
	t.list(13, tStruct, 1)
	t.elem()
	t.i32(1, 0) // DATA_PAGE
	t.i32(2, 0) // PLAIN
	t.i32(3, 1)
	t.end()
	t.end()
	t.b = append(t.b, 0)
	b.chunks = append(b.chunks, [2]int{cstart, len(t.b)})
	b.meta = t.b
	return uncompressed, compressed
}

func appendLevels(r *rleEncoder, page []byte, levels []int16, width int) []byte {
	at := len(page)
	page = append(page, 0, 0, 0, 0)
	r.reset(page, width)
	r.putLevels(levels)
	page = r.finish()
	binary.LittleEndian.PutUint32(page[at:], uint32(len(page)-at-4))
	return page
}

// appendPlain appends the column's values PLAIN-encoded.
func (cb *colBuf) appendPlain(p []byte) []byte {
	switch cb.li.phys {
	case parquet.Types.Boolean:
		var acc byte
		for i, v := range cb.bools {
			if v {
				acc |= 1 << (i % 8)
			}
			if i%8 == 7 {
				p = append(p, acc)
				acc = 0
			}
		}
		if len(cb.bools)%8 != 0 {
			p = append(p, acc)
		}
	case parquet.Types.Int32:
		for _, v := range cb.i32 {
			p = binary.LittleEndian.AppendUint32(p, uint32(v))
		}
	case parquet.Types.Int64:
		for _, v := range cb.i64 {
			p = binary.LittleEndian.AppendUint64(p, uint64(v))
		}
	case parquet.Types.Float:
		for _, v := range cb.f32 {
			p = binary.LittleEndian.AppendUint32(p, math.Float32bits(v))
		}
	case parquet.Types.Double:
		for _, v := range cb.f64 {
			p = binary.LittleEndian.AppendUint64(p, math.Float64bits(v))
		}
	case parquet.Types.ByteArray:
		for _, v := range cb.ba {
			p = binary.LittleEndian.AppendUint32(p, uint32(len(v)))
			p = append(p, v...)
		}
	default:
		for _, v := range cb.flba {
			p = append(p, v...)
		}
	}
	return p
}

// encStats are a column chunk's statistics as arrow-go encodes them: min and
// max PLAIN-encoded (byte arrays without their length) into a shared buffer.
type encStats struct {
	has          bool
	hasMinMax    bool
	minLo, minHi int // min is buf[minLo:minHi]
	maxLo, maxHi int
	nullCount    int64
}

func (s encStats) write(t *thriftWriter, buf []byte, signed bool) {
	if !s.has {
		return
	}
	// ApplyStatSizeLimits: an extreme longer than 4096 bytes is dropped.
	hasMax := s.hasMinMax && s.maxHi-s.maxLo <= smallMaxStatsSize
	hasMin := s.hasMinMax && s.minHi-s.minLo <= smallMaxStatsSize
	if signed && hasMax {
		t.binary(1, buf[s.maxLo:s.maxHi])
	}
	if signed && hasMin {
		t.binary(2, buf[s.minLo:s.minHi])
	}
	t.i64(3, s.nullCount)
	if hasMax {
		t.binary(5, buf[s.maxLo:s.maxHi])
	}
	if hasMin {
		t.binary(6, buf[s.minLo:s.minHi])
	}
}

// encStats computes min and max with arrow-go's rules (its statistics
// types): signed or unsigned per sort order, NaN left out of float extremes,
// a zero minimum written as -0 and a zero maximum as +0, no extremes when no
// value is left.
func (cb *colBuf) encStats(buf []byte) (encStats, []byte) {
	var s encStats
	put := func(lo, hi []byte) {
		s.hasMinMax = true
		s.minLo = len(buf)
		buf = append(buf, lo...)
		s.minHi = len(buf)
		s.maxLo = len(buf)
		buf = append(buf, hi...)
		s.maxHi = len(buf)
	}
	var a, z [8]byte
	switch cb.li.phys {
	case parquet.Types.Boolean:
		if len(cb.bools) == 0 {
			break
		}
		lo, hi := true, false
		for _, v := range cb.bools {
			lo = lo && v
			hi = hi || v
		}
		put([]byte{b2u(lo)}, []byte{b2u(hi)})
	case parquet.Types.Int32:
		if lo, hi, ok := intExtremes(cb.i32); ok {
			binary.LittleEndian.PutUint32(a[:], uint32(lo))
			binary.LittleEndian.PutUint32(z[:], uint32(hi))
			put(a[:4], z[:4])
		}
	case parquet.Types.Int64:
		if lo, hi, ok := intExtremes(cb.i64); ok {
			binary.LittleEndian.PutUint64(a[:], uint64(lo))
			binary.LittleEndian.PutUint64(z[:], uint64(hi))
			put(a[:], z[:])
		}
	case parquet.Types.Float:
		if lo, hi, ok := floatExtremes(cb.f32); ok {
			binary.LittleEndian.PutUint32(a[:], math.Float32bits(lo))
			binary.LittleEndian.PutUint32(z[:], math.Float32bits(hi))
			put(a[:4], z[:4])
		}
	case parquet.Types.Double:
		if lo, hi, ok := floatExtremes(cb.f64); ok {
			binary.LittleEndian.PutUint64(a[:], math.Float64bits(lo))
			binary.LittleEndian.PutUint64(z[:], math.Float64bits(hi))
			put(a[:], z[:])
		}
	case parquet.Types.ByteArray:
		if lo, hi, ok := bytesExtremes(cb.ba); ok {
			put(lo, hi)
		}
	default:
		if len(cb.flba) == 0 {
			break
		}
		lo, hi := cb.flba[0], cb.flba[0]
		for _, v := range cb.flba[1:] {
			if cmpTwos(v, lo) < 0 {
				lo = v
			}
			if cmpTwos(hi, v) < 0 {
				hi = v
			}
		}
		put(lo, hi)
	}
	return s, buf
}

func b2u(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// floatExtremes are a float column's footer min and max as arrow-go writes
// them: NaN left out (no extremes when every value is NaN), a zero minimum
// written as -0 and a zero maximum as +0, so a reader pruning on them never
// drops a row holding the other zero.
func floatExtremes[F float32 | float64](vs []F) (lo, hi F, ok bool) {
	lo, hi = F(math.Inf(1)), F(math.Inf(-1))
	for _, v := range vs {
		if v != v {
			continue
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(vs) == 0 || lo > hi {
		return 0, 0, false
	}
	if lo == 0 {
		lo = F(math.Copysign(0, -1))
	}
	if hi == 0 {
		hi = 0
	}
	return lo, hi, true
}

// intExtremes are an integer column's min and max (none when it is empty).
func intExtremes[I int32 | int64](vs []I) (lo, hi I, ok bool) {
	if len(vs) == 0 {
		return 0, 0, false
	}
	lo, hi = vs[0], vs[0]
	for _, v := range vs[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi, true
}
