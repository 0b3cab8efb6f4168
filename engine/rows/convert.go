package rows

import (
	"encoding/base64"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// column converts one property's JSON values, row by row, into an Arrow builder of the
// property's exact Arrow type. Messages are the reference's strict-load texts
// (docs/omnigraph-format.md §5.4).
type column struct {
	prop    *pg.Property
	field   string // "data.<name>"
	key     bool   // an @key member
	b       array.Builder
	scratch []float32 // vector elements, validated before they are appended
}

func newColumn(mem memory.Allocator, p *pg.Property, key bool) *column {
	return &column{prop: p, field: "data." + p.Name, key: key, b: array.NewBuilder(mem, p.Type.ArrowType())}
}

// cellError refuses one value: sub is appended to the column's field (e.g. "[2]").
type cellError struct {
	sub    string
	reason string
}

func refuse(format string, args ...any) *cellError {
	return &cellError{reason: fmt.Sprintf(format, args...)}
}

// arrowName is the Arrow type name the reference prints in "expects <T>" (Rust's Debug of
// the Arrow DataType).
func arrowName(s pg.Scalar) string {
	switch s {
	case pg.String:
		return "Utf8"
	case pg.Bool:
		return "Boolean"
	case pg.I32:
		return "Int32"
	case pg.I64:
		return "Int64"
	case pg.U32:
		return "UInt32"
	case pg.U64:
		return "UInt64"
	case pg.F32:
		return "Float32"
	case pg.F64:
		return "Float64"
	case pg.Date:
		return "Date32"
	case pg.DateTime:
		return "Date64"
	}
	return string(s)
}

// appendCell converts one value; present is false when the data member is absent.
func (c *column) appendCell(raw []byte, present bool) *cellError {
	t, name := c.prop.Type, c.prop.Name
	raw = trimWS(raw)
	k := kindOf(raw)
	if !present || k == jNull {
		switch {
		case t.Nullable:
			c.b.AppendNull()
			return nil
		case t.IsVector():
			return refuse("non-nullable vector property '%s' has null values", name)
		case t.IsBlob():
			return refuse("non-nullable blob property '%s' has null values", name)
		}
		return refuse("non-nullable property '%s' has null or invalid values", name)
	}
	switch {
	case t.IsVector():
		return c.appendVector(raw, k)
	case t.List:
		return c.appendList(raw, k)
	case t.IsBlob():
		return c.appendBlob(raw, k)
	}
	return appendScalar(c.b, t.Scalar, raw, k, cellCtx{name: name})
}

func (c *column) appendVector(raw []byte, k jkind) *cellError {
	name, dim := c.prop.Name, int(c.prop.Type.VectorDim)
	if k != jArray {
		return refuse("vector property '%s' expects a JSON array, got %s", name, raw)
	}
	n := 0
	if err := eachItem(raw, func(int, []byte) error { n++; return nil }); err != nil {
		return refuse("vector property '%s' expects a JSON array, got %s", name, raw)
	}
	if n != dim {
		return refuse("vector property '%s' expects %d dimensions, got %d", name, dim, n)
	}
	c.scratch = c.scratch[:0]
	var bad *cellError
	_ = eachItem(raw, func(i int, item []byte) error {
		num, ok := jnum{}, kindOf(item) == jNumber
		if ok {
			num, ok = parseNumber(item)
		}
		if !ok {
			bad = &cellError{sub: fmt.Sprintf("[%d]", i), reason: fmt.Sprintf("vector property '%s' elements must be numeric, got %s", name, item)}
			return errMalformed
		}
		f, e := checkF32(num.asF64(), "vector element")
		if e != nil {
			e.sub, bad = fmt.Sprintf("[%d]", i), e
			return errMalformed
		}
		c.scratch = append(c.scratch, f)
		return nil
	})
	if bad != nil {
		return bad
	}
	fb := c.b.(*array.FixedSizeListBuilder)
	fb.Append(true)
	fb.ValueBuilder().(*array.Float32Builder).AppendValues(c.scratch, nil)
	return nil
}

func (c *column) appendList(raw []byte, k jkind) *cellError {
	name := c.prop.Name
	if k != jArray {
		return refuse("list property '%s' expects a JSON array, got %s", name, raw)
	}
	lb := c.b.(*array.ListBuilder)
	lb.Append(true)
	vb := lb.ValueBuilder()
	ctx := cellCtx{name: name, item: true}
	var bad *cellError
	err := eachItem(raw, func(i int, item []byte) error {
		ik := kindOf(item)
		var e *cellError
		if ik == jNull {
			e = ctx.mismatch(c.prop.Type.Scalar, item)
		} else {
			e = appendScalar(vb, c.prop.Type.Scalar, item, ik, ctx)
		}
		if e != nil {
			e.sub, bad = fmt.Sprintf("[%d]", i), e
			return errMalformed
		}
		return nil
	})
	if bad != nil {
		return bad
	}
	if err != nil {
		return refuse("list property '%s' expects a JSON array, got %s", name, raw)
	}
	return nil
}

func (c *column) appendBlob(raw []byte, k jkind) *cellError {
	name := c.prop.Name
	s, err := decodeString(raw)
	if k != jString || err != nil {
		return refuse("blob property '%s' must be a URI string or base64: prefixed data", name)
	}
	enc, ok := strings.CutPrefix(s, "base64:")
	if !ok {
		// The worker writes managed blobs only: an external reference needs a graph's
		// ExternalBlobPolicy, which the direct-store path never has (docs/omnigraph-format.md §5.4).
		return refuse("external blob URI '%s' is not allowed", s)
	}
	if strings.ContainsAny(enc, "\r\n") { // Go's decoder would skip them; the reference refuses
		return refuse("invalid base64 blob data: line breaks are not base64")
	}
	data, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return refuse("invalid base64 blob data: %v", err)
	}
	c.b.(*array.BinaryBuilder).Append(data)
	return nil
}

