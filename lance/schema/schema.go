// Package schema maps between Arrow schemas and Lance's field list (lance.file.Field), the form a
// Lance manifest and a Lance data file both store: fields in depth-first pre-order, each with an
// id, its parent's id and a logical type string.
package schema

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// PrimaryKeyMeta is the Arrow field metadata key that marks Lance's unenforced primary key.
const PrimaryKeyMeta = "lance-schema:unenforced-primary-key"

// Legacy v1 encodings lance still records on each field; readers ignore them.
const (
	EncodingNone      = 0
	EncodingPlain     = 1
	EncodingVarBinary = 2
)

// Field is one Lance field. Children hold the tree; ParentID mirrors it for the wire form.
type Field struct {
	ID                   int32
	ParentID             int32
	Name                 string
	LogicalType          string
	Nullable             bool
	Encoding             int32
	ExtensionName        string
	Metadata             map[string][]byte
	UnenforcedPrimaryKey bool
	Children             []*Field
}

// Schema is a Lance schema: top-level fields plus schema-level metadata.
type Schema struct {
	Fields   []*Field
	Metadata map[string][]byte
}

// Flatten returns every field in depth-first pre-order, the order Lance stores them in.
func (s *Schema) Flatten() []*Field {
	var out []*Field
	var walk func(fs []*Field)
	walk = func(fs []*Field) {
		for _, f := range fs {
			out = append(out, f)
			walk(f.Children)
		}
	}
	walk(s.Fields)
	return out
}

// FieldIDs returns the ids of Flatten in order.
func (s *Schema) FieldIDs() []int32 {
	fs := s.Flatten()
	ids := make([]int32, len(fs))
	for i, f := range fs {
		ids[i] = f.ID
	}
	return ids
}

// MaxFieldID returns the largest field id, or -1 for an empty schema.
func (s *Schema) MaxFieldID() int32 {
	m := int32(-1)
	for _, f := range s.Flatten() {
		if f.ID > m {
			m = f.ID
		}
	}
	return m
}

