package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// DataType is a Delta (Spark) data type: *PrimitiveType, *DecimalType,
// *StructType, *ArrayType or *MapType.
type DataType interface {
	// TypeString is the type's name in the Spark JSON schema ("long",
	// "decimal(10,2)", "struct", "array", "map").
	TypeString() string
	isDataType()
}

// Primitive type names of the Spark JSON schema.
const (
	TypeString       = "string"
	TypeLong         = "long"
	TypeInteger      = "integer"
	TypeShort        = "short"
	TypeByte         = "byte"
	TypeFloat        = "float"
	TypeDouble       = "double"
	TypeBoolean      = "boolean"
	TypeBinary       = "binary"
	TypeDate         = "date"
	TypeTimestamp    = "timestamp"
	TypeTimestampNTZ = "timestamp_ntz"
	TypeVariant      = "variant"
)

var primitiveNames = map[string]bool{
	TypeString: true, TypeLong: true, TypeInteger: true, TypeShort: true, TypeByte: true,
	TypeFloat: true, TypeDouble: true, TypeBoolean: true, TypeBinary: true, TypeDate: true,
	TypeTimestamp: true, TypeTimestampNTZ: true, TypeVariant: true,
}

// PrimitiveType is a non-decimal scalar type.
type PrimitiveType struct{ Name string }

// DecimalType is decimal(Precision, Scale).
type DecimalType struct{ Precision, Scale int }

// StructField is one named field of a struct.
type StructField struct {
	Name     string
	Type     DataType
	Nullable bool
	// Metadata is the field's metadata object, kept verbatim (Spark puts
	// comments, invariants, column-mapping ids and generation expressions
	// there). Never nil after parsing.
	Metadata map[string]json.RawMessage
}

// StructType is a struct (and the top-level schema).
type StructType struct{ Fields []StructField }

// ArrayType is array<ElementType>.
type ArrayType struct {
	ElementType  DataType
	ContainsNull bool
}

// MapType is map<KeyType, ValueType>.
type MapType struct {
	KeyType           DataType
	ValueType         DataType
	ValueContainsNull bool
}

func (t *PrimitiveType) TypeString() string { return t.Name }
func (t *DecimalType) TypeString() string   { return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale) }
func (t *StructType) TypeString() string    { return "struct" }
func (t *ArrayType) TypeString() string     { return "array" }
func (t *MapType) TypeString() string       { return "map" }

func (*PrimitiveType) isDataType() {}
func (*DecimalType) isDataType()   {}
func (*StructType) isDataType()    {}
func (*ArrayType) isDataType()     {}
func (*MapType) isDataType()       {}

// Field returns the field named name (exact match), or nil.
func (t *StructType) Field(name string) *StructField {
	for i := range t.Fields {
		if t.Fields[i].Name == name {
			return &t.Fields[i]
		}
	}
	return nil
}

// ParseSchema parses a metaData.schemaString.
func ParseSchema(s string) (*StructType, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: metaData.schemaString is empty", ErrCorruptLog)
	}
	t, err := parseType(json.RawMessage(s))
	if err != nil {
		return nil, fmt.Errorf("parsing the table schema: %w", err)
	}
	st, ok := t.(*StructType)
	if !ok {
		return nil, fmt.Errorf("%w: the table schema is a %s, want a struct", ErrCorruptLog, t.TypeString())
	}
	if err := checkUniqueNames(st, ""); err != nil {
		return nil, err
	}
	return st, nil
}

func checkUniqueNames(st *StructType, prefix string) error {
	seen := make(map[string]string, len(st.Fields))
	for _, f := range st.Fields {
		k := strings.ToLower(f.Name)
		if prev, dup := seen[k]; dup {
			return fmt.Errorf("%w: the schema has two columns whose names differ only in case: %q and %q", ErrCorruptLog, prefix+prev, prefix+f.Name)
		}
		seen[k] = f.Name
		if inner, ok := f.Type.(*StructType); ok {
			if err := checkUniqueNames(inner, prefix+f.Name+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

type jsonField struct {
	Name     *string                    `json:"name"`
	Type     json.RawMessage            `json:"type"`
	Nullable *bool                      `json:"nullable"`
	Metadata map[string]json.RawMessage `json:"metadata"`
}

type jsonComplex struct {
	Type              string          `json:"type"`
	Fields            []jsonField     `json:"fields"`
	ElementType       json.RawMessage `json:"elementType"`
	ContainsNull      *bool           `json:"containsNull"`
	KeyType           json.RawMessage `json:"keyType"`
	ValueType         json.RawMessage `json:"valueType"`
	ValueContainsNull *bool           `json:"valueContainsNull"`
}

func parseType(raw json.RawMessage) (DataType, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: a type is missing", ErrCorruptLog)
	}
	if raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptLog, err)
		}
		return parsePrimitive(name)
	}
	var c jsonComplex
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: a schema type is neither a name nor an object: %v", ErrCorruptLog, err)
	}
	switch c.Type {
	case "struct":
		st := &StructType{Fields: make([]StructField, 0, len(c.Fields))}
		for i, f := range c.Fields {
			if f.Name == nil {
				return nil, fmt.Errorf("%w: struct field %d has no name", ErrCorruptLog, i)
			}
			ft, err := parseType(f.Type)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", *f.Name, err)
			}
			md := f.Metadata
			if md == nil {
				md = map[string]json.RawMessage{}
			}
			st.Fields = append(st.Fields, StructField{Name: *f.Name, Type: ft, Nullable: f.Nullable == nil || *f.Nullable, Metadata: md})
		}
		return st, nil
	case "array":
		et, err := parseType(c.ElementType)
		if err != nil {
			return nil, fmt.Errorf("array element: %w", err)
		}
		return &ArrayType{ElementType: et, ContainsNull: c.ContainsNull == nil || *c.ContainsNull}, nil
	case "map":
		kt, err := parseType(c.KeyType)
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		vt, err := parseType(c.ValueType)
		if err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return &MapType{KeyType: kt, ValueType: vt, ValueContainsNull: c.ValueContainsNull == nil || *c.ValueContainsNull}, nil
	case "udt":
		return nil, fmt.Errorf("%w: user-defined types are not supported", ErrUnsupported)
	}
	return nil, fmt.Errorf("%w: unknown complex type %q", ErrCorruptLog, c.Type)
}