// cellCtx words the messages of a scalar property value or of a list item.
type cellCtx struct {
	name string
	item bool
}

func (x cellCtx) mismatch(s pg.Scalar, raw []byte) *cellError {
	if x.item {
		return refuse("strict list property '%s' contains a null or invalid item", x.name)
	}
	return refuse("strict property '%s' expects %s, got %s", x.name, arrowName(s), raw)
}

func (x cellCtx) outOfRange(value any, s pg.Scalar) *cellError {
	if x.item {
		return refuse("list value %v exceeds %s range", value, arrowName(s))
	}
	return refuse("property '%s' value %v exceeds %s range", x.name, value, arrowName(s))
}

// f32Context is the reference's checked_json_f32 context: "property 'p'" or, for a list
// item, "list value" (which yields its "list value value V exceeds Float32 range").
func (x cellCtx) f32Context() string {
	if x.item {
		return "list value"
	}
	return "property '" + x.name + "'"
}

// f32Overflow is MaxFloat32 plus half an ulp: from there on, round-to-nearest-even
// narrowing gives ±Inf.
var f32Overflow = math.MaxFloat32 + math.Ldexp(1, 103)

// checkF32 narrows a JSON number to Float32 the reference's way: judged after rounding,
// so the shortest spelling of MaxFloat32 is accepted.
func checkF32(v float64, context string) (float32, *cellError) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, refuse("%s value %s must be finite for Float32", context, rustFloat(v))
	}
	if math.Abs(v) >= f32Overflow {
		return 0, refuse("%s value %s exceeds Float32 range", context, rustFloat(v))
	}
	return float32(v), nil
}

