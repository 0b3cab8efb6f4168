package file

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// testTypes are the types the writer must handle; every one is tested nullable and not.
func testTypes() []arrow.DataType {
	item := func(dt arrow.DataType) arrow.Field { return arrow.Field{Name: "item", Type: dt, Nullable: true} }
	t := []arrow.DataType{
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary,
		arrow.FixedWidthTypes.Boolean,
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
		arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64,
		arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64,
		&arrow.TimestampType{Unit: arrow.Second}, &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"},
		&arrow.TimestampType{Unit: arrow.Microsecond}, &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "America/New_York"},
		arrow.FixedSizeListOfField(4, item(arrow.PrimitiveTypes.Float32)),
		arrow.FixedSizeListOfField(2, item(arrow.PrimitiveTypes.Int64)),
		arrow.FixedSizeListOfField(3, item(arrow.FixedWidthTypes.Boolean)),
		arrow.FixedSizeListOfField(3, item(arrow.PrimitiveTypes.Uint8)),
		arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}),
	}
	for _, el := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Float32,
		arrow.FixedWidthTypes.Boolean, arrow.FixedWidthTypes.Date32} {
		t = append(t, arrow.ListOfField(item(el)), arrow.LargeListOfField(item(el)))
	}
	// items that may not be null
	t = append(t, arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int64}))
	return t
}

// testSchema has one nullable and one non-nullable column per test type, and its Lance form.
// Types are round-tripped through the Lance schema so that the data is built with exactly the
// types the reader returns (e.g. fixed size list items are nullable "item").
func testSchema(t testing.TB) (*schema.Schema, *arrow.Schema) {
	var fs []arrow.Field
	for i, dt := range testTypes() {
		fs = append(fs, arrow.Field{Name: fmt.Sprintf("c%d_null", i), Type: dt, Nullable: true},
			arrow.Field{Name: fmt.Sprintf("c%d", i), Type: dt})
	}
	return lanceSchema(t, arrow.NewSchema(fs, nil))
}

func lanceSchema(t testing.TB, as *arrow.Schema) (*schema.Schema, *arrow.Schema) {
	t.Helper()
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	back, err := s.ToArrow()
	if err != nil {
		t.Fatal(err)
	}
	return s, back
}

// randomRecord builds n rows of random data; nullRate applies to nullable fields at every level.
func randomRecord(mem memory.Allocator, as *arrow.Schema, n int, nullRate float64, seed int64) arrow.Record {
	rng := rand.New(rand.NewSource(seed))
	b := array.NewRecordBuilder(mem, as)
	defer b.Release()
	for i, f := range as.Fields() {
		for r := 0; r < n; r++ {
			appendRandom(rng, b.Field(i), f.Type, f.Nullable, nullRate)
		}
	}
	return b.NewRecord()
}

func appendRandom(rng *rand.Rand, b array.Builder, dt arrow.DataType, nullable bool, nullRate float64) {
	if nullable && rng.Float64() < nullRate {
		b.AppendNull()
		return
	}
	str := func() string {
		const letters = "abcdefghijklmnopqrstuvwxyzé"
		k := rng.Intn(12) // includes empty strings
		s := make([]rune, k)
		for i := range s {
			s[i] = []rune(letters)[rng.Intn(27)]
		}
		return string(s)
	}
	switch bb := b.(type) {
	case *array.StringBuilder:
		bb.Append(str())
	case *array.LargeStringBuilder:
		bb.Append(str())
	case *array.BinaryBuilder:
		bb.Append([]byte(str()))
	case *array.BooleanBuilder:
		bb.Append(rng.Intn(2) == 1)
	case *array.Int8Builder:
		bb.Append(int8(rng.Int()))
	case *array.Int16Builder:
		bb.Append(int16(rng.Int()))
	case *array.Int32Builder:
		bb.Append(int32(rng.Int()))
	case *array.Int64Builder:
		bb.Append(rng.Int63() - rng.Int63())
	case *array.Uint8Builder:
		bb.Append(uint8(rng.Int()))
	case *array.Uint16Builder:
		bb.Append(uint16(rng.Int()))
	case *array.Uint32Builder:
		bb.Append(rng.Uint32())
	case *array.Uint64Builder:
		bb.Append(rng.Uint64())
	case *array.Float32Builder:
		bb.Append(rng.Float32()*200 - 100)
	case *array.Float64Builder:
		bb.Append(rng.NormFloat64())
	case *array.Date32Builder:
		bb.Append(arrow.Date32(rng.Int31n(40000)))
	case *array.Date64Builder:
		bb.Append(arrow.Date64(rng.Int63n(1 << 42)))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(rng.Int63()))
	case *array.FixedSizeListBuilder:
		bb.Append(true)
		ft := dt.(*arrow.FixedSizeListType)
		for i := int32(0); i < ft.Len(); i++ {
			appendRandom(rng, bb.ValueBuilder(), ft.Elem(), true, nullRate/3)
		}
	case *array.ListBuilder:
		bb.Append(true)
		el := dt.(*arrow.ListType).ElemField()
		for k := rng.Intn(5); k > 0; k-- { // 0: an empty list
			appendRandom(rng, bb.ValueBuilder(), el.Type, el.Nullable, nullRate/3)
		}
	case *array.LargeListBuilder:
		bb.Append(true)
		el := dt.(*arrow.LargeListType).ElemField()
		for k := rng.Intn(5); k > 0; k-- {
			appendRandom(rng, bb.ValueBuilder(), el.Type, el.Nullable, nullRate/3)
		}
	case *array.StructBuilder:
		bb.Append(true)
		st := dt.(*arrow.StructType)
		for i, f := range st.Fields() {
			appendRandom(rng, bb.FieldBuilder(i), f.Type, f.Nullable, nullRate)
		}
	default:
		panic(fmt.Sprintf("appendRandom: no case for %T", b))
	}
}

