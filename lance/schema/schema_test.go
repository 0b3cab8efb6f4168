package schema

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func testArrowSchema() *arrow.Schema {
	pk := arrow.NewMetadata([]string{PrimaryKeyMeta}, []string{"true"})
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String, Metadata: pk},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "lb", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
		{Name: "d32", Type: arrow.FixedWidthTypes.Date32},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "vec", Type: arrow.FixedSizeListOfField(4, arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: true})},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "nums", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, func() *arrow.Metadata { m := arrow.NewMetadata([]string{"k"}, []string{"v"}); return &m }())
}

func TestArrowRoundTripAndIDs(t *testing.T) {
	as := testArrowSchema()
	s, err := FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	flat := s.Flatten()
	for i, f := range flat {
		if f.ID != int32(i) {
			t.Fatalf("field %s id %d, want pre-order %d", f.Name, f.ID, i)
		}
	}
	tags := s.Field("tags")
	if len(tags.Children) != 1 || tags.Children[0].ParentID != tags.ID || tags.Children[0].Name != "item" {
		t.Fatalf("list child wrong: %+v", tags.Children)
	}
	if !s.Field("id").UnenforcedPrimaryKey {
		t.Fatal("primary key flag not set from metadata")
	}
	wantLT := map[string]string{"id": "string", "ls": "large_string", "vec": "fixed_size_list:float:4", "ts": "timestamp:us:-",
		"d32": "date32:day", "d64": "date64:ms", "tags": "list", "f32": "float", "f64": "double", "b": "binary"}
	for n, lt := range wantLT {
		if got := s.Field(n).LogicalType; got != lt {
			t.Errorf("%s: logical type %q want %q", n, got, lt)
		}
	}
	back, err := s.ToArrow()
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(as) {
		t.Fatalf("round trip differs:\n%s\n%s", back, as)
	}
	if got, _ := back.Metadata().GetValue("k"); got != "v" {
		t.Fatalf("schema metadata lost")
	}
}

func TestWireRoundTrip(t *testing.T) {
	s, _ := FromArrow(testArrowSchema())
	b := EncodeSchemaMessage(s)
	s2, err := DecodeSchemaMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(EncodeSchemaMessage(s2), b) {
		t.Fatal("re-encoding differs")
	}
	a1, _ := s.ToArrow()
	a2, _ := s2.ToArrow()
	if !a1.Equal(a2) {
		t.Fatalf("decoded schema differs")
	}
}

func TestParentIDIsTenByteVarint(t *testing.T) {
	b := AppendField(nil, &Field{ID: 0, ParentID: -1, Name: "id", LogicalType: "int64", Encoding: EncodingPlain})
	want := []byte{0x12, 0x02, 'i', 'd', 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}
	if !bytes.HasPrefix(b, want) {
		t.Fatalf("got % x", b)
	}
}

func TestBuildRefusesOrphan(t *testing.T) {
	if _, err := Build([]*Field{{ID: 1, ParentID: 0, Name: "x"}}, nil); err == nil {
		t.Fatal("orphan accepted")
	}
	if _, err := Build([]*Field{{ID: 0, ParentID: 0, Name: "self"}}, nil); err == nil {
		t.Fatal("self-parented field accepted")
	}
	if _, err := Build([]*Field{{ID: 0, ParentID: -1}, {ID: 0, ParentID: -1}}, nil); err == nil {
		t.Fatal("duplicate id accepted")
	}
}

func TestUnsupportedTypes(t *testing.T) {
	for _, lt := range []string{"mystery", "fixed_size_list:float:0", "timestamp:xs:-", "list"} {
		f := &Field{Name: "x", LogicalType: lt}
		if _, err := f.ArrowType(); err == nil {
			t.Errorf("%q accepted", lt)
		}
	}
}