// appendScalar converts one non-null base-scalar value into b.
func appendScalar(b array.Builder, s pg.Scalar, raw []byte, k jkind, x cellCtx) *cellError {
	var num jnum
	if k == jNumber {
		var ok bool
		if num, ok = parseNumber(raw); !ok {
			return x.mismatch(s, raw)
		}
	}
	switch s {
	case pg.String:
		if k != jString || len(raw) < 2 {
			return x.mismatch(s, raw)
		}
		body := raw[1 : len(raw)-1]
		sb := b.(*array.StringBuilder)
		if raw[len(raw)-1] == '"' && !containsBackslash(body) && utf8.Valid(body) {
			sb.BinaryBuilder.Append(body)
			return nil
		}
		str, err := decodeString(raw)
		if err != nil {
			return x.mismatch(s, raw)
		}
		sb.Append(str)
	case pg.Bool:
		switch string(raw) {
		case "true":
			b.(*array.BooleanBuilder).Append(true)
		case "false":
			b.(*array.BooleanBuilder).Append(false)
		default:
			return x.mismatch(s, raw)
		}
	case pg.I32:
		if k != jNumber {
			return x.mismatch(s, raw)
		}
		if v, ok := num.asI64(); ok {
			if v < math.MinInt32 || v > math.MaxInt32 {
				return x.outOfRange(v, s)
			}
			b.(*array.Int32Builder).Append(int32(v))
		} else if v, ok := num.asU64(); ok {
			return x.outOfRange(v, s)
		} else {
			return x.mismatch(s, raw)
		}
	case pg.I64:
		if k != jNumber {
			return x.mismatch(s, raw)
		}
		if v, ok := num.asI64(); ok {
			b.(*array.Int64Builder).Append(v)
		} else if v, ok := num.asU64(); ok {
			return x.outOfRange(v, s)
		} else {
			return x.mismatch(s, raw)
		}
	case pg.U32:
		if k != jNumber {
			return x.mismatch(s, raw)
		}
		if v, ok := num.asU64(); ok {
			if v > math.MaxUint32 {
				return x.outOfRange(v, s)
			}
			b.(*array.Uint32Builder).Append(uint32(v))
		} else if v, ok := num.asI64(); ok {
			return x.outOfRange(v, s)
		} else {
			return x.mismatch(s, raw)
		}
	case pg.U64:
		if k != jNumber {
			return x.mismatch(s, raw)
		}
		if v, ok := num.asU64(); ok {
			b.(*array.Uint64Builder).Append(v)
		} else if v, ok := num.asI64(); ok {
			return x.outOfRange(v, s)
		} else {
			return x.mismatch(s, raw)
		}
	case pg.F32:
		if k != jNumber {
			return x.mismatch(s, raw)
		}
		f, e := checkF32(num.asF64(), x.f32Context())
		if e != nil {
			return e
		}
		b.(*array.Float32Builder).Append(f)
	case pg.F64:
		if k != jNumber {
			return x.mismatch(s, raw)
		}
		b.(*array.Float64Builder).Append(num.asF64())
	case pg.Date:
		return appendDate(b.(*array.Date32Builder), raw, k, num, x)
	case pg.DateTime:
		return appendDateTime(b.(*array.Date64Builder), raw, k, num, x)
	default:
		return x.mismatch(s, raw)
	}
	return nil
}

func containsBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// appendDate: integer epoch days, or an ISO YYYY-MM-DD string (docs/omnigraph-format.md §5.4).
func appendDate(b *array.Date32Builder, raw []byte, k jkind, num jnum, x cellCtx) *cellError {
	switch k {
	case jNumber:
		if v, ok := num.asI64(); ok {
			if v < math.MinInt32 || v > math.MaxInt32 {
				return refuse("Date value out of range: %d", v)
			}
			b.Append(arrow.Date32(v))
			return nil
		}
		if v, ok := num.asU64(); ok {
			return refuse("Date value out of range: %d", v)
		}
	case jString:
		if len(raw) >= 2 && !containsBackslash(raw[1:len(raw)-1]) {
			if days, ok := parseISODate(raw[1 : len(raw)-1]); ok { // the common case, without a copy
				b.Append(arrow.Date32(days))
				return nil
			}
		}
		s, err := decodeString(raw)
		if err != nil {
			return x.mismatch(pg.Date, raw)
		}
		days, ok := parseISODate(s)
		if !ok {
			return refuse("invalid Date literal '%s'", s)
		}
		b.Append(arrow.Date32(days))
		return nil
	}
	return x.mismatch(pg.Date, raw)
}

// appendDateTime: integer epoch milliseconds, or an RFC 3339 string (docs/omnigraph-format.md §5.4).
func appendDateTime(b *array.Date64Builder, raw []byte, k jkind, num jnum, x cellCtx) *cellError {
	switch k {
	case jNumber:
		if v, ok := num.asI64(); ok {
			b.Append(arrow.Date64(v))
			return nil
		}
		if v, ok := num.asU64(); ok {
			return refuse("DateTime value out of range: %d", v)
		}
	case jString:
		s, err := decodeString(raw)
		if err != nil {
			return x.mismatch(pg.DateTime, raw)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return refuse("invalid DateTime literal '%s'", s)
		}
		b.Append(arrow.Date64(t.UnixMilli()))
		return nil
	}
	return x.mismatch(pg.DateTime, raw)
}

// parseISODate reads exactly YYYY-MM-DD (a real calendar day) as days since 1970-01-01.
func parseISODate[T string | []byte](s T) (int32, bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	num := func(part T) (int, bool) {
		n := 0
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return 0, false
			}
			n = n*10 + int(part[i]-'0')
		}
		return n, true
	}
	y, ok1 := num(s[:4])
	m, ok2 := num(s[5:7])
	d, ok3 := num(s[8:])
	if !ok1 || !ok2 || !ok3 {
		return 0, false
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Year() != y || int(t.Month()) != m || t.Day() != d {
		return 0, false
	}
	return int32(t.Unix() / 86400), true
}
