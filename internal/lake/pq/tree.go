package pq

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/parquet"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
)

// node is one field of the Dremel tree, shared by the writer (shredding rows
// into leaf columns) and the reader (assembling rows from leaf columns).
//
// Levels: a value of this node is present (non-null) in an entry of any leaf
// below it iff that entry's definition level is >= def. For lists and maps the
// repeated group sits one level deeper: an entry with definition level >=
// entryDef is an element (or key/value pair), and entryRep is the repetition
// level that marks "another element of the same list".
type node struct {
	name     string
	typ      *Type
	optional bool
	def      int16
	entryDef int16 // list/map only
	entryRep int16 // list/map only

	children []*node // struct: fields; list: [elem]; map: [key, value]
	leaves   []int   // column indexes of the leaves below (or at) this node, in order

	// leaf only
	col  int
	leaf *leafInfo

	// reader projection only: a struct child that is read to locate the
	// struct's nulls but not returned, and a child that is absent in the file.
	hidden  bool
	missing bool
}

// leafInfo is what a leaf column needs to convert between Go values and
// Parquet physical values.
type leafInfo struct {
	path     []string // model path: field names, "element", "key", "value"
	phys     parquet.Type
	kind     Kind
	scale    int    // decimals
	unit     tsUnit // int64 timestamps read from foreign files
	unsigned bool   // UINT_* annotations in foreign files
	flbaLen  int    // fixed_len_byte_array width
	maxDef   int16  // max definition level of the column
	maxRep   int16  // max repetition level of the column
	repeated bool   // below a list or map
}

type tsUnit uint8

const (
	unitMicros tsUnit = iota
	unitMillis
	unitNanos
)

// level is where a node sits in the tree, as both builders pass it down:
// its parent's definition and repetition levels, the path of names to it,
// whether it or an ancestor repeats, and (reader side) whether it is a
// 2-level list's element, whose own REPEATED repetition the caller already
// accounted for.
type level struct {
	def, rep int16
	path     []string
	repeated bool
	element  bool
}

// topLevel is the level of a schema's columns.
var topLevel = level{}

// entries is the level of the entries (a list's element, a map's key and
// value) of a node at definition level def and path path below l.
func (l level) entries(def int16, path []string) level {
	return level{def: def + 1, rep: l.rep + 1, path: path, repeated: true}
}

// fields is the level of the fields of a struct at definition level def
// and path path below l.
func (l level) fields(def int16, path []string) level {
	return level{def: def, rep: l.rep, path: path, repeated: l.repeated}
}

// ---------------------------------------------------------------------------
// Writer side: model schema -> Parquet schema + node tree.

type writeTree struct {
	root   *pqschema.GroupNode
	fields []*node
	leaves []*node
}

func buildWriteTree(s *Schema) (*writeTree, error) {
	if s == nil || len(s.Fields) == 0 {
		return nil, fmt.Errorf("pq: the schema has no fields; give at least one column")
	}
	t := &writeTree{}
	var pfields pqschema.FieldList
	seen := map[string]bool{}
	for _, f := range s.Fields {
		if seen[f.Name] {
			return nil, fmt.Errorf("pq: the schema has two columns named %q; column names must be unique", f.Name)
		}
		seen[f.Name] = true
		pn, n, err := t.build(f, topLevel)
		if err != nil {
			return nil, err
		}
		pfields = append(pfields, pn)
		t.fields = append(t.fields, n)
	}
	root, err := pqschema.NewGroupNode("schema", parquet.Repetitions.Required, pfields, -1)
	if err != nil {
		return nil, fmt.Errorf("pq: cannot build the Parquet schema: %w", err)
	}
	t.root = root
	return t, nil
}