func parsePrimitive(name string) (DataType, error) {
	if primitiveNames[name] {
		return &PrimitiveType{Name: name}, nil
	}
	if name == "decimal" { // Spark's default precision
		return &DecimalType{Precision: 10, Scale: 0}, nil
	}
	if rest, ok := strings.CutPrefix(name, "decimal("); ok && strings.HasSuffix(rest, ")") {
		ps := strings.Split(strings.TrimSuffix(rest, ")"), ",")
		if len(ps) == 2 {
			p, err1 := strconv.Atoi(strings.TrimSpace(ps[0]))
			s, err2 := strconv.Atoi(strings.TrimSpace(ps[1]))
			if err1 == nil && err2 == nil && p >= 1 && p <= 38 && s >= 0 && s <= p {
				return &DecimalType{Precision: p, Scale: s}, nil
			}
		}
		return nil, fmt.Errorf("%w: invalid decimal type %q", ErrCorruptLog, name)
	}
	return nil, fmt.Errorf("%w: unknown data type %q", ErrUnsupported, name)
}

// MarshalSchema renders a schema as a Spark JSON schema string (field keys
// in Spark's order: name, type, nullable, metadata).
func MarshalSchema(st *StructType) (string, error) {
	var b bytes.Buffer
	if err := writeType(&b, st); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // cannot fail for a string
	b.Write(enc)
}

func writeType(b *bytes.Buffer, t DataType) error {
	switch t := t.(type) {
	case *PrimitiveType:
		if !primitiveNames[t.Name] {
			return fmt.Errorf("delta: unknown primitive type %q", t.Name)
		}
		writeJSONString(b, t.Name)
	case *DecimalType:
		writeJSONString(b, t.TypeString())
	case *StructType:
		b.WriteString(`{"type":"struct","fields":[`)
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"name":`)
			writeJSONString(b, f.Name)
			b.WriteString(`,"type":`)
			if err := writeType(b, f.Type); err != nil {
				return err
			}
			b.WriteString(`,"nullable":`)
			b.WriteString(strconv.FormatBool(f.Nullable))
			b.WriteString(`,"metadata":`)
			md := f.Metadata
			if md == nil {
				md = map[string]json.RawMessage{}
			}
			enc, err := json.Marshal(md) // map keys sorted: deterministic
			if err != nil {
				return fmt.Errorf("delta: field %q metadata: %w", f.Name, err)
			}
			b.Write(enc)
			b.WriteByte('}')
		}
		b.WriteString(`]}`)
	case *ArrayType:
		b.WriteString(`{"type":"array","elementType":`)
		if err := writeType(b, t.ElementType); err != nil {
			return err
		}
		b.WriteString(`,"containsNull":` + strconv.FormatBool(t.ContainsNull) + `}`)
	case *MapType:
		b.WriteString(`{"type":"map","keyType":`)
		if err := writeType(b, t.KeyType); err != nil {
			return err
		}
		b.WriteString(`,"valueType":`)
		if err := writeType(b, t.ValueType); err != nil {
			return err
		}
		b.WriteString(`,"valueContainsNull":` + strconv.FormatBool(t.ValueContainsNull) + `}`)
	default:
		return fmt.Errorf("delta: unknown data type %T", t)
	}
	return nil
}

// walkTypes calls fn for every data type in the schema, depth first.
func walkTypes(t DataType, fn func(path string, t DataType, f *StructField)) {
	var walk func(path string, t DataType, f *StructField)
	walk = func(path string, t DataType, f *StructField) {
		fn(path, t, f)
		switch t := t.(type) {
		case *StructType:
			for i := range t.Fields {
				p := t.Fields[i].Name
				if path != "" {
					p = path + "." + p
				}
				walk(p, t.Fields[i].Type, &t.Fields[i])
			}
		case *ArrayType:
			walk(path+".element", t.ElementType, nil)
		case *MapType:
			walk(path+".key", t.KeyType, nil)
			walk(path+".value", t.ValueType, nil)
		}
	}
	walk("", t, nil)
}

// Convenience constructors for building schemas in code.

// Prim returns a primitive type by name.
func Prim(name string) DataType { return &PrimitiveType{Name: name} }

// Decimal returns decimal(p,s).
func Decimal(p, s int) DataType { return &DecimalType{Precision: p, Scale: s} }

// Field returns a nullable struct field with empty metadata.
func Field(name string, t DataType, nullable bool) StructField {
	return StructField{Name: name, Type: t, Nullable: nullable, Metadata: map[string]json.RawMessage{}}
}