// writeFile writes rec in batches of the given sizes (slices of rec, so arrays with offsets).
func writeFile(t testing.TB, s *schema.Schema, opts Options, rec arrow.Record, batches ...int) []byte {
	t.Helper()
	w, err := NewWriter(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(0)
	for _, n := range batches {
		part := rec.NewSlice(at, at+int64(n))
		err := w.Write(part)
		part.Release()
		if err != nil {
			t.Fatal(err)
		}
		at += int64(n)
	}
	if at < rec.NumRows() {
		part := rec.NewSlice(at, rec.NumRows())
		err := w.Write(part)
		part.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if w.NumRows() != rec.NumRows() {
		t.Fatalf("NumRows %d, wrote %d", w.NumRows(), rec.NumRows())
	}
	b, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustOpen(t testing.TB, b []byte) *Reader {
	t.Helper()
	r, err := Open(context.Background(), BytesSource(b), "test.lance")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readAll reads rows [off, off+n) of the given top-level fields by the file's own columns.
func readRange(t testing.TB, r *Reader, fields []*schema.Field, off, n int64, mem memory.Allocator) arrow.Record {
	t.Helper()
	rec, err := r.Read(context.Background(), fields, nil, off, n, mem)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// expectArrays checks got against want with array.Equal, after turning want's struct-level
// nulls into nulls of the struct's children: Lance 2.0 cannot store a null struct.
func expectArrays(t testing.TB, what string, want, got arrow.Array) {
	t.Helper()
	want = lanceView(want)
	defer want.Release()
	if !array.Equal(want, got) {
		ws, gs := fmt.Sprint(want), fmt.Sprint(got)
		for i := 0; i < len(ws) && i < len(gs); i++ {
			if ws[i] != gs[i] {
				lo := max(0, i-200)
				ws, gs = ws[lo:min(len(ws), i+200)], gs[lo:min(len(gs), i+200)]
				break
			}
		}
		t.Fatalf("%s: arrays differ (around the first difference)\nwant %v\n got %v", what, ws, gs)
	}
}

// lanceView returns arr as Lance 2.0 stores it (a new reference).
func lanceView(arr arrow.Array) arrow.Array {
	sa, ok := arr.(*array.Struct)
	if !ok {
		arr.Retain()
		return arr
	}
	kids := make([]arrow.Array, sa.NumField())
	names := make([]string, sa.NumField())
	for i := range kids {
		k := sa.Field(i)
		if sa.NullN() > 0 {
			k = withParentNulls(k, sa)
		} else {
			k.Retain()
		}
		kids[i] = lanceView(k)
		k.Release()
		names[i] = sa.DataType().(*arrow.StructType).Field(i).Name
	}
	fields := sa.DataType().(*arrow.StructType).Fields()
	out, err := array.NewStructArrayWithFields(kids, fields)
	if err != nil {
		panic(err)
	}
	for _, k := range kids {
		k.Release()
	}
	return out
}

func isFormatError(err error) bool {
	var fe *FormatError
	return errors.As(err, &fe)
}
