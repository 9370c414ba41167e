package pq

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// Kind is the logical type of a field, in Delta/Spark terms.
type Kind uint8

// The kinds. Leaf kinds come first; Struct, List and Map are nested.
const (
	KindBoolean      Kind = iota + 1
	KindInt8              // Spark "byte"
	KindInt16             // Spark "short"
	KindInt32             // Spark "integer"
	KindInt64             // Spark "long"
	KindFloat             // Spark "float" (IEEE 754 single)
	KindDouble            // Spark "double"
	KindString            // UTF-8 text
	KindBinary            // opaque bytes
	KindDate              // days since 1970-01-01, no zone
	KindTimestamp         // instant, microseconds since the epoch, UTC
	KindTimestampNTZ      // wall-clock date-time without zone, microseconds
	KindDecimal           // decimal(Precision, Scale)
	KindStruct
	KindList
	KindMap
)

var kindNames = map[Kind]string{
	KindBoolean: "boolean", KindInt8: "byte", KindInt16: "short", KindInt32: "integer",
	KindInt64: "long", KindFloat: "float", KindDouble: "double", KindString: "string",
	KindBinary: "binary", KindDate: "date", KindTimestamp: "timestamp",
	KindTimestampNTZ: "timestamp_ntz", KindDecimal: "decimal", KindStruct: "struct",
	KindList: "array", KindMap: "map",
}

// String returns the Spark/Delta name of the kind.
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// IsLeaf reports whether the kind is a primitive (non-nested) kind.
func (k Kind) IsLeaf() bool { return k >= KindBoolean && k <= KindDecimal }

// Type describes a value. Only the members relevant to Kind are used:
// Precision/Scale for KindDecimal, Fields for KindStruct, Elem/ElemNullable for
// KindList, Key/Value/ValueNullable for KindMap (map keys are never null).
type Type struct {
	Kind          Kind
	Precision     int
	Scale         int
	Fields        []Field
	Elem          *Type
	ElemNullable  bool
	Key           *Type
	Value         *Type
	ValueNullable bool
}

// Field is a named, possibly nullable member of a struct or of a Schema.
type Field struct {
	Name     string
	Type     *Type
	Nullable bool
}

// Schema is the top-level list of fields of a file; a row holds one value per field.
type Schema struct {
	Fields []Field
}

// Primitive types, shared and immutable: never modify them.
var (
	Boolean      = &Type{Kind: KindBoolean}
	Int8         = &Type{Kind: KindInt8}
	Int16        = &Type{Kind: KindInt16}
	Int32        = &Type{Kind: KindInt32}
	Int64        = &Type{Kind: KindInt64}
	Float        = &Type{Kind: KindFloat}
	Double       = &Type{Kind: KindDouble}
	String       = &Type{Kind: KindString}
	Binary       = &Type{Kind: KindBinary}
	DateType     = &Type{Kind: KindDate}
	Timestamp    = &Type{Kind: KindTimestamp}
	TimestampNTZ = &Type{Kind: KindTimestampNTZ}
)

// DecimalOf returns decimal(precision, scale); precision is 1..38.
func DecimalOf(precision, scale int) *Type {
	return &Type{Kind: KindDecimal, Precision: precision, Scale: scale}
}

// StructOf returns a struct type with the given fields, in order.
func StructOf(fields ...Field) *Type { return &Type{Kind: KindStruct, Fields: fields} }

// ListOf returns array<elem>; elemNullable says whether elements may be null.
func ListOf(elem *Type, elemNullable bool) *Type {
	return &Type{Kind: KindList, Elem: elem, ElemNullable: elemNullable}
}

// MapOf returns map<key,value>; valueNullable says whether values may be null.
func MapOf(key, value *Type, valueNullable bool) *Type {
	return &Type{Kind: KindMap, Key: key, Value: value, ValueNullable: valueNullable}
}

// NewSchema returns a schema with the given top-level fields.
func NewSchema(fields ...Field) *Schema { return &Schema{Fields: fields} }

// Nullable returns a nullable field.
func Nullable(name string, t *Type) Field { return Field{Name: name, Type: t, Nullable: true} }

// Required returns a non-nullable field.
func Required(name string, t *Type) Field { return Field{Name: name, Type: t} }

