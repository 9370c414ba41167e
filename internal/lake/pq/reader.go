package pq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// File is an open Parquet file. It is safe to read several Rows iterators of
// one File one after another, not concurrently.
type File struct {
	r    *file.Reader
	tree *readTree
	size int64
}

// Open reads the footer of the Parquet file of the given size behind r.
// Malformed input yields an error, never a panic.
func Open(r io.ReaderAt, size int64) (f *File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("pq: the file is not valid Parquet: %v", p)
		}
	}()
	fr, err := file.NewParquetReader(io.NewSectionReader(r, 0, size), file.WithReadProps(parquet.NewReaderProperties(pageBuffers)))
	if err != nil {
		return nil, fmt.Errorf("pq: the file is not valid Parquet: %w", err)
	}
	tree, err := buildReadTree(fr.MetaData().Schema)
	if err != nil {
		return nil, err
	}
	return &File{r: fr, tree: tree, size: size}, nil
}

// Schema returns the file's schema in model types.
func (f *File) Schema() *Schema { return f.tree.schema }

// NumRows returns the row count from the footer.
func (f *File) NumRows() int64 { return f.r.NumRows() }

// NumRowGroups returns the number of row groups.
func (f *File) NumRowGroups() int { return f.r.NumRowGroups() }

// Rows iterates over the whole file, projected onto the named top-level
// columns in the given order. A name absent from the file reads as null in
// every row (Delta schema evolution); file columns not named are not read.
// No names means every column of the file, in file order.
func (f *File) Rows(columns ...string) (*Rows, error) {
	if len(columns) == 0 {
		return f.RowsFor(nil)
	}
	want := &Schema{}
	for _, c := range columns {
		want.Fields = append(want.Fields, Field{Name: c, Nullable: true})
	}
	return f.RowsFor(want)
}

// RowsFor iterates over the file projected onto want: top-level fields are
// matched by name (exactly, else ignoring case), and so are the fields of
// nested structs (also inside lists and map values) when want gives a struct
// type. Fields absent from the file read as null. A nil field type means "as
// in the file". Leaf values are returned as the file stores them (see doc.go);
// want's leaf types are not used to convert.
func (f *File) RowsFor(want *Schema) (*Rows, error) {
	rr := &Rows{f: f, rg: -1}
	if want == nil {
		rr.fields = f.tree.fields
		rr.schema = f.tree.schema
	} else {
		rr.schema = &Schema{}
		for _, wf := range want.Fields {
			fn := findChild(f.tree.fields, wf.Name)
			if fn == nil {
				rr.fields = append(rr.fields, &node{name: wf.Name, missing: true, optional: true})
				rr.schema.Fields = append(rr.schema.Fields, Field{Name: wf.Name, Type: wf.Type, Nullable: true})
				continue
			}
			pn, err := project(fn, wf.Type, []string{wf.Name})
			if err != nil {
				return nil, err
			}
			rr.fields = append(rr.fields, pn)
			rr.schema.Fields = append(rr.schema.Fields, Field{Name: wf.Name, Type: pn.typ, Nullable: pn.optional})
		}
	}
	seen := map[int]bool{}
	for _, n := range rr.fields {
		for _, c := range n.leaves {
			if !seen[c] {
				seen[c] = true
				rr.cols = append(rr.cols, c)
			}
		}
	}
	rr.cur = make([]*cursor, len(f.tree.leaves))
	return rr, nil
}

func findChild(nodes []*node, name string) *node {
	for _, n := range nodes {
		if n.name == name {
			return n
		}
	}
	for _, n := range nodes {
		if strings.EqualFold(n.name, name) {
			return n
		}
	}
	return nil
}