func (t *writeTree) build(f Field, at level) (pqschema.Node, *node, error) {
	name, typ, path := f.Name, f.Type, at.path
	if name == "" {
		return nil, nil, fmt.Errorf("pq: a field at %q has an empty name", strings.Join(path, "."))
	}
	if typ == nil {
		return nil, nil, fmt.Errorf("pq: field %q has no type", strings.Join(append(path, name), "."))
	}
	path = append(append([]string(nil), path...), name)
	rep := parquet.Repetitions.Required
	def := at.def
	if f.Nullable {
		rep = parquet.Repetitions.Optional
		def++
	}
	n := &node{name: name, typ: typ, optional: f.Nullable, def: def}
	switch typ.Kind {
	case KindStruct:
		if len(typ.Fields) == 0 {
			return nil, nil, fmt.Errorf("pq: struct %q has no fields; Parquet cannot store an empty struct", strings.Join(path, "."))
		}
		var pf pqschema.FieldList
		for _, c := range typ.Fields {
			cp, cn, err := t.build(c, at.fields(def, path))
			if err != nil {
				return nil, nil, err
			}
			pf = append(pf, cp)
			n.children = append(n.children, cn)
			n.leaves = append(n.leaves, cn.leaves...)
		}
		g, err := pqschema.NewGroupNode(name, rep, pf, -1)
		if err != nil {
			return nil, nil, fmt.Errorf("pq: struct %q: %w", strings.Join(path, "."), err)
		}
		return g, n, nil
	case KindList:
		n.entryDef, n.entryRep = def+1, at.rep+1
		ep, en, err := t.build(Field{Name: "element", Type: typ.Elem, Nullable: typ.ElemNullable}, at.entries(def, path))
		if err != nil {
			return nil, nil, err
		}
		n.children = []*node{en}
		n.leaves = append(n.leaves, en.leaves...)
		inner, err := pqschema.NewGroupNode("list", parquet.Repetitions.Repeated, pqschema.FieldList{ep}, -1)
		if err != nil {
			return nil, nil, fmt.Errorf("pq: list %q: %w", strings.Join(path, "."), err)
		}
		g, err := pqschema.NewGroupNodeLogical(name, rep, pqschema.FieldList{inner}, pqschema.NewListLogicalType(), -1)
		if err != nil {
			return nil, nil, fmt.Errorf("pq: list %q: %w", strings.Join(path, "."), err)
		}
		return g, n, nil
	case KindMap:
		if typ.Key == nil || !typ.Key.Kind.IsLeaf() {
			return nil, nil, fmt.Errorf("pq: map %q needs a primitive key type", strings.Join(path, "."))
		}
		n.entryDef, n.entryRep = def+1, at.rep+1
		kp, kn, err := t.build(Field{Name: "key", Type: typ.Key}, at.entries(def, path))
		if err != nil {
			return nil, nil, err
		}
		vp, vn, err := t.build(Field{Name: "value", Type: typ.Value, Nullable: typ.ValueNullable}, at.entries(def, path))
		if err != nil {
			return nil, nil, err
		}
		n.children = []*node{kn, vn}
		n.leaves = append(append(n.leaves, kn.leaves...), vn.leaves...)
		inner, err := pqschema.NewGroupNode("key_value", parquet.Repetitions.Repeated, pqschema.FieldList{kp, vp}, -1)
		if err != nil {
			return nil, nil, fmt.Errorf("pq: map %q: %w", strings.Join(path, "."), err)
		}
		g, err := pqschema.NewGroupNodeLogical(name, rep, pqschema.FieldList{inner}, pqschema.MapLogicalType{}, -1)
		if err != nil {
			return nil, nil, fmt.Errorf("pq: map %q: %w", strings.Join(path, "."), err)
		}
		return g, n, nil
	}
	if !typ.Kind.IsLeaf() {
		return nil, nil, fmt.Errorf("pq: field %q has unknown kind %v", strings.Join(path, "."), typ.Kind)
	}
	li := &leafInfo{path: path, kind: typ.Kind, scale: typ.Scale, maxDef: def, maxRep: at.rep, repeated: at.repeated}
	pn, err := primitiveNode(name, rep, typ, li)
	if err != nil {
		return nil, nil, fmt.Errorf("pq: column %q: %w", strings.Join(path, "."), err)
	}
	n.col = len(t.leaves)
	n.leaf = li
	n.leaves = []int{n.col}
	t.leaves = append(t.leaves, n)
	return pn, n, nil
}