// Field returns the top-level field with the given name, or nil.
func (s *Schema) Field(name string) *Field {
	for _, f := range s.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Project returns a schema holding only the named top-level fields, in the order asked.
func (s *Schema) Project(names []string) (*Schema, error) {
	out := &Schema{Metadata: s.Metadata}
	for _, n := range names {
		f := s.Field(n)
		if f == nil {
			return nil, fmt.Errorf("lance schema: no column %q", n)
		}
		out.Fields = append(out.Fields, f)
	}
	return out, nil
}

// Build reassembles a schema from fields in pre-order with parent ids, as read from the wire.
// A parent must precede its children.
func Build(flat []*Field, meta map[string][]byte) (*Schema, error) {
	byID := map[int32]*Field{}
	s := &Schema{Metadata: meta}
	for _, f := range flat {
		if _, dup := byID[f.ID]; dup {
			return nil, fmt.Errorf("lance schema: duplicate field id %d", f.ID)
		}
		f.Children = nil
		byID[f.ID] = f
		if f.ParentID == -1 {
			s.Fields = append(s.Fields, f)
			continue
		}
		p, ok := byID[f.ParentID]
		if !ok || p == f {
			return nil, fmt.Errorf("lance schema: field %q (id %d) names parent %d that does not precede it", f.Name, f.ID, f.ParentID)
		}
		p.Children = append(p.Children, f)
	}
	return s, nil
}

// FromArrow converts an Arrow schema, assigning field ids in pre-order from 0.
func FromArrow(as *arrow.Schema) (*Schema, error) {
	s := &Schema{Metadata: metaFromArrow(as.Metadata())}
	next := int32(0)
	for _, af := range as.Fields() {
		f, err := fieldFromArrow(af, -1, &next)
		if err != nil {
			return nil, err
		}
		s.Fields = append(s.Fields, f)
	}
	return s, nil
}

func metaFromArrow(md arrow.Metadata) map[string][]byte {
	if md.Len() == 0 {
		return nil
	}
	m := make(map[string][]byte, md.Len())
	for i, k := range md.Keys() {
		m[k] = []byte(md.Values()[i])
	}
	return m
}

func metaToArrow(m map[string][]byte) arrow.Metadata {
	if len(m) == 0 {
		return arrow.Metadata{}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = string(m[k])
	}
	return arrow.NewMetadata(keys, vals)
}

func fieldFromArrow(af arrow.Field, parent int32, next *int32) (*Field, error) {
	lt, enc, err := logicalType(af.Type)
	if err != nil {
		return nil, fmt.Errorf("lance schema: column %q: %w", af.Name, err)
	}
	f := &Field{ID: *next, ParentID: parent, Name: af.Name, LogicalType: lt, Nullable: af.Nullable,
		Encoding: enc, Metadata: metaFromArrow(af.Metadata)}
	if v, ok := f.Metadata[PrimaryKeyMeta]; ok && strings.EqualFold(string(v), "true") {
		f.UnenforcedPrimaryKey = true
	}
	*next++
	var kids []arrow.Field
	switch t := af.Type.(type) {
	case *arrow.ListType:
		kids = []arrow.Field{t.ElemField()}
	case *arrow.LargeListType:
		kids = []arrow.Field{t.ElemField()}
	case *arrow.StructType:
		kids = t.Fields()
	}
	for _, k := range kids {
		c, err := fieldFromArrow(k, f.ID, next)
		if err != nil {
			return nil, err
		}
		f.Children = append(f.Children, c)
	}
	return f, nil
}

// ToArrow converts back to an Arrow schema.
func (s *Schema) ToArrow() (*arrow.Schema, error) {
	fs := make([]arrow.Field, 0, len(s.Fields))
	for _, f := range s.Fields {
		af, err := f.ToArrow()
		if err != nil {
			return nil, err
		}
		fs = append(fs, af)
	}
	md := metaToArrow(s.Metadata)
	return arrow.NewSchema(fs, &md), nil
}

// ToArrow converts one field (with its children) to an Arrow field.
func (f *Field) ToArrow() (arrow.Field, error) {
	dt, err := f.ArrowType()
	if err != nil {
		return arrow.Field{}, err
	}
	return arrow.Field{Name: f.Name, Type: dt, Nullable: f.Nullable, Metadata: metaToArrow(f.Metadata)}, nil
}

// ArrowType is the Arrow data type of the field.
func (f *Field) ArrowType() (arrow.DataType, error) {
	lt := f.LogicalType
	if t, ok := primitiveTypes[lt]; ok {
		return t, nil
	}
	switch {
	case lt == "list" || lt == "large_list" || lt == "list.struct" || lt == "large_list.struct":
		if len(f.Children) != 1 {
			return nil, fmt.Errorf("lance schema: list field %q has %d children", f.Name, len(f.Children))
		}
		item, err := f.Children[0].ToArrow()
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(lt, "large_") {
			return arrow.LargeListOfField(item), nil
		}
		return arrow.ListOfField(item), nil
	case lt == "struct":
		kids := make([]arrow.Field, 0, len(f.Children))
		for _, c := range f.Children {
			k, err := c.ToArrow()
			if err != nil {
				return nil, err
			}
			kids = append(kids, k)
		}
		return arrow.StructOf(kids...), nil
	case strings.HasPrefix(lt, "timestamp:"):
		parts := strings.SplitN(lt, ":", 3)
		if len(parts) != 3 {
			break
		}
		unit, ok := timeUnits[parts[1]]
		if !ok {
			break
		}
		tz := parts[2]
		if tz == "-" {
			tz = ""
		}
		return &arrow.TimestampType{Unit: unit, TimeZone: tz}, nil
	case strings.HasPrefix(lt, "fixed_size_list:"):
		rest := strings.TrimPrefix(lt, "fixed_size_list:")
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			break
		}
		n, err := strconv.ParseInt(rest[i+1:], 10, 32)
		if err != nil || n <= 0 {
			break
		}
		elem, ok := primitiveTypes[rest[:i]]
		if !ok {
			break
		}
		return arrow.FixedSizeListOfField(int32(n), arrow.Field{Name: "item", Type: elem, Nullable: true}), nil
	case strings.HasPrefix(lt, "fixed_size_binary:"):
		n, err := strconv.ParseInt(strings.TrimPrefix(lt, "fixed_size_binary:"), 10, 32)
		if err == nil && n > 0 {
			return &arrow.FixedSizeBinaryType{ByteWidth: int(n)}, nil
		}
	}
	return nil, fmt.Errorf("lance schema: field %q: unsupported logical type %q", f.Name, lt)
}

