package pg

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Scalar is a base scalar type of the schema language. Its value is the
// source (and SchemaIR) spelling.
type Scalar string

// The scalar types of the `.pg` language.
const (
	String   Scalar = "String"
	Bool     Scalar = "Bool"
	I32      Scalar = "I32"
	I64      Scalar = "I64"
	U32      Scalar = "U32"
	U64      Scalar = "U64"
	F32      Scalar = "F32"
	F64      Scalar = "F64"
	Date     Scalar = "Date"
	DateTime Scalar = "DateTime"
	Blob     Scalar = "Blob"
	Vector   Scalar = "Vector" // Vector(N): PropType.VectorDim holds N
)

// MaxVectorDim is the largest Vector dimension (Arrow FixedSizeList uses i32).
const MaxVectorDim = math.MaxInt32

var baseScalars = map[string]Scalar{
	"String": String, "Bool": Bool, "I32": I32, "I64": I64, "U32": U32, "U64": U64,
	"F32": F32, "F64": F64, "Date": Date, "DateTime": DateTime, "Blob": Blob,
}

// IsNumeric reports whether @range applies to the scalar.
func (s Scalar) IsNumeric() bool {
	switch s {
	case I32, I64, U32, U64, F32, F64:
		return true
	}
	return false
}

// PropType is the type of one property.
type PropType struct {
	Scalar    Scalar
	VectorDim uint32 // only for Vector
	Nullable  bool
	List      bool
	// EnumValues is non-nil for enum(...) types (Scalar is String), sorted and
	// de-duplicated.
	EnumValues []string
}

// IsEnum reports whether the type is an enum.
func (t PropType) IsEnum() bool { return t.EnumValues != nil }

// IsVector reports whether the type is Vector(N).
func (t PropType) IsVector() bool { return t.Scalar == Vector }

// IsBlob reports whether the type is Blob.
func (t PropType) IsBlob() bool { return t.Scalar == Blob }

// Equal compares two property types exactly (nullability and enum values
// included).
func (t PropType) Equal(o PropType) bool {
	return t.Scalar == o.Scalar && t.VectorDim == o.VectorDim && t.Nullable == o.Nullable &&
		t.List == o.List && (t.EnumValues == nil) == (o.EnumValues == nil) &&
		slices.Equal(t.EnumValues, o.EnumValues)
}

func (t PropType) scalarName() string {
	if t.Scalar == Vector {
		return fmt.Sprintf("Vector(%d)", t.VectorDim)
	}
	return string(t.Scalar)
}

// String renders the type the way the schema language spells it, e.g.
// `[String]?`, `enum(a, b)`, `Vector(768)`.
func (t PropType) String() string {
	s := t.scalarName()
	if t.EnumValues != nil {
		s = "enum(" + strings.Join(t.EnumValues, ", ") + ")"
	}
	if t.List {
		s = "[" + s + "]"
	}
	if t.Nullable {
		s += "?"
	}
	return s
}

// ArrowType maps the type to Arrow: enums are Utf8, Vector(N) is
// FixedSizeList<Float32 (nullable item), N>, lists are List<T (nullable
// item)>, Blob is the compiler form LargeBinary (physically a Lance blob-v2
// column; the storage layer owns that conversion).
func (t PropType) ArrowType() arrow.DataType {
	var dt arrow.DataType
	switch t.Scalar {
	case String:
		dt = arrow.BinaryTypes.String
	case Bool:
		dt = arrow.FixedWidthTypes.Boolean
	case I32:
		dt = arrow.PrimitiveTypes.Int32
	case I64:
		dt = arrow.PrimitiveTypes.Int64
	case U32:
		dt = arrow.PrimitiveTypes.Uint32
	case U64:
		dt = arrow.PrimitiveTypes.Uint64
	case F32:
		dt = arrow.PrimitiveTypes.Float32
	case F64:
		dt = arrow.PrimitiveTypes.Float64
	case Date:
		dt = arrow.FixedWidthTypes.Date32
	case DateTime:
		dt = arrow.FixedWidthTypes.Date64
	case Blob:
		dt = arrow.BinaryTypes.LargeBinary
	case Vector:
		dt = arrow.FixedSizeListOfField(int32(t.VectorDim),
			arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: true})
	default:
		panic("pg: unknown scalar " + string(t.Scalar))
	}
	if t.List {
		return arrow.ListOfField(arrow.Field{Name: "item", Type: dt, Nullable: true})
	}
	return dt
}

func (t PropType) json() jv {
	var scalar jv = string(t.Scalar)
	if t.Scalar == Vector {
		scalar = obj("Vector", uint64(t.VectorDim))
	}
	var enum jv
	if t.EnumValues != nil {
		enum = strs(t.EnumValues)
	}
	return obj("scalar", scalar, "nullable", t.Nullable, "list", t.List, "enum_values", enum)
}

func propTypeFromJSON(raw rawPropType) (PropType, error) {
	t := PropType{Nullable: raw.Nullable, List: raw.List, EnumValues: raw.EnumValues}
	switch {
	case raw.Scalar.Name != "":
		s, ok := baseScalars[raw.Scalar.Name]
		if !ok {
			return t, invalidIR("unknown scalar type %q", raw.Scalar.Name)
		}
		t.Scalar = s
	case raw.Scalar.Vector != nil:
		d := *raw.Scalar.Vector
		if d == 0 || d > MaxVectorDim {
			return t, invalidIR("invalid Vector dimension %d", d)
		}
		t.Scalar, t.VectorDim = Vector, uint32(d)
	default:
		return t, invalidIR("property type has no scalar")
	}
	if t.EnumValues != nil && (t.Scalar != String || t.List) {
		return t, invalidIR("enum values on a non-String or list type")
	}
	return t, nil
}