func primitiveNode(name string, rep parquet.Repetition, typ *Type, li *leafInfo) (pqschema.Node, error) {
	logical := func(lt pqschema.LogicalType, pt parquet.Type, length int) (pqschema.Node, error) {
		li.phys = pt
		li.flbaLen = length
		return pqschema.NewPrimitiveNodeLogical(name, rep, lt, pt, length, -1)
	}
	switch typ.Kind {
	case KindBoolean:
		return logical(nil, parquet.Types.Boolean, -1)
	case KindInt8:
		return logical(pqschema.NewIntLogicalType(8, true), parquet.Types.Int32, -1)
	case KindInt16:
		return logical(pqschema.NewIntLogicalType(16, true), parquet.Types.Int32, -1)
	case KindInt32:
		return logical(nil, parquet.Types.Int32, -1)
	case KindInt64:
		return logical(nil, parquet.Types.Int64, -1)
	case KindFloat:
		return logical(nil, parquet.Types.Float, -1)
	case KindDouble:
		return logical(nil, parquet.Types.Double, -1)
	case KindString:
		return logical(pqschema.StringLogicalType{}, parquet.Types.ByteArray, -1)
	case KindBinary:
		return logical(nil, parquet.Types.ByteArray, -1)
	case KindDate:
		return logical(pqschema.DateLogicalType{}, parquet.Types.Int32, -1)
	case KindTimestamp:
		return logical(pqschema.NewTimestampLogicalType(true, pqschema.TimeUnitMicros), parquet.Types.Int64, -1)
	case KindTimestampNTZ:
		return logical(pqschema.NewTimestampLogicalType(false, pqschema.TimeUnitMicros), parquet.Types.Int64, -1)
	case KindDecimal:
		if typ.Precision < 1 || typ.Precision > 38 || typ.Scale < 0 || typ.Scale > typ.Precision {
			return nil, fmt.Errorf("decimal(%d,%d) is out of range; precision must be 1..38 and 0 <= scale <= precision", typ.Precision, typ.Scale)
		}
		lt := pqschema.NewDecimalLogicalType(int32(typ.Precision), int32(typ.Scale))
		switch {
		case typ.Precision <= 9:
			return logical(lt, parquet.Types.Int32, -1)
		case typ.Precision <= 18:
			return logical(lt, parquet.Types.Int64, -1)
		default:
			return logical(lt, parquet.Types.FixedLenByteArray, decimalBytes(typ.Precision))
		}
	}
	return nil, fmt.Errorf("unsupported kind %v", typ.Kind)
}

// decimalBytes is the smallest two's-complement width that holds every
// unscaled value of the given precision (Parquet's FIXED_LEN_BYTE_ARRAY rule).
func decimalBytes(precision int) int {
	for n := 1; ; n++ {
		// max value with n bytes: 2^(8n-1)-1 >= 10^precision - 1
		if float64(8*n-1)*0.30102999566398120 >= float64(precision) {
			return n
		}
	}
}

// ---------------------------------------------------------------------------
// Reader side: Parquet schema (possibly written by anyone) -> model + node tree.

type readTree struct {
	schema *Schema
	fields []*node
	leaves []*leafInfo
}

func buildReadTree(s *pqschema.Schema) (*readTree, error) {
	t := &readTree{schema: &Schema{}}
	root := s.Root()
	for i := 0; i < root.NumFields(); i++ {
		f := root.Field(i)
		n, err := t.build(f, topLevel)
		if err != nil {
			return nil, err
		}
		t.fields = append(t.fields, n)
		t.schema.Fields = append(t.schema.Fields, Field{Name: n.name, Type: n.typ, Nullable: n.optional})
	}
	if s.NumColumns() == 0 {
		return nil, fmt.Errorf("pq: the file schema has no columns; the file is malformed")
	}
	if len(t.leaves) != s.NumColumns() {
		return nil, fmt.Errorf("pq: the file schema has %d columns but %d were resolved; the schema is malformed", s.NumColumns(), len(t.leaves))
	}
	for i, li := range t.leaves {
		c := s.Column(i)
		if c.MaxDefinitionLevel() != li.maxDef || c.MaxRepetitionLevel() != li.maxRep {
			return nil, fmt.Errorf("pq: column %q has levels (%d,%d) but the schema implies (%d,%d); the schema is malformed",
				c.Path(), c.MaxDefinitionLevel(), c.MaxRepetitionLevel(), li.maxDef, li.maxRep)
		}
	}
	return t, nil
}

func isListAnnotated(g *pqschema.GroupNode) bool {
	if _, ok := g.LogicalType().(pqschema.ListLogicalType); ok {
		return true
	}
	return g.ConvertedType() == pqschema.ConvertedTypes.List
}

