package file

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

func TestNewWriterRefusesTypes(t *testing.T) {
	s := &schema.Schema{Fields: []*schema.Field{
		{ID: 0, ParentID: -1, Name: "ok", LogicalType: "int64"},
		{ID: 1, ParentID: -1, Name: "weird", LogicalType: "decimal:128:10:2"},
	}}
	_, err := NewWriter(s, Options{})
	if err == nil || !strings.Contains(err.Error(), `"weird"`) {
		t.Fatalf("want an error naming the column, got %v", err)
	}
	s.Fields[1].LogicalType = "null"
	if _, err := NewWriter(s, Options{}); err == nil || !strings.Contains(err.Error(), `"weird"`) {
		t.Fatalf("null type: %v", err)
	}
	s.Fields[1].LogicalType = "fixed_size_list:string:3" // not a type the writer encodes
	if _, err := NewWriter(s, Options{}); err == nil || !strings.Contains(err.Error(), `"weird"`) {
		t.Fatalf("fsl of strings: %v", err)
	}
	if _, err := NewWriter(nil, Options{}); err == nil {
		t.Fatal("nil schema accepted")
	}
}

func TestWriteRefusesMismatchAndNulls(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.String}), Nullable: true},
	}, nil))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	w, err := NewWriter(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(idValid []bool, itemValid []bool) arrow.Record {
		ib := array.NewInt64Builder(mem)
		ib.AppendValues([]int64{1, 2, 3}, idValid)
		lb := array.NewListBuilderWithField(mem, as.Field(1).Type.(*arrow.ListType).ElemField())
		vb := lb.ValueBuilder().(*array.StringBuilder)
		for i := 0; i < 3; i++ {
			lb.Append(true)
			vb.AppendValues([]string{"a", "b"}, itemValid[2*i:2*i+2])
		}
		rec := array.NewRecord(as, []arrow.Array{ib.NewArray(), lb.NewArray()}, 3)
		rec.Column(0).Release()
		rec.Column(1).Release()
		ib.Release()
		lb.Release()
		return rec
	}
	all := []bool{true, true, true, true, true, true}
	rec := mk([]bool{true, false, true}, all)
	err = w.Write(rec)
	rec.Release()
	if err == nil || !strings.Contains(err.Error(), `"id"`) || !strings.Contains(err.Error(), "row 1") {
		t.Fatalf("null in non-nullable id: %v", err)
	}
	rec = mk(nil, []bool{true, true, true, true, true, false})
	err = w.Write(rec)
	rec.Release()
	if err == nil || !strings.Contains(err.Error(), `"tags.item"`) || !strings.Contains(err.Error(), "row 2") {
		t.Fatalf("null item in non-nullable items: %v", err)
	}
	// wrong type, wrong name, wrong nullability
	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}, as.Field(1)}, nil)
	ib := array.NewInt32Builder(mem)
	ib.AppendValues([]int32{1}, nil)
	lb := array.NewListBuilderWithField(mem, as.Field(1).Type.(*arrow.ListType).ElemField())
	lb.AppendNull()
	cols := []arrow.Array{ib.NewArray(), lb.NewArray()}
	ib.Release()
	lb.Release()
	for _, sch := range []*arrow.Schema{other,
		arrow.NewSchema([]arrow.Field{{Name: "idx", Type: arrow.PrimitiveTypes.Int32}, as.Field(1)}, nil),
		arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, as.Field(1)}, nil),
	} {
		rec := array.NewRecord(sch, cols, 1)
		if err := w.Write(rec); err == nil {
			t.Fatalf("schema %v accepted", sch)
		}
		rec.Release()
	}
	for _, c := range cols {
		c.Release()
	}
	if w.NumRows() != 0 {
		t.Fatalf("refused batches counted: %d rows", w.NumRows())
	}
	rec = mk(nil, all)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err == nil {
		t.Fatal("Write after Finish accepted")
	}
	if _, err := w.Finish(); err == nil {
		t.Fatal("second Finish accepted")
	}
}

