package pq

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
)

// Compression names a page compression codec.
type Compression uint8

// The codecs oml writes. Snappy is the default because every engine reads it
// and it is the cheapest on CPU; Zstd gives smaller files (Delta's newest
// protocol text recommends it) at a higher CPU cost.
const (
	Snappy Compression = iota
	Zstd
	Uncompressed
)

// String returns the codec name.
func (c Compression) String() string {
	switch c {
	case Snappy:
		return "snappy"
	case Zstd:
		return "zstd"
	case Uncompressed:
		return "uncompressed"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// Options tune a Writer. The zero value is valid: snappy, 64 MiB row groups.
type Options struct {
	Compression Compression
	// ZstdLevel is the zstd level; 0 means 1 (klauspost's "fastest"). On the
	// bronze benchmark level 1 cost half the CPU of level 3 for a file 1.2%
	// larger (docs/parquet.md).
	ZstdLevel int
	// RowGroupBytes flushes a row group once this many bytes of raw
	// (uncompressed, plain-encoded) values were written into it. Memory held by
	// the writer is bounded by roughly this, compressed. Default 64 MiB.
	RowGroupBytes int64
	// RowGroupRows flushes a row group after this many rows. Default 1,048,576.
	RowGroupRows int64
	// PageBytes is the target data page size. Default 1 MiB.
	PageBytes int64
}

const (
	defaultRowGroupBytes = 64 << 20
	defaultRowGroupRows  = 1 << 20
	defaultPageBytes     = 1 << 20
	// arenaChunk is the allocation unit for copies of []byte values.
	arenaChunk = 1 << 20
	// firstChunk is the size of a column's first arena chunk in a row
	// group: most of the lake writer's files hold a few rows, and a 1 MiB
	// chunk per binary column of every file being written was live heap
	// that made the garbage collector run more often (a 64 KiB first
	// chunk took 4.6 MiB off a 20,000-tenant drain's peak live heap;
	// docs/lake-writer.md, "The 20,000-tenant regression").
	firstChunk = 64 << 10
)

// ColumnStats are exact statistics of one leaf column of a written file.
// Min and Max hold Go values of the column's kind (see doc.go) and are nil when
// the column holds no non-null value (NaN is ignored for float/double, as the
// Parquet spec asks). Strings and binaries are the true, untruncated extremes.
type ColumnStats struct {
	// Path is the field names from the top level down; list elements add
	// "element", map entries add "key" or "value".
	Path []string
	Kind Kind
	// Repeated is true for leaves below a list or map: their statistics are over
	// all elements, and NullCount counts null or absent elements, not rows.
	Repeated  bool
	NullCount int64
	Min, Max  any
}

// FileMeta describes a file the Writer produced.
type FileMeta struct {
	NumRows int64
	// Size is the exact number of bytes written to the io.Writer.
	Size    int64
	Columns []ColumnStats
}

// Column returns the statistics of the leaf with the given path, or nil.
func (m *FileMeta) Column(path ...string) *ColumnStats {
	for i := range m.Columns {
		if equalPath(m.Columns[i].Path, path) {
			return &m.Columns[i]
		}
	}
	return nil
}

func equalPath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Writer writes rows of one schema to one Parquet file. It is not safe for
// concurrent use.
type Writer struct {
	layout  *Layout
	schema  *Schema
	tree    *writeTree
	opts    Options
	sink    *countingWriter
	fw      *file.Writer // started by the first row group (startFile)
	cols    []*colBuf
	rgBytes int64
	rgRows  int64
	rows    int64
	marks   []colMark // per column, buffer lengths before the current row
	err     error
	closed  bool
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Layout is a schema prepared for writing with given options: the Dremel
// tree, the Parquet schema and the writer properties of every column. It is
// read-only once built and safe to share between goroutines: a caller that
// writes many files of one schema (a Delta table's data files) builds it once
// and starts each file with Layout.NewWriter, instead of repeating that
// preparation per file (it was a sixth of the lake writer's data-file CPU at
// a few rows per file).
type Layout struct {
	schema *Schema
	tree   *writeTree
	opts   Options
	// props is for files of more than smallFileRows rows; small for the
	// rest: no dictionaries (see startFile).
	props, small *parquet.WriterProperties
	// fast writes files of one row group of at most smallFileRows rows
	// (small.go); nil if the schema is not one it encodes.
	fast *fastLayout
}

// smallFileRows: a file whose only row group holds at most this many rows is
// written without dictionaries. A dictionary saves bytes only when values
// repeat many times; at a few rows it costs an encoder, a hash table and a
// dictionary page per column, then falls back to plain for unique values
// (the lake writer's files at many tenants hold a few rows each).
const smallFileRows = 64

// NewLayout prepares s for writing with opts (see Options for the defaults).
func NewLayout(s *Schema, opts Options) (*Layout, error) {
	tree, err := buildWriteTree(s)
	if err != nil {
		return nil, err
	}
	if opts.RowGroupBytes <= 0 {
		opts.RowGroupBytes = defaultRowGroupBytes
	}
	if opts.RowGroupRows <= 0 {
		opts.RowGroupRows = defaultRowGroupRows
	}
	if opts.PageBytes <= 0 {
		opts.PageBytes = defaultPageBytes
	}
	props := []parquet.WriterProperty{
		parquet.WithDataPageSize(opts.PageBytes),
		parquet.WithDictionaryPageSizeLimit(opts.PageBytes),
		parquet.WithDataPageVersion(parquet.DataPageV1),
		parquet.WithVersion(parquet.V2_6),
		parquet.WithMaxRowGroupLength(math.MaxInt64),
		parquet.WithCreatedBy("oml (arrow-go parquet v18)"),
	}
	switch opts.Compression {
	case Snappy:
		props = append(props, parquet.WithCompression(compress.Codecs.Snappy))
	case Zstd:
		if opts.ZstdLevel <= 0 {
			opts.ZstdLevel = 1
		}
		props = append(props, parquet.WithCompression(compress.Codecs.Zstd), parquet.WithCompressionLevel(opts.ZstdLevel))
	case Uncompressed:
		props = append(props, parquet.WithCompression(compress.Codecs.Uncompressed))
	default:
		return nil, fmt.Errorf("pq: unknown compression %v; use pq.Snappy, pq.Zstd or pq.Uncompressed", opts.Compression)
	}
	small := append([]parquet.WriterProperty{parquet.WithDictionaryDefault(false)}, props...)
	psch := pqschema.NewSchema(tree.root)
	for i, n := range tree.leaves {
		path := psch.Column(i).ColumnPath()
		// Random bytes (hashes, signatures, ciphertext) never repeat: a
		// dictionary only costs CPU before the writer falls back to plain.
		if n.leaf.kind == KindBinary {
			// Footer min/max of random bytes prune nothing and cost a
			// comparison per value plus up to 8 KiB of footer per row group.
			props = append(props, parquet.WithDictionaryPath(path, false), parquet.WithStatsPath(path, false))
			small = append(small, parquet.WithStatsPath(path, false))
		} else {
			// Columns of unique values (sequence numbers, timestamps,
			// payloads) drop the dictionary at the first page instead of
			// hashing every value into a dictionary that never pays off.
			props = append(props, parquet.WithDictionaryCostFallbackPath(path, true))
		}
	}
	return &Layout{schema: s, tree: tree, opts: opts,
		props: parquet.NewWriterProperties(props...), small: parquet.NewWriterProperties(small...),
		fast: newFastLayout(tree, opts)}, nil
}

// Schema returns the schema the layout was built for.
func (l *Layout) Schema() *Schema { return l.schema }

// NewWriter starts a Parquet file on w. Nothing is buffered outside the current
// row group; Close writes the footer. w is not closed.
func NewWriter(w io.Writer, s *Schema, opts Options) (*Writer, error) {
	l, err := NewLayout(s, opts)
	if err != nil {
		return nil, err
	}
	return l.NewWriter(w)
}

// NewWriter starts a Parquet file of the layout's schema on w, like the
// package's NewWriter. The file's first bytes reach w with its first row
// group (or at Close).
func (l *Layout) NewWriter(w io.Writer) (*Writer, error) {
	wr := &Writer{layout: l, schema: l.schema, tree: l.tree, opts: l.opts, sink: &countingWriter{w: w}}
	if l.fast != nil {
		if wr.cols = l.fast.getCols(); wr.cols != nil {
			return wr, nil
		}
	}
	wr.cols = make([]*colBuf, 0, len(l.tree.leaves))
	for _, n := range l.tree.leaves {
		cb, err := newColBuf(n)
		if err != nil {
			return nil, err
		}
		wr.cols = append(wr.cols, cb)
	}
	return wr, nil
}

// startFile starts the Parquet file on the sink before the first row group
// is written: a file that is one row group of at most smallFileRows rows
// gets no dictionaries (Layout.small).
func (w *Writer) startFile(last bool) error {
	props := w.layout.props
	if last && w.rgRows <= smallFileRows {
		props = w.layout.small
	}
	fw, err := file.NewParquetWriterWithError(w.sink, w.tree.root, file.WithWriterProps(props))
	if err != nil {
		return fmt.Errorf("pq: cannot start the Parquet file: %w", err)
	}
	w.fw = fw
	return nil
}

// Schema returns the schema the writer was created with.
func (w *Writer) Schema() *Schema { return w.schema }

// NumRows returns the number of rows accepted so far.
func (w *Writer) NumRows() int64 { return w.rows }

// WrittenBytes returns the bytes of the file so far (its header and closed
// row groups; the header reaches the io.Writer with the first row group);
// together with BufferedBytes it lets a caller roll files by size.
func (w *Writer) WrittenBytes() int64 {
	if w.fw == nil {
		return int64(len(parquetMagic))
	}
	return w.sink.n
}

// parquetMagic opens and ends every Parquet file.
const parquetMagic = "PAR1"

// BufferedBytes returns the raw (uncompressed) size of the values held for the
// row group not yet written.
func (w *Writer) BufferedBytes() int64 { return w.rgBytes }

// RowError reports a row that does not fit the schema. The writer dropped
// that row (and did not look at the rows after it in the same call) and stays
// usable: Write(rows[Index+1:]) carries on without it.
type RowError struct {
	Index int // position of the row in the Write call
	Err   error
}

func (e *RowError) Error() string { return fmt.Sprintf("%v (row %d of the batch)", e.Err, e.Index) }

func (e *RowError) Unwrap() error { return e.Err }

// Write appends rows. Each row holds one value per schema field, in order (see
// doc.go for the Go types). A row that does not fit the schema returns a
// *RowError and is dropped whole; the rows before it are kept. Any other error
// (the io.Writer failed) is final: the file must be abandoned.
func (w *Writer) Write(rows []Row) (err error) {
	if w.closed {
		return errors.New("pq: write after Close")
	}
	if w.err != nil {
		return w.err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pq: the Parquet writer failed: %v", r)
		}
		var re *RowError
		if err != nil && !errors.As(err, &re) {
			w.err = err
		}
	}()
	if len(w.marks) != len(w.cols) {
		w.marks = make([]colMark, len(w.cols))
	}
	for ri, row := range rows {
		if len(row) != len(w.tree.fields) {
			return &RowError{Index: ri, Err: fmt.Errorf("pq: the row has %d values but the schema has %d columns", len(row), len(w.tree.fields))}
		}
		for c, cb := range w.cols {
			w.marks[c] = cb.mark()
		}
		bytesBefore := w.rgBytes
		for i, n := range w.tree.fields {
			if err := w.shred(n, row[i], 0, 0); err != nil {
				for c, cb := range w.cols {
					cb.rollback(w.marks[c])
				}
				w.rgBytes = bytesBefore
				return &RowError{Index: ri, Err: err}
			}
		}
		w.rows++
		w.rgRows++
		if w.rgRows >= w.opts.RowGroupRows || w.rgBytes >= w.opts.RowGroupBytes {
			if err := w.flushRowGroup(false); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushRowGroup writes the shredded row group, one column after the other.
//
// Why not arrow-go's BufferedRowGroupWriter, which takes every column at
// once and would let us hand values over in small batches: it accumulates
// each column chunk's compressed pages in a growing in-memory buffer and then
// copies them to the sink; the reallocation and copying were ~35% of the
// write CPU for the silver schema. Serial row groups stream pages straight to
// the sink, at the price of holding one row group of raw values (bounded by
// Options.RowGroupBytes), which the buffered writer held compressed.
func (w *Writer) flushRowGroup(last bool) error {
	if w.fw == nil {
		if err := w.startFile(last); err != nil {
			return err
		}
	}
	if w.rgRows == 0 {
		return nil
	}
	rg, err := w.fw.AppendRowGroupChecked()
	if err != nil {
		return fmt.Errorf("pq: cannot start a row group: %w", err)
	}
	for _, cb := range w.cols {
		cw, err := rg.NextColumn()
		if err != nil {
			return fmt.Errorf("pq: column %s: %w", strings.Join(cb.li.path, "."), err)
		}
		if err := cb.writeTo(cw); err != nil {
			return fmt.Errorf("pq: column %s: %w", strings.Join(cb.li.path, "."), err)
		}
	}
	if err := rg.Close(); err != nil {
		return fmt.Errorf("pq: cannot write a row group: %w", err)
	}
	for _, cb := range w.cols {
		cb.releaseChunks()
	}
	w.rgRows, w.rgBytes = 0, 0
	return nil
}

// Close flushes the last row group and writes the footer. It returns what was
// written; the caller closes the underlying io.Writer.
func (w *Writer) Close() (meta FileMeta, err error) {
	if w.closed {
		return FileMeta{}, errors.New("pq: Close called twice")
	}
	w.closed = true
	if w.err != nil {
		return FileMeta{}, w.err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pq: the Parquet writer failed: %v", r)
		}
	}()
	if w.smallFits() {
		return w.closeSmall()
	}
	if err := w.flushRowGroup(true); err != nil {
		return FileMeta{}, err
	}
	if err := w.fw.Close(); err != nil {
		return FileMeta{}, fmt.Errorf("pq: cannot finish the Parquet file: %w", err)
	}
	meta = FileMeta{NumRows: w.rows, Size: w.sink.n}
	for _, cb := range w.cols {
		meta.Columns = append(meta.Columns, cb.stats())
	}
	return meta, nil
}

// shred appends the Dremel entries of value v of node n to the leaf buffers.
// def is the definition level reached by n's parent, rep the repetition level
// of the first entry.
func (w *Writer) shred(n *node, v any, def, rep int16) error {
	if v == nil {
		if !n.optional {
			return fmt.Errorf("pq: column %s is not nullable but a row holds null there", w.pathOf(n))
		}
		for _, c := range n.leaves {
			w.cols[c].null(def, rep)
		}
		w.rgBytes += int64(len(n.leaves)) * 2
		return nil
	}
	switch n.typ.Kind {
	case KindStruct:
		fields, ok := v.([]any)
		if !ok {
			return fmt.Errorf("pq: column %s is a struct and needs a []any value, got %T", w.pathOf(n), v)
		}
		if len(fields) != len(n.children) {
			return fmt.Errorf("pq: struct %s has %d fields but the value has %d", w.pathOf(n), len(n.children), len(fields))
		}
		for i, c := range n.children {
			if err := w.shred(c, fields[i], n.def, rep); err != nil {
				return err
			}
		}
		return nil
	case KindList:
		var elems []any
		switch l := v.(type) {
		case []any:
			elems = l
		case []string:
			elems = make([]any, len(l))
			for i, s := range l {
				elems[i] = s
			}
		default:
			return fmt.Errorf("pq: column %s is a list and needs a []any value, got %T", w.pathOf(n), v)
		}
		if len(elems) == 0 {
			for _, c := range n.leaves {
				w.cols[c].null(n.def, rep)
			}
			return nil
		}
		for i, e := range elems {
			r := rep
			if i > 0 {
				r = n.entryRep
			}
			if err := w.shred(n.children[0], e, n.entryDef, r); err != nil {
				return err
			}
		}
		return nil
	case KindMap:
		var entries []MapEntry
		switch m := v.(type) {
		case []MapEntry:
			entries = m
		case map[string]string:
			entries = StringMap(m)
		default:
			return fmt.Errorf("pq: column %s is a map and needs a []pq.MapEntry value, got %T", w.pathOf(n), v)
		}
		if len(entries) == 0 {
			for _, c := range n.leaves {
				w.cols[c].null(n.def, rep)
			}
			return nil
		}
		for i, e := range entries {
			r := rep
			if i > 0 {
				r = n.entryRep
			}
			if e.Key == nil {
				return fmt.Errorf("pq: map %s has a null key; map keys cannot be null", w.pathOf(n))
			}
			if err := w.shred(n.children[0], e.Key, n.entryDef, r); err != nil {
				return err
			}
			if err := w.shred(n.children[1], e.Value, n.entryDef, r); err != nil {
				return err
			}
		}
		return nil
	}
	cb := w.cols[n.col]
	sz, err := cb.put(v)
	if err != nil {
		return fmt.Errorf("pq: column %s: %w", strings.Join(cb.li.path, "."), err)
	}
	cb.level(n.def, rep)
	w.rgBytes += sz + 2
	return nil
}

func (w *Writer) pathOf(n *node) string {
	if len(n.leaves) > 0 {
		p := w.cols[n.leaves[0]].li.path
		// the node's own path is a prefix of its first leaf's path
		depth := 0
		for i, s := range p {
			if s == n.name {
				depth = i + 1
			}
		}
		if depth > 0 {
			return strings.Join(p[:depth], ".")
		}
	}
	return n.name
}

// colBuf holds the shredded values of one leaf column between flushes, and the
// column's running statistics.
type colBuf struct {
	li   *leafInfo
	defs []int16
	reps []int16

	bools []bool
	i32   []int32
	i64   []int64
	f32   []float32
	f64   []float64
	ba    []parquet.ByteArray
	flba  []parquet.FixedLenByteArray

	put func(v any) (int64, error)
	st  colStats

	arena  []byte    // current chunk for copies of []byte values
	chunks []*[]byte // arena chunks of the current row group, pooled after it is written
}

// chunkPool recycles arena chunks across row groups and writers: copying
// 2 KiB ciphertext bodies into fresh memory for every file made the garbage
// collector a large part of silver write CPU.
var chunkPool = sync.Pool{New: func() any {
	b := make([]byte, 0, arenaChunk)
	return &b
}}

// firstChunkPool recycles the firstChunk-sized chunks.
var firstChunkPool = sync.Pool{New: func() any {
	b := make([]byte, 0, firstChunk)
	return &b
}}

// releaseChunks returns the row group's arena chunks to the pool. Only call it
// once the row group is closed: arrow-go has then copied every value into its
// pages (and its statistics and dictionaries own their copies).
func (cb *colBuf) releaseChunks() {
	for _, c := range cb.chunks {
		*c = (*c)[:0]
		if cap(*c) == firstChunk {
			firstChunkPool.Put(c)
		} else {
			chunkPool.Put(c)
		}
	}
	clear(cb.chunks)
	cb.chunks = cb.chunks[:0]
	cb.arena = nil
}

var emptyBytes = make([]byte, 0, 1)

func (cb *colBuf) copyBytes(b []byte) []byte {
	if len(b) == 0 {
		return emptyBytes
	}
	if len(b) > arenaChunk/4 {
		return append(make([]byte, 0, len(b)), b...)
	}
	if cap(cb.arena)-len(cb.arena) < len(b) {
		pool := &chunkPool
		if len(cb.chunks) == 0 && len(b) <= firstChunk/4 {
			pool = &firstChunkPool
		}
		c := pool.Get().(*[]byte)
		cb.chunks = append(cb.chunks, c)
		cb.arena = (*c)[:0]
	}
	n := len(cb.arena)
	cb.arena = append(cb.arena, b...)
	return cb.arena[n:len(cb.arena):len(cb.arena)]
}

type colStats struct {
	nulls      int64
	has        bool
	minI, maxI int64
	minF, maxF float64
	minS, maxS string
	minD, maxD *big.Int
}

func (cb *colBuf) null(def, rep int16) {
	cb.level(def, rep)
}

func (cb *colBuf) level(def, rep int16) {
	if cb.li.maxDef > 0 {
		cb.defs = append(cb.defs, def)
	}
	if cb.li.maxRep > 0 {
		cb.reps = append(cb.reps, rep)
	}
}

func (cb *colBuf) writeTo(cw file.ColumnChunkWriter) error {
	cb.accumulate()
	var err error
	defs, reps := cb.defs, cb.reps
	if cb.li.maxDef == 0 {
		defs = nil
	}
	if cb.li.maxRep == 0 {
		reps = nil
	}
	switch c := cw.(type) {
	case *file.BooleanColumnChunkWriter:
		_, err = c.WriteBatch(cb.bools, defs, reps)
	case *file.Int32ColumnChunkWriter:
		_, err = c.WriteBatch(cb.i32, defs, reps)
	case *file.Int64ColumnChunkWriter:
		_, err = c.WriteBatch(cb.i64, defs, reps)
	case *file.Float32ColumnChunkWriter:
		_, err = c.WriteBatch(cb.f32, defs, reps)
	case *file.Float64ColumnChunkWriter:
		_, err = c.WriteBatch(cb.f64, defs, reps)
	case *file.ByteArrayColumnChunkWriter:
		_, err = c.WriteBatch(cb.ba, defs, reps)
	case *file.FixedLenByteArrayColumnChunkWriter:
		_, err = c.WriteBatch(cb.flba, defs, reps)
	default:
		err = fmt.Errorf("unexpected column writer %T", cw)
	}
	cb.clearValues()
	return err
}

// clearValues empties the buffers once the row group is written.
func (cb *colBuf) clearValues() {
	cb.defs, cb.reps = cb.defs[:0], cb.reps[:0]
	cb.bools, cb.i32, cb.i64, cb.f32, cb.f64 = cb.bools[:0], cb.i32[:0], cb.i64[:0], cb.f32[:0], cb.f64[:0]
	clear(cb.ba) // drop references to the caller's strings and byte slices
	clear(cb.flba)
	cb.ba, cb.flba = cb.ba[:0], cb.flba[:0]
}

func newColBuf(n *node) (*colBuf, error) {
	cb := &colBuf{li: n.leaf}
	li := n.leaf
	switch li.kind {
	case KindBoolean:
		cb.put = func(v any) (int64, error) {
			b, ok := v.(bool)
			if !ok {
				return 0, typeErr(li, v)
			}
			cb.bools = append(cb.bools, b)
			return 1, nil
		}
	case KindInt8, KindInt16, KindInt32, KindInt64:
		lo, hi := intRange(li.kind)
		cb.put = func(v any) (int64, error) {
			x, ok := toInt64(v)
			if !ok {
				return 0, typeErr(li, v)
			}
			if x < lo || x > hi {
				return 0, fmt.Errorf("value %d does not fit in a %s", x, li.kind)
			}
			if li.kind == KindInt64 {
				cb.i64 = append(cb.i64, x)
				return 8, nil
			}
			cb.i32 = append(cb.i32, int32(x))
			return 4, nil
		}
	case KindFloat:
		cb.put = func(v any) (int64, error) {
			x, ok := v.(float32)
			if !ok {
				return 0, typeErr(li, v)
			}
			cb.f32 = append(cb.f32, x)
			return 4, nil
		}
	case KindDouble:
		cb.put = func(v any) (int64, error) {
			x, ok := v.(float64)
			if !ok {
				return 0, typeErr(li, v)
			}
			cb.f64 = append(cb.f64, x)
			return 8, nil
		}
	case KindString:
		cb.put = func(v any) (int64, error) {
			s, ok := v.(string)
			if !ok {
				return 0, typeErr(li, v)
			}
			// The column writer only reads the bytes, so alias the string
			// instead of copying it.
			if len(s) == 0 {
				// arrow-go treats a nil ByteArray as "no value" in its
				// statistics; an empty string must be a non-nil empty slice.
				cb.ba = append(cb.ba, emptyBytes)
			} else {
				cb.ba = append(cb.ba, unsafe.Slice(unsafe.StringData(s), len(s)))
			}
			return int64(len(s)) + 4, nil
		}
	case KindBinary:
		cb.put = func(v any) (int64, error) {
			b, ok := v.([]byte)
			if !ok {
				return 0, typeErr(li, v)
			}
			// Copy: the values outlive this call until the row group is
			// written, and the caller may reuse its buffers.
			cb.ba = append(cb.ba, cb.copyBytes(b))
			return int64(len(b)) + 4, nil
		}
	case KindDate:
		cb.put = func(v any) (int64, error) {
			var d Date
			switch x := v.(type) {
			case Date:
				d = x
			case time.Time:
				d = DateFromTime(x)
			default:
				return 0, typeErr(li, v)
			}
			cb.i32 = append(cb.i32, int32(d))
			return 4, nil
		}
	case KindTimestamp, KindTimestampNTZ:
		ntz := li.kind == KindTimestampNTZ
		cb.put = func(v any) (int64, error) {
			t, ok := v.(time.Time)
			if !ok {
				return 0, typeErr(li, v)
			}
			if ntz {
				// The wall clock is the value; the location is not.
				t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
			}
			us := t.UnixMicro()
			cb.i64 = append(cb.i64, us)
			return 8, nil
		}
	case KindDecimal:
		prec, scale := n.typ.Precision, n.typ.Scale
		limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(prec)), nil)
		cb.put = func(v any) (int64, error) {
			var d Decimal
			switch x := v.(type) {
			case Decimal:
				d = x
			case string:
				var err error
				if d, err = ParseDecimal(x, scale); err != nil {
					return 0, err
				}
			default:
				return 0, typeErr(li, v)
			}
			u, err := rescale(d, scale)
			if err != nil {
				return 0, err
			}
			if new(big.Int).Abs(u).Cmp(limit) >= 0 {
				return 0, fmt.Errorf("decimal %s does not fit in decimal(%d,%d)", d, prec, scale)
			}
			switch li.phys {
			case parquet.Types.Int32:
				cb.i32 = append(cb.i32, int32(u.Int64()))
				return 4, nil
			case parquet.Types.Int64:
				cb.i64 = append(cb.i64, u.Int64())
				return 8, nil
			}
			b := twosComplement(u, li.flbaLen)
			cb.flba = append(cb.flba, b)
			return int64(len(b)), nil
		}
	default:
		return nil, fmt.Errorf("pq: column %s has unsupported kind %v", strings.Join(li.path, "."), li.kind)
	}
	return cb, nil
}

func (cb *colBuf) stats() ColumnStats {
	li := cb.li
	cs := ColumnStats{Path: li.path, Kind: li.kind, Repeated: li.repeated, NullCount: cb.st.nulls}
	st := &cb.st
	if !st.has {
		return cs
	}
	switch li.kind {
	case KindBoolean:
		cs.Min, cs.Max = st.minI == 1, st.maxI == 1
	case KindInt8:
		cs.Min, cs.Max = int8(st.minI), int8(st.maxI)
	case KindInt16:
		cs.Min, cs.Max = int16(st.minI), int16(st.maxI)
	case KindInt32:
		cs.Min, cs.Max = int32(st.minI), int32(st.maxI)
	case KindInt64:
		cs.Min, cs.Max = st.minI, st.maxI
	case KindFloat:
		cs.Min, cs.Max = float32(st.minF), float32(st.maxF)
	case KindDouble:
		cs.Min, cs.Max = st.minF, st.maxF
	case KindString:
		// Clone: the extremes may alias a caller's larger string.
		cs.Min, cs.Max = strings.Clone(st.minS), strings.Clone(st.maxS)
	case KindBinary:
		cs.Min, cs.Max = []byte(st.minS), []byte(st.maxS)
	case KindDate:
		cs.Min, cs.Max = Date(st.minI), Date(st.maxI)
	case KindTimestamp, KindTimestampNTZ:
		cs.Min, cs.Max = time.UnixMicro(st.minI).UTC(), time.UnixMicro(st.maxI).UTC()
	case KindDecimal:
		cs.Min = Decimal{Unscaled: new(big.Int).Set(st.minD), Scale: li.scale}
		cs.Max = Decimal{Unscaled: new(big.Int).Set(st.maxD), Scale: li.scale}
	}
	return cs
}

func typeErr(li *leafInfo, v any) error {
	want := map[Kind]string{
		KindBoolean: "bool", KindInt8: "an integer", KindInt16: "an integer", KindInt32: "an integer",
		KindInt64: "an integer", KindFloat: "float32", KindDouble: "float64", KindString: "string",
		KindBinary: "[]byte", KindDate: "pq.Date or time.Time", KindTimestamp: "time.Time",
		KindTimestampNTZ: "time.Time", KindDecimal: "pq.Decimal or a decimal string",
	}[li.kind]
	return fmt.Errorf("a %s column needs %s, got %T", li.kind, want, v)
}

func intRange(k Kind) (int64, int64) {
	switch k {
	case KindInt8:
		return math.MinInt8, math.MaxInt8
	case KindInt16:
		return math.MinInt16, math.MaxInt16
	case KindInt32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

var bigTen = big.NewInt(10)

// rescale returns d's unscaled value at the given scale, refusing to drop digits.
func rescale(d Decimal, scale int) (*big.Int, error) {
	if d.Unscaled == nil {
		return nil, errors.New("decimal has a nil unscaled value")
	}
	if d.Scale == scale {
		return d.Unscaled, nil
	}
	if d.Scale < scale {
		f := new(big.Int).Exp(bigTen, big.NewInt(int64(scale-d.Scale)), nil)
		return f.Mul(f, d.Unscaled), nil
	}
	f := new(big.Int).Exp(bigTen, big.NewInt(int64(d.Scale-scale)), nil)
	q, r := new(big.Int).QuoRem(d.Unscaled, f, new(big.Int))
	if r.Sign() != 0 {
		return nil, fmt.Errorf("decimal %s has more than %d fractional digits", d, scale)
	}
	return q, nil
}

// twosComplement encodes u as a big-endian two's-complement number of n bytes.
func twosComplement(u *big.Int, n int) []byte {
	out := make([]byte, n)
	if u.Sign() >= 0 {
		u.FillBytes(out)
		return out
	}
	// -x = ^(x-1)
	m := new(big.Int).Neg(u)
	m.Sub(m, big.NewInt(1))
	m.FillBytes(out)
	for i := range out {
		out[i] = ^out[i]
	}
	return out
}

// fromTwosComplement decodes a big-endian two's-complement number.
func fromTwosComplement(b []byte) *big.Int {
	u := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return u
}

// colMark is a colBuf's buffer lengths before a row, for dropping a row that
// failed half-way through shredding.
type colMark struct{ defs, reps, vals int }

func (cb *colBuf) valLen() int {
	switch cb.li.phys {
	case parquet.Types.Boolean:
		return len(cb.bools)
	case parquet.Types.Int32:
		return len(cb.i32)
	case parquet.Types.Int64:
		return len(cb.i64)
	case parquet.Types.Float:
		return len(cb.f32)
	case parquet.Types.Double:
		return len(cb.f64)
	case parquet.Types.ByteArray:
		return len(cb.ba)
	}
	return len(cb.flba)
}

func (cb *colBuf) mark() colMark { return colMark{len(cb.defs), len(cb.reps), cb.valLen()} }

func (cb *colBuf) rollback(m colMark) {
	cb.defs, cb.reps = cb.defs[:m.defs], cb.reps[:m.reps]
	switch cb.li.phys {
	case parquet.Types.Boolean:
		cb.bools = cb.bools[:m.vals]
	case parquet.Types.Int32:
		cb.i32 = cb.i32[:m.vals]
	case parquet.Types.Int64:
		cb.i64 = cb.i64[:m.vals]
	case parquet.Types.Float:
		cb.f32 = cb.f32[:m.vals]
	case parquet.Types.Double:
		cb.f64 = cb.f64[:m.vals]
	case parquet.Types.ByteArray:
		clear(cb.ba[m.vals:])
		cb.ba = cb.ba[:m.vals]
	default:
		cb.flba = cb.flba[:m.vals]
	}
}

// accumulate folds the buffered row group into the column statistics. Doing
// it here, in one typed loop per column, rather than value by value while
// shredding keeps a rejected row out of the statistics without undo logic.
func (cb *colBuf) accumulate() {
	st, li := &cb.st, cb.li
	if li.maxDef > 0 {
		for _, d := range cb.defs {
			if d < li.maxDef {
				st.nulls++
			}
		}
	}
	ints := func(lo, hi int64, n int) {
		if n == 0 {
			return
		}
		if !st.has || lo < st.minI {
			st.minI = lo
		}
		if !st.has || hi > st.maxI {
			st.maxI = hi
		}
		st.has = true
	}
	switch li.kind {
	case KindBoolean:
		sawTrue, sawFalse := false, false
		for _, b := range cb.bools {
			if b {
				sawTrue = true
			} else {
				sawFalse = true
			}
		}
		lo, hi := int64(1), int64(0)
		if sawFalse {
			lo = 0
		}
		if sawTrue {
			hi = 1
		}
		if !sawTrue {
			hi = 0
		}
		if !sawFalse {
			lo = 1
		}
		ints(lo, hi, len(cb.bools))
	case KindInt8, KindInt16, KindInt32, KindDate:
		if len(cb.i32) > 0 {
			lo, hi := cb.i32[0], cb.i32[0]
			for _, x := range cb.i32 {
				lo, hi = min(lo, x), max(hi, x)
			}
			ints(int64(lo), int64(hi), len(cb.i32))
		}
	case KindInt64, KindTimestamp, KindTimestampNTZ:
		if len(cb.i64) > 0 {
			lo, hi := cb.i64[0], cb.i64[0]
			for _, x := range cb.i64 {
				lo, hi = min(lo, x), max(hi, x)
			}
			ints(lo, hi, len(cb.i64))
		}
	case KindFloat, KindDouble:
		vals := cb.f64
		if li.kind == KindFloat {
			vals = make([]float64, len(cb.f32))
			for i, x := range cb.f32 {
				vals[i] = float64(x)
			}
		}
		for _, x := range vals {
			if math.IsNaN(x) {
				continue // the Parquet spec keeps NaN out of min/max
			}
			if !st.has || x < st.minF {
				st.minF = x
			}
			if !st.has || x > st.maxF {
				st.maxF = x
			}
			st.has = true
		}
	case KindString, KindBinary:
		lo, hi, ok := bytesExtremes(cb.ba)
		if !ok {
			return
		}
		// A string column's bytes are the caller's immutable strings, which
		// the extremes may alias (stats clones them); a binary column's are
		// in a pooled arena and are copied.
		str := func(b []byte) string {
			if li.kind == KindString {
				return unsafe.String(unsafe.SliceData(b), len(b))
			}
			return string(b)
		}
		if !st.has || string(lo) < st.minS {
			st.minS = str(lo)
		}
		if !st.has || string(hi) > st.maxS {
			st.maxS = str(hi)
		}
		st.has = true
	case KindDecimal:
		var lo, hi *big.Int
		switch li.phys {
		case parquet.Types.Int32:
			if len(cb.i32) > 0 {
				a, b := cb.i32[0], cb.i32[0]
				for _, x := range cb.i32 {
					a, b = min(a, x), max(b, x)
				}
				lo, hi = big.NewInt(int64(a)), big.NewInt(int64(b))
			}
		case parquet.Types.Int64:
			if len(cb.i64) > 0 {
				a, b := cb.i64[0], cb.i64[0]
				for _, x := range cb.i64 {
					a, b = min(a, x), max(b, x)
				}
				lo, hi = big.NewInt(a), big.NewInt(b)
			}
		default:
			if len(cb.flba) > 0 {
				a, b := cb.flba[0], cb.flba[0]
				for _, x := range cb.flba {
					if cmpTwos(x, a) < 0 {
						a = x
					}
					if cmpTwos(x, b) > 0 {
						b = x
					}
				}
				lo, hi = fromTwosComplement(a), fromTwosComplement(b)
			}
		}
		if lo == nil {
			return
		}
		if !st.has || lo.Cmp(st.minD) < 0 {
			st.minD = lo
		}
		if !st.has || hi.Cmp(st.maxD) > 0 {
			st.maxD = hi
		}
		st.has = true
	}
}

// cmpTwos compares two big-endian two's-complement numbers of equal width.
func cmpTwos(a, b []byte) int {
	if len(a) > 0 && len(b) > 0 && (a[0]^b[0])&0x80 != 0 {
		// Different signs: the negative one (top bit set) is smaller.
		if a[0]&0x80 != 0 {
			return -1
		}
		return 1
	}
	return bytes.Compare(a, b)
}

// bytesExtremes are the byte-wise smallest and largest of vs (none when it
// is empty), aliasing vs: the footer statistics of a string or binary
// column.
func bytesExtremes[B ~[]byte](vs []B) (lo, hi B, ok bool) {
	if len(vs) == 0 {
		return nil, nil, false
	}
	lo, hi = vs[0], vs[0]
	for _, v := range vs[1:] {
		if bytes.Compare(v, lo) < 0 {
			lo = v
		} else if bytes.Compare(v, hi) > 0 {
			hi = v
		}
	}
	return lo, hi, true
}