// project narrows the file node fn to the requested type.
func project(fn *node, want *Type, path []string) (*node, error) {
	if want == nil {
		return fn, nil
	}
	mismatch := func() error {
		return fmt.Errorf("pq: column %s is %s in the file but %s was requested", strings.Join(path, "."), fn.typ, want)
	}
	switch want.Kind {
	case KindStruct:
		if fn.typ.Kind != KindStruct {
			return nil, mismatch()
		}
		nn := *fn
		nn.children, nn.leaves = nil, nil
		var fields []Field
		for _, wf := range want.Fields {
			c := findChild(fn.children, wf.Name)
			if c == nil {
				nn.children = append(nn.children, &node{name: wf.Name, missing: true, optional: true})
				fields = append(fields, Field{Name: wf.Name, Type: wf.Type, Nullable: true})
				continue
			}
			pc, err := project(c, wf.Type, appendPath(path, wf.Name))
			if err != nil {
				return nil, err
			}
			nn.children = append(nn.children, pc)
			nn.leaves = append(nn.leaves, pc.leaves...)
			fields = append(fields, Field{Name: wf.Name, Type: pc.typ, Nullable: pc.optional})
		}
		if len(nn.leaves) == 0 {
			// None of the requested fields exists in the file, but the
			// struct's own nulls must still be told apart: read one real
			// child and throw its values away.
			h := *fn.children[0]
			h.hidden = true
			nn.children = append(nn.children, &h)
			nn.leaves = append(nn.leaves, h.leaves...)
		}
		nn.typ = StructOf(fields...)
		return &nn, nil
	case KindList:
		if fn.typ.Kind != KindList {
			return nil, mismatch()
		}
		e, err := project(fn.children[0], want.Elem, appendPath(path, "element"))
		if err != nil {
			return nil, err
		}
		nn := *fn
		nn.children = []*node{e}
		nn.leaves = e.leaves
		nn.typ = ListOf(e.typ, e.optional)
		return &nn, nil
	case KindMap:
		if fn.typ.Kind != KindMap {
			return nil, mismatch()
		}
		v, err := project(fn.children[1], want.Value, appendPath(path, "value"))
		if err != nil {
			return nil, err
		}
		nn := *fn
		nn.children = []*node{fn.children[0], v}
		nn.leaves = append(append([]int(nil), fn.children[0].leaves...), v.leaves...)
		nn.typ = MapOf(fn.children[0].typ, v.typ, v.optional)
		return &nn, nil
	}
	if fn.leaf == nil {
		return nil, mismatch()
	}
	return fn, nil
}

// Rows is an iterator over the rows of a File.
type Rows struct {
	f      *File
	fields []*node
	schema *Schema
	cols   []int
	cur    []*cursor
	rg     int
	rgRows int64
	rgPos  int64
	err    error
}

// Schema returns the schema of the rows the iterator yields.
func (r *Rows) Schema() *Schema { return r.schema }

// errAbort carries a decoding error up through the recursive assembly.
type errAbort struct{ err error }

// Next returns up to limit rows (limit <= 0 means 1024). At the end of the
// file it returns no rows and io.EOF. Any other error is final.
func (r *Rows) Next(limit int) (rows []Row, err error) {
	if r.err != nil {
		return nil, r.err
	}
	if limit <= 0 {
		limit = 1024
	}
	defer func() {
		if p := recover(); p != nil {
			if a, ok := p.(errAbort); ok {
				err = a.err
			} else {
				err = fmt.Errorf("pq: the file is not valid Parquet: %v", p)
			}
			rows = nil
			r.err = err
		}
	}()
	for len(rows) < limit {
		if r.rgPos >= r.rgRows {
			if !r.nextRowGroup() {
				break
			}
			continue
		}
		row := make(Row, len(r.fields))
		for i, n := range r.fields {
			if n.missing {
				continue
			}
			row[i] = r.read(n)
		}
		r.rgPos++
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, io.EOF
	}
	return rows, nil
}