// FieldIndex returns the index of the top-level field called name, or -1.
func (s *Schema) FieldIndex(name string) int {
	for i, f := range s.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// String renders the type in Spark DDL-like form, e.g. struct<a:long,b:array<string>>.
func (t *Type) String() string {
	var b strings.Builder
	t.write(&b)
	return b.String()
}

func (t *Type) write(b *strings.Builder) {
	switch t.Kind {
	case KindDecimal:
		fmt.Fprintf(b, "decimal(%d,%d)", t.Precision, t.Scale)
	case KindStruct:
		b.WriteString("struct<")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f.Name)
			b.WriteByte(':')
			f.Type.write(b)
			if !f.Nullable {
				b.WriteString(" not null")
			}
		}
		b.WriteByte('>')
	case KindList:
		b.WriteString("array<")
		t.Elem.write(b)
		b.WriteByte('>')
	case KindMap:
		b.WriteString("map<")
		t.Key.write(b)
		b.WriteByte(',')
		t.Value.write(b)
		b.WriteByte('>')
	default:
		b.WriteString(t.Kind.String())
	}
}

// String renders the schema as a struct type.
func (s *Schema) String() string { return StructOf(s.Fields...).String() }

// Row is one record: one value per schema field, in schema order.
type Row = []any

// MapEntry is one key/value pair of a map value. Maps are ordered slices of
// entries because that is what Parquet stores (duplicate keys are possible in a
// foreign file) and because keys need not be strings.
type MapEntry struct {
	Key   any
	Value any
}

// StringMap builds a map value from a Go map[string]string, keys sorted so the
// written bytes are deterministic.
func StringMap(m map[string]string) []MapEntry {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]MapEntry, len(keys))
	for i, k := range keys {
		out[i] = MapEntry{Key: k, Value: m[k]}
	}
	return out
}

// ToStringMap converts a map value with string keys and string-or-null values
// into a Go map (null values become ""). It fails on any other key or value type.
func ToStringMap(v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	entries, ok := v.([]MapEntry)
	if !ok {
		return nil, fmt.Errorf("pq: expected a map value ([]pq.MapEntry), got %T", v)
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		k, ok := e.Key.(string)
		if !ok {
			return nil, fmt.Errorf("pq: expected a string map key, got %T", e.Key)
		}
		switch val := e.Value.(type) {
		case nil:
			out[k] = ""
		case string:
			out[k] = val
		default:
			return nil, fmt.Errorf("pq: expected a string map value for key %q, got %T", k, e.Value)
		}
	}
	return out, nil
}

// Date is a calendar date as days since 1970-01-01 (negative before).
type Date int32

// DateOf returns the date of the given civil year, month and day.
func DateOf(year int, month time.Month, day int) Date {
	return Date(time.Date(year, month, day, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

// DateFromTime returns the UTC calendar date of t.
func DateFromTime(t time.Time) Date {
	u := t.Unix()
	d := u / 86400
	if u%86400 < 0 {
		d--
	}
	return Date(d)
}

// Time returns midnight UTC of the date.
func (d Date) Time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String returns the date as YYYY-MM-DD.
func (d Date) String() string { return d.Time().Format("2006-01-02") }

// Decimal is an exact decimal number: Unscaled × 10^-Scale.
type Decimal struct {
	Unscaled *big.Int
	Scale    int
}

// NewDecimal returns unscaled × 10^-scale.
func NewDecimal(unscaled int64, scale int) Decimal {
	return Decimal{Unscaled: big.NewInt(unscaled), Scale: scale}
}

// ParseDecimal parses a plain decimal string such as "-12.340" into a Decimal at
// the given scale; it fails if the string has more fractional digits than scale.
func ParseDecimal(s string, scale int) (Decimal, error) {
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimLeft(s, "+-")
	intPart, frac, _ := strings.Cut(body, ".")
	if len(frac) > scale {
		return Decimal{}, fmt.Errorf("pq: decimal %q has more than %d fractional digits", s, scale)
	}
	digits := intPart + frac + strings.Repeat("0", scale-len(frac))
	if digits == "" {
		return Decimal{}, fmt.Errorf("pq: %q is not a decimal number", s)
	}
	u, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return Decimal{}, fmt.Errorf("pq: %q is not a decimal number", s)
	}
	if neg {
		u.Neg(u)
	}
	return Decimal{Unscaled: u, Scale: scale}, nil
}

// String renders the decimal in plain notation with exactly Scale fractional digits.
func (d Decimal) String() string {
	if d.Unscaled == nil {
		return "<nil>"
	}
	s := new(big.Int).Abs(d.Unscaled).String()
	neg := d.Unscaled.Sign() < 0
	if d.Scale > 0 {
		if len(s) <= d.Scale {
			s = strings.Repeat("0", d.Scale-len(s)+1) + s
		}
		s = s[:len(s)-d.Scale] + "." + s[len(s)-d.Scale:]
	} else if d.Scale < 0 {
		s += strings.Repeat("0", -d.Scale)
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Cmp compares two decimals of the same scale by their unscaled values.
func (d Decimal) Cmp(o Decimal) int { return d.Unscaled.Cmp(o.Unscaled) }