func isMapAnnotated(g *pqschema.GroupNode) bool {
	if _, ok := g.LogicalType().(pqschema.MapLogicalType); ok {
		return true
	}
	return g.ConvertedType() == pqschema.ConvertedTypes.Map || g.ConvertedType() == pqschema.ConvertedTypes.MapKeyValue
}

// build converts one Parquet node at level at (at.element: the node's own
// REPEATED repetition was already accounted for by the caller, a 2-level
// list element).
func (t *readTree) build(pn pqschema.Node, at level) (*node, error) {
	name, path := pn.Name(), at.path
	rep := pn.RepetitionType()
	if rep == parquet.Repetitions.Repeated && !at.element {
		// An un-annotated repeated field is a required list of required elements.
		n := &node{name: name, def: at.def, entryDef: at.def + 1, entryRep: at.rep + 1}
		el := at.entries(at.def, append(path, name))
		el.element = true
		en, err := t.build(pn, el)
		if err != nil {
			return nil, err
		}
		en.name = "element"
		n.typ = ListOf(en.typ, false)
		n.children = []*node{en}
		n.leaves = en.leaves
		return n, nil
	}
	def := at.def
	optional := rep == parquet.Repetitions.Optional
	if optional {
		def++
	}
	n := &node{name: name, optional: optional, def: def}
	mpath := append(append([]string(nil), path...), name)
	if at.element {
		mpath = append(append([]string(nil), path...), "element")
	}
	if g, ok := pn.(*pqschema.GroupNode); ok {
		switch {
		case isListAnnotated(g):
			if g.NumFields() != 1 || g.Field(0).RepetitionType() != parquet.Repetitions.Repeated {
				return nil, fmt.Errorf("pq: list %q does not have exactly one repeated child; the file is malformed", strings.Join(mpath, "."))
			}
			r := g.Field(0)
			n.entryDef, n.entryRep = def+1, at.rep+1
			var en *node
			var err error
			rg, isGroup := r.(*pqschema.GroupNode)
			if !isGroup || rg.NumFields() != 1 || r.Name() == "array" || r.Name() == name+"_tuple" {
				// 2-level list: the repeated node is itself the element.
				el := at.entries(def, mpath)
				el.element = true
				en, err = t.build(r, el)
			} else {
				en, err = t.build(rg.Field(0), at.entries(def, mpath))
			}
			if err != nil {
				return nil, err
			}
			n.typ = ListOf(en.typ, en.optional)
			n.children = []*node{en}
			n.leaves = en.leaves
			return n, nil
		case isMapAnnotated(g):
			if g.NumFields() != 1 || g.Field(0).RepetitionType() != parquet.Repetitions.Repeated {
				return nil, fmt.Errorf("pq: map %q does not have exactly one repeated child; the file is malformed", strings.Join(mpath, "."))
			}
			kv, ok := g.Field(0).(*pqschema.GroupNode)
			if !ok || kv.NumFields() != 2 {
				return nil, fmt.Errorf("pq: map %q does not have a key/value group; the file is malformed", strings.Join(mpath, "."))
			}
			n.entryDef, n.entryRep = def+1, at.rep+1
			kn, err := t.build(kv.Field(0), at.entries(def, mpath))
			if err != nil {
				return nil, err
			}
			vn, err := t.build(kv.Field(1), at.entries(def, mpath))
			if err != nil {
				return nil, err
			}
			kn.name, vn.name = "key", "value"
			n.typ = MapOf(kn.typ, vn.typ, vn.optional)
			n.children = []*node{kn, vn}
			n.leaves = append(append([]int(nil), kn.leaves...), vn.leaves...)
			return n, nil
		default:
			if g.NumFields() == 0 {
				return nil, fmt.Errorf("pq: group %q has no fields; the file is malformed", strings.Join(mpath, "."))
			}
			var fields []Field
			for i := 0; i < g.NumFields(); i++ {
				cn, err := t.build(g.Field(i), at.fields(def, mpath))
				if err != nil {
					return nil, err
				}
				n.children = append(n.children, cn)
				n.leaves = append(n.leaves, cn.leaves...)
				fields = append(fields, Field{Name: cn.name, Type: cn.typ, Nullable: cn.optional})
			}
			n.typ = StructOf(fields...)
			return n, nil
		}
	}
	p, ok := pn.(*pqschema.PrimitiveNode)
	if !ok {
		return nil, fmt.Errorf("pq: node %q is neither a group nor a primitive", strings.Join(mpath, "."))
	}
	li := &leafInfo{path: mpath, phys: p.PhysicalType(), flbaLen: p.TypeLength(), maxDef: def, maxRep: at.rep, repeated: at.repeated}
	typ, err := leafType(p, li)
	if err != nil {
		return nil, fmt.Errorf("pq: column %q: %w", strings.Join(mpath, "."), err)
	}
	li.kind = typ.Kind
	li.scale = typ.Scale
	n.typ = typ
	n.col = len(t.leaves)
	n.leaf = li
	n.leaves = []int{n.col}
	t.leaves = append(t.leaves, li)
	return n, nil
}