func TestStructNullsGoToChildren(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil))
	sb := array.NewStructBuilder(memory.DefaultAllocator, as.Field(0).Type.(*arrow.StructType))
	for i := 0; i < 4; i++ {
		sb.Append(i != 2)
		if i == 2 {
			continue // arrow-go appends nulls to the children of a null struct
		}
		sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
		sb.FieldBuilder(1).(*array.StringBuilder).Append("x")
	}
	rec := buildRecord(as, sb.NewArray())
	defer rec.Release()
	r := mustOpen(t, writeFile(t, s, Options{}, rec))
	if r.NumColumns() != 3 {
		t.Fatalf("%d columns, want header + 2", r.NumColumns())
	}
	got := readRange(t, r, s.Fields, 0, 4, nil)
	defer got.Release()
	st := got.Column(0).(*array.Struct)
	if st.NullN() != 0 || !st.Field(0).IsNull(2) || !st.Field(1).IsNull(2) || st.Field(0).(*array.Int32).Value(3) != 3 {
		t.Fatalf("struct read back as %v", st)
	}
	// a struct null cannot be stored when the child may not be null
	s2, as2 := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}), Nullable: true},
	}, nil))
	sb2 := array.NewStructBuilder(memory.DefaultAllocator, as2.Field(0).Type.(*arrow.StructType))
	sb2.Append(false)
	rec2 := buildRecord(as2, sb2.NewArray())
	defer rec2.Release()
	w, _ := NewWriter(s2, Options{})
	if err := w.Write(rec2); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("struct null over non-nullable child: %v", err)
	}
}

func TestMissingColumnReadsNull(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil))
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 2, 3}, nil)
	rec := buildRecord(as, b.NewArray())
	defer rec.Release()
	r := mustOpen(t, writeFile(t, s, Options{}, rec))
	// the manifest knows a column added later: id 1, a list of strings, nowhere in this file
	added := &schema.Field{ID: 1, ParentID: -1, Name: "later", LogicalType: "list", Nullable: true,
		Children: []*schema.Field{{ID: 2, ParentID: 1, Name: "item", LogicalType: "string", Nullable: true}}}
	column := func(id int32) (int, bool) { return 0, id == 0 }
	got, err := r.Read(context.Background(), []*schema.Field{added, s.Fields[0]}, column, 1, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if got.Column(0).NullN() != 2 || got.Column(0).DataType().ID() != arrow.LIST || got.Column(1).(*array.Int64).Value(0) != 2 {
		t.Fatalf("read %v", got)
	}
	// a mapping to a column the file does not have is an error, not a panic
	_, err = r.Read(context.Background(), s.Fields, func(int32) (int, bool) { return 5, true }, 0, 3, nil)
	if !isFormatError(err) {
		t.Fatalf("column out of range: %v", err)
	}
	if _, err := r.Read(context.Background(), s.Fields, nil, 2, 2, nil); err == nil {
		t.Fatal("range past the end accepted")
	}
}

func TestEmptyFile(t *testing.T) {
	s, _ := testSchema(t)
	w, err := NewWriter(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, b)
	got := readRange(t, r, s.Fields, 0, 0, nil)
	defer got.Release()
	if r.NumRows() != 0 || got.NumRows() != 0 || got.NumCols() != int64(len(s.Fields)) {
		t.Fatalf("empty file: %d rows, read %d x %d", r.NumRows(), got.NumRows(), got.NumCols())
	}
}

func TestPagesSplit(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
	}, nil))
	rec := randomRecord(memory.DefaultAllocator, as, 1000, 0, 9)
	defer rec.Release()
	r := mustOpen(t, writeFile(t, s, Options{MaxPageRows: 100}, rec, 10, 333))
	for i, c := range r.cols {
		for j, p := range c.pages {
			if p.rows > 100 {
				t.Fatalf("column %d page %d has %d rows", i, j, p.rows)
			}
		}
	}
	if n := len(r.cols[3].pages); n != 10 {
		t.Fatalf("float column has %d pages, want 10", n)
	}
	// byte limit: ~1 KiB pages of float64 hold 128 values
	r = mustOpen(t, writeFile(t, s, Options{MaxPageBytes: 1024}, rec))
	for _, p := range r.cols[3].pages[:len(r.cols[3].pages)-1] {
		if p.rows < 100 || p.rows > 128 {
			t.Fatalf("1 KiB float page of %d rows", p.rows)
		}
	}
	// the items of a list page are flushed with it, as lance does
	for _, p := range r.cols[1].pages {
		if p.rows == 0 {
			t.Fatal("empty list page")
		}
	}
}

// TestStringsWithoutValueBuffer: Arrow allows a string array of empty strings and nulls to have
// no value buffer at all.
func TestStringsWithoutValueBuffer(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, 0, 0, 0}))
	data := array.NewData(arrow.BinaryTypes.String, 3, []*memory.Buffer{memory.NewBufferBytes([]byte{0b101}), offsets, nil}, nil, 1, 0)
	arr := array.MakeFromData(data)
	data.Release()
	rec := buildRecord(as, arr)
	defer rec.Release()
	got := readRange(t, mustOpen(t, writeFile(t, s, Options{}, rec)), s.Fields, 0, 3, nil)
	defer got.Release()
	expectArrays(t, "s", rec.Column(0), got.Column(0))
}