// ReadAll returns every remaining row.
func (r *Rows) ReadAll() ([]Row, error) {
	var all []Row
	for {
		rows, err := r.Next(4096)
		all = append(all, rows...)
		if errors.Is(err, io.EOF) {
			return all, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (r *Rows) nextRowGroup() bool {
	r.closeColumns()
	r.rg++
	if r.rg >= r.f.r.NumRowGroups() {
		return false
	}
	rgr := r.f.r.RowGroup(r.rg)
	r.rgRows, r.rgPos = rgr.NumRows(), 0
	if r.rgRows < 0 {
		panic(errAbort{fmt.Errorf("pq: row group %d has a negative row count; the file is malformed", r.rg)})
	}
	for _, c := range r.cols {
		cr, err := rgr.Column(c)
		if err != nil {
			panic(errAbort{fmt.Errorf("pq: cannot read column %s of row group %d: %w", strings.Join(r.f.tree.leaves[c].path, "."), r.rg, err)})
		}
		r.cur[c] = newCursor(r.f.tree.leaves[c], cr, r.rgRows)
	}
	return true
}

// closeColumns closes the column readers of the row group just read, so
// their page buffers go back to pageBuffers (every value read from them
// was copied: cursor.more).
func (r *Rows) closeColumns() {
	for _, c := range r.cols {
		if cur := r.cur[c]; cur != nil {
			if cl, ok := cur.cr.(io.Closer); ok {
				_ = cl.Close() // frees buffers; a page reader's Close reports nothing
			}
			r.cur[c] = nil
		}
	}
}

// read assembles the value of node n for the current entry of its leaves.
func (r *Rows) read(n *node) any {
	if n.leaf != nil {
		c := r.cur[n.col]
		c.ensure()
		if c.def() < n.def {
			c.advance()
			return nil
		}
		v := c.value()
		c.advance()
		return v
	}
	driver := r.cur[n.leaves[0]]
	driver.ensure()
	d := driver.def()
	if n.optional && d < n.def {
		r.skip(n)
		return nil
	}
	switch n.typ.Kind {
	case KindStruct:
		out := make([]any, 0, len(n.children))
		for _, c := range n.children {
			if c.missing {
				out = append(out, nil)
				continue
			}
			v := r.read(c)
			if !c.hidden {
				out = append(out, v)
			}
		}
		return out
	case KindList:
		if d < n.entryDef {
			r.skip(n)
			return []any{}
		}
		var out []any
		for {
			out = append(out, r.read(n.children[0]))
			if !driver.more() || driver.rep() != n.entryRep {
				return out
			}
		}
	case KindMap:
		if d < n.entryDef {
			r.skip(n)
			return []MapEntry{}
		}
		var out []MapEntry
		for {
			k := r.read(n.children[0])
			var v any
			if !n.children[1].missing {
				v = r.read(n.children[1])
			}
			out = append(out, MapEntry{Key: k, Value: v})
			if !driver.more() || driver.rep() != n.entryRep {
				return out
			}
		}
	}
	panic(errAbort{fmt.Errorf("pq: node %s has unexpected kind %v", n.name, n.typ.Kind)})
}

// skip consumes the single entry every leaf below n has for a null or empty n.
func (r *Rows) skip(n *node) {
	for _, c := range n.leaves {
		cur := r.cur[c]
		cur.ensure()
		cur.advance()
	}
}

const readBatch = 1024

// cursorBatch is how many levels a cursor reads at once: readBatch, or
// fewer for a column chunk of fewer rows (a flat column has one level per
// row), so that a small file's read does not clear and fill buffers of
// readBatch values per column. A repeated column may have more levels than
// rows: it reads them in several batches.
func cursorBatch(li *leafInfo, rows int64) int {
	if rows <= 0 || rows >= readBatch {
		return readBatch
	}
	if li.maxRep > 0 {
		return int(min(4*rows, readBatch))
	}
	return int(rows)
}

// cursor buffers the levels and values of one column chunk, one page at a time.
type cursor struct {
	li    *leafInfo
	cr    file.ColumnChunkReader // closed once its row group is read
	batch int                    // the levels read at once
	fill  func() (int64, int, error)
	conv  func(i int) any
	defs  []int16
	reps  []int16
	n     int
	pos   int
	vpos  int
	nvals int
	eof   bool
}

func abortf(format string, args ...any) {
	panic(errAbort{fmt.Errorf(format, args...)})
}

// ensure makes the current entry available or aborts: the caller knows from
// the row count that the entry must exist.
func (c *cursor) ensure() {
	if !c.more() {
		abortf("pq: column %s ended before the row group did; the file is truncated or malformed", strings.Join(c.li.path, "."))
	}
}

// more reports whether another entry exists in the column chunk.
func (c *cursor) more() bool {
	if c.pos < c.n {
		return true
	}
	if c.eof {
		return false
	}
	// All buffered values were converted (copied) already, so the page
	// buffers they aliased may now be reused by the next read.
	total, nv, err := c.fill()
	if err != nil {
		abortf("pq: cannot decode column %s: %v", strings.Join(c.li.path, "."), err)
	}
	if total == 0 {
		c.eof = true
		return false
	}
	if total > int64(c.batch) || nv > int(total) {
		abortf("pq: column %s returned inconsistent batch sizes; the file is malformed", strings.Join(c.li.path, "."))
	}
	c.n, c.pos, c.vpos, c.nvals = int(total), 0, 0, nv
	return true
}

func (c *cursor) def() int16 {
	if c.li.maxDef == 0 {
		return 0
	}
	d := c.defs[c.pos]
	if d < 0 || d > c.li.maxDef {
		abortf("pq: column %s has definition level %d above its maximum %d; the file is malformed", strings.Join(c.li.path, "."), d, c.li.maxDef)
	}
	return d
}

func (c *cursor) rep() int16 {
	if c.li.maxRep == 0 {
		return 0
	}
	return c.reps[c.pos]
}

func (c *cursor) advance() {
	if c.def() == c.li.maxDef {
		c.vpos++
	}
	c.pos++
}

func (c *cursor) value() any {
	if c.vpos >= c.nvals {
		abortf("pq: column %s has fewer values than its levels announce; the file is malformed", strings.Join(c.li.path, "."))
	}
	return c.conv(c.vpos)
}

func newCursor(li *leafInfo, cr file.ColumnChunkReader, rows int64) *cursor {
	readBatch := cursorBatch(li, rows)
	c := &cursor{li: li, cr: cr, batch: readBatch}
	if li.maxDef > 0 {
		c.defs = make([]int16, readBatch)
	}
	if li.maxRep > 0 {
		c.reps = make([]int16, readBatch)
	}
	path := strings.Join(li.path, ".")
	switch tr := cr.(type) {
	case *file.BooleanColumnChunkReader:
		vals := make([]bool, readBatch)
		c.fill = func() (int64, int, error) { return tr.ReadBatchInPage(int64(readBatch), vals, c.defs, c.reps) }
		c.conv = func(i int) any { return vals[i] }
	case *file.Int32ColumnChunkReader:
		vals := make([]int32, readBatch)
		c.fill = func() (int64, int, error) { return tr.ReadBatchInPage(int64(readBatch), vals, c.defs, c.reps) }
		c.conv = int32Conv(li, vals)
	case *file.Int64ColumnChunkReader:
		vals := make([]int64, readBatch)
		c.fill = func() (int64, int, error) { return tr.ReadBatchInPage(int64(readBatch), vals, c.defs, c.reps) }
		c.conv = int64Conv(li, vals)
	case *file.Int96ColumnChunkReader:
		vals := make([]parquet.Int96, readBatch)
		c.fill = func() (int64, int, error) { return tr.ReadBatchInPage(int64(readBatch), vals, c.defs, c.reps) }
		c.conv = func(i int) any { return int96ToTime(vals[i]) }
	case *file.Float32ColumnChunkReader:
		vals := make([]float32, readBatch)
		c.fill = func() (int64, int, error) { return tr.ReadBatchInPage(int64(readBatch), vals, c.defs, c.reps) }
		c.conv = func(i int) any { return vals[i] }
	case *file.Float64ColumnChunkReader:
		vals := make([]float64, readBatch)
		c.fill = func() (int64, int, error) { return tr.ReadBatchInPage(int64(readBatch), vals, c.defs, c.reps) }
		c.conv = func(i int) any { return vals[i] }
	case *file.ByteArrayColumnChunkReader:
		vals := make([]parquet.ByteArray, readBatch)
		c.fill = func() (int64, int, error) { return tr.ReadBatchInPage(int64(readBatch), vals, c.defs, c.reps) }
		c.conv = bytesConv(li, func(i int) []byte { return vals[i] })
	case *file.FixedLenByteArrayColumnChunkReader:
		vals := make([]parquet.FixedLenByteArray, readBatch)
		c.fill = func() (int64, int, error) { return tr.ReadBatchInPage(int64(readBatch), vals, c.defs, c.reps) }
		c.conv = bytesConv(li, func(i int) []byte { return vals[i] })
	default:
		abortf("pq: column %s has an unsupported reader %T", path, cr)
	}
	return c
}

func int32Conv(li *leafInfo, vals []int32) func(int) any {
	switch li.kind {
	case KindInt8:
		return func(i int) any { return int8(vals[i]) }
	case KindInt16:
		if li.unsigned {
			return func(i int) any { return int16(uint8(vals[i])) }
		}
		return func(i int) any { return int16(vals[i]) }
	case KindInt32:
		if li.unsigned {
			return func(i int) any { return int32(uint16(vals[i])) }
		}
		return func(i int) any { return vals[i] }
	case KindInt64:
		return func(i int) any { return int64(uint32(vals[i])) }
	case KindDate:
		return func(i int) any { return Date(vals[i]) }
	case KindDecimal:
		return func(i int) any { return Decimal{Unscaled: big.NewInt(int64(vals[i])), Scale: li.scale} }
	}
	return func(i int) any { return vals[i] }
}

func int64Conv(li *leafInfo, vals []int64) func(int) any {
	switch li.kind {
	case KindTimestamp, KindTimestampNTZ:
		switch li.unit {
		case unitMillis:
			return func(i int) any { return time.UnixMilli(vals[i]).UTC() }
		case unitNanos:
			return func(i int) any { return time.UnixMicro(floorDiv(vals[i], 1000)).UTC() }
		}
		return func(i int) any { return time.UnixMicro(vals[i]).UTC() }
	case KindDecimal:
		return func(i int) any { return Decimal{Unscaled: big.NewInt(vals[i]), Scale: li.scale} }
	}
	return func(i int) any { return vals[i] }
}

func bytesConv(li *leafInfo, get func(int) []byte) func(int) any {
	switch li.kind {
	case KindString:
		return func(i int) any { return string(get(i)) }
	case KindDecimal:
		return func(i int) any { return Decimal{Unscaled: fromTwosComplement(get(i)), Scale: li.scale} }
	}
	return func(i int) any { return append([]byte{}, get(i)...) }
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// julianEpoch is the Julian day number of 1970-01-01.
const julianEpoch = 2440588

// int96ToTime decodes Spark/Impala's INT96 timestamp (8 bytes little-endian
// nanoseconds of the day, then 4 bytes little-endian Julian day) into a UTC
// instant truncated to microseconds. Doing it here rather than through Arrow's
// nanosecond timestamps keeps years like 9999 representable.
func int96ToTime(v parquet.Int96) time.Time {
	nanos := int64(binary.LittleEndian.Uint64(v[0:8]))
	day := int64(binary.LittleEndian.Uint32(v[8:12]))
	us := (day-julianEpoch)*86_400_000_000 + floorDiv(nanos, 1000)
	return time.UnixMicro(us).UTC()
}

// appendPath returns path+name without sharing path's backing array.
func appendPath(path []string, name string) []string {
	return append(append(make([]string, 0, len(path)+1), path...), name)
}