// leafType maps a physical type plus its logical/converted annotation onto a model type.
func leafType(p *pqschema.PrimitiveNode, li *leafInfo) (*Type, error) {
	lt := p.LogicalType()
	ct := p.ConvertedType()
	if d, ok := lt.(pqschema.DecimalLogicalType); ok {
		return decimalType(int(d.Precision()), int(d.Scale()), p.PhysicalType())
	}
	if ct == pqschema.ConvertedTypes.Decimal {
		dm := p.DecimalMetadata()
		return decimalType(int(dm.Precision), int(dm.Scale), p.PhysicalType())
	}
	switch p.PhysicalType() {
	case parquet.Types.Boolean:
		return Boolean, nil
	case parquet.Types.Int32:
		if _, ok := lt.(pqschema.DateLogicalType); ok || ct == pqschema.ConvertedTypes.Date {
			return DateType, nil
		}
		if it, ok := lt.(pqschema.IntLogicalType); ok {
			switch {
			case it.IsSigned() && it.BitWidth() == 8:
				return Int8, nil
			case it.IsSigned() && it.BitWidth() == 16:
				return Int16, nil
			case it.IsSigned():
				return Int32, nil
			case it.BitWidth() == 8:
				li.unsigned = true
				return Int16, nil
			case it.BitWidth() == 16:
				li.unsigned = true
				return Int32, nil
			default:
				li.unsigned = true
				return Int64, nil
			}
		}
		return Int32, nil
	case parquet.Types.Int64:
		if ts, ok := lt.(pqschema.TimestampLogicalType); ok {
			switch ts.TimeUnit() {
			case pqschema.TimeUnitMillis:
				li.unit = unitMillis
			case pqschema.TimeUnitNanos:
				li.unit = unitNanos
			default:
				li.unit = unitMicros
			}
			if ts.IsAdjustedToUTC() {
				return Timestamp, nil
			}
			return TimestampNTZ, nil
		}
		switch ct {
		case pqschema.ConvertedTypes.TimestampMillis:
			li.unit = unitMillis
			return Timestamp, nil
		case pqschema.ConvertedTypes.TimestampMicros:
			return Timestamp, nil
		}
		if it, ok := lt.(pqschema.IntLogicalType); ok && !it.IsSigned() {
			// uint64 has no Spark type; values above MaxInt64 read as negative longs.
			li.unsigned = true
		}
		return Int64, nil
	case parquet.Types.Int96:
		return Timestamp, nil
	case parquet.Types.Float:
		return Float, nil
	case parquet.Types.Double:
		return Double, nil
	case parquet.Types.ByteArray:
		switch lt.(type) {
		case pqschema.StringLogicalType, pqschema.EnumLogicalType, pqschema.JSONLogicalType:
			return String, nil
		}
		switch ct {
		case pqschema.ConvertedTypes.UTF8, pqschema.ConvertedTypes.Enum, pqschema.ConvertedTypes.JSON:
			return String, nil
		}
		return Binary, nil
	case parquet.Types.FixedLenByteArray:
		return Binary, nil
	}
	return nil, fmt.Errorf("unsupported physical type %s", p.PhysicalType())
}

func decimalType(precision, scale int, phys parquet.Type) (*Type, error) {
	switch phys {
	case parquet.Types.Int32, parquet.Types.Int64, parquet.Types.ByteArray, parquet.Types.FixedLenByteArray:
	default:
		return nil, fmt.Errorf("decimal stored as %s is not allowed by the Parquet spec", phys)
	}
	if precision < 1 || scale < 0 {
		return nil, fmt.Errorf("decimal(%d,%d) is malformed", precision, scale)
	}
	return DecimalOf(precision, scale), nil
}