var primitiveTypes = map[string]arrow.DataType{
	"null":         arrow.Null,
	"bool":         arrow.FixedWidthTypes.Boolean,
	"int8":         arrow.PrimitiveTypes.Int8,
	"uint8":        arrow.PrimitiveTypes.Uint8,
	"int16":        arrow.PrimitiveTypes.Int16,
	"uint16":       arrow.PrimitiveTypes.Uint16,
	"int32":        arrow.PrimitiveTypes.Int32,
	"uint32":       arrow.PrimitiveTypes.Uint32,
	"int64":        arrow.PrimitiveTypes.Int64,
	"uint64":       arrow.PrimitiveTypes.Uint64,
	"halffloat":    arrow.FixedWidthTypes.Float16,
	"float":        arrow.PrimitiveTypes.Float32,
	"double":       arrow.PrimitiveTypes.Float64,
	"string":       arrow.BinaryTypes.String,
	"large_string": arrow.BinaryTypes.LargeString,
	"binary":       arrow.BinaryTypes.Binary,
	"large_binary": arrow.BinaryTypes.LargeBinary,
	"date32:day":   arrow.FixedWidthTypes.Date32,
	"date64:ms":    arrow.FixedWidthTypes.Date64,
}

var timeUnits = map[string]arrow.TimeUnit{"s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond}

var unitNames = map[arrow.TimeUnit]string{arrow.Second: "s", arrow.Millisecond: "ms", arrow.Microsecond: "us", arrow.Nanosecond: "ns"}

func logicalType(dt arrow.DataType) (string, int32, error) {
	for name, t := range primitiveTypes {
		if arrow.TypeEqual(t, dt) {
			switch dt.ID() {
			case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
				return name, EncodingVarBinary, nil
			case arrow.NULL:
				return name, EncodingNone, nil
			}
			return name, EncodingPlain, nil
		}
	}
	switch t := dt.(type) {
	case *arrow.TimestampType:
		tz := t.TimeZone
		if tz == "" {
			tz = "-"
		}
		return "timestamp:" + unitNames[t.Unit] + ":" + tz, EncodingPlain, nil
	case *arrow.FixedSizeListType:
		elem, _, err := logicalType(t.Elem())
		if err != nil {
			return "", 0, err
		}
		if _, ok := primitiveTypes[elem]; !ok || t.Elem().ID() == arrow.STRING || t.Elem().ID() == arrow.BINARY ||
			t.Elem().ID() == arrow.LARGE_STRING || t.Elem().ID() == arrow.LARGE_BINARY {
			return "", 0, fmt.Errorf("fixed_size_list of %s is not supported", t.Elem())
		}
		return fmt.Sprintf("fixed_size_list:%s:%d", elem, t.Len()), EncodingPlain, nil
	case *arrow.FixedSizeBinaryType:
		return fmt.Sprintf("fixed_size_binary:%d", t.ByteWidth), EncodingPlain, nil
	case *arrow.ListType:
		if t.Elem().ID() == arrow.STRUCT {
			return "list.struct", EncodingPlain, nil
		}
		return "list", EncodingPlain, nil
	case *arrow.LargeListType:
		if t.Elem().ID() == arrow.STRUCT {
			return "large_list.struct", EncodingPlain, nil
		}
		return "large_list", EncodingPlain, nil
	case *arrow.StructType:
		return "struct", EncodingNone, nil
	}
	return "", 0, fmt.Errorf("arrow type %s is not supported", dt)
}
