package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// Byte-level checks against the facts of lance-format.md §6 (observed from lance 8.0).

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildRecord makes a one-batch record from arrays (taking ownership of them).
func buildRecord(as *arrow.Schema, cols ...arrow.Array) arrow.Record {
	rec := array.NewRecord(as, cols, int64(cols[0].Len()))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// pageBytes returns a written page's encoding, buffers (as stored in the file) and row count.
func pageBytes(t testing.TB, file []byte, r *Reader, col, page int) (enc []byte, bufs [][]byte, rows uint64, offs []uint64) {
	t.Helper()
	p := r.cols[col].pages[page]
	for i, off := range p.offsets {
		bufs = append(bufs, file[off:off+p.sizes[i]])
	}
	return p.encoding, bufs, p.rows, p.offsets
}

func u64s(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func expectHex(t testing.TB, what string, want string, got []byte) {
	t.Helper()
	if w := unhex(t, want); !bytes.Equal(w, got) {
		t.Fatalf("%s:\nwant % x\n got % x", what, w, got)
	}
}

// TestWorkedExampleLayout writes the first five columns of the t20 example (§6.4) and checks
// encodings, buffers and their positions byte for byte.
func TestWorkedExampleLayout(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "opt", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil))
	mem := memory.DefaultAllocator
	ib := array.NewInt64Builder(mem)
	ib.AppendValues([]int64{0, 1, 2, 3, 4}, nil)
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{"name0", "", "name2", "name3", ""}, []bool{true, false, true, true, false})
	fb := array.NewFloat32Builder(mem)
	fb.AppendValues([]float32{0.5, 1.5, 2.5, 3.5, 4.5}, nil)
	bb := array.NewBooleanBuilder(mem)
	bb.AppendValues([]bool{true, false, true, false, true}, nil)
	ob := array.NewInt32Builder(mem)
	ob.AppendValues([]int32{0, 1, 0, 3, 0}, []bool{false, true, false, true, false})
	rec := buildRecord(as, ib.NewArray(), sb.NewArray(), fb.NewArray(), bb.NewArray(), ob.NewArray())
	defer rec.Release()
	file := writeFile(t, s, Options{}, rec)
	r := mustOpen(t, file)

	enc, bufs, rows, offs := pageBytes(t, file, r, 0, 0)
	expectHex(t, "int64 no-null encoding", "12 0a 0a 08 0a 06 0a 04 08 40 12 00", enc)
	if rows != 5 || offs[0] != 0 || !bytes.Equal(bufs[0], u64s(0, 1, 2, 3, 4)) {
		t.Fatalf("int64 page: rows %d offsets %v buffer % x", rows, offs, bufs[0])
	}

	enc, bufs, _, offs = pageBytes(t, file, r, 1, 0)
	// binary{indices nullable.no_nulls.flat64 (buffer 0), bytes flat8 (buffer 1), null_adjustment 16}
	expectHex(t, "string encoding", "32 1a 0a 0c 12 0a 0a 08 0a 06 0a 04 08 40 12 00 12 08 0a 06 08 08 12 02 08 01 18 10", enc)
	if !bytes.Equal(bufs[0], u64s(5, 21, 10, 15, 31)) || string(bufs[1]) != "name0name2name3" {
		t.Fatalf("string buffers % x / %q", bufs[0], bufs[1])
	}
	if offs[0] != 64 || offs[1] != 128 {
		t.Fatalf("string buffers at %v, lance puts them at 64 and 128", offs)
	}

	_, _, _, offs = pageBytes(t, file, r, 2, 0)
	if offs[0] != 192 {
		t.Fatalf("float buffer at %v, want 192", offs)
	}
	enc, bufs, _, offs = pageBytes(t, file, r, 3, 0)
	expectHex(t, "bool encoding", "12 0a 0a 08 0a 06 0a 04 08 01 12 00", enc)
	if offs[0] != 256 || !bytes.Equal(bufs[0], []byte{0x15}) {
		t.Fatalf("bool buffer at %v: % x, want 0x15 at 256", offs, bufs[0])
	}
	enc, bufs, _, offs = pageBytes(t, file, r, 4, 0)
	expectHex(t, "int32 some-null encoding", "12 14 12 12 0a 06 0a 04 08 01 12 00 12 08 0a 06 08 20 12 02 08 01", enc)
	if offs[0] != 320 || offs[1] != 384 || !bytes.Equal(bufs[0], []byte{0x0a}) || len(bufs[1]) != 20 {
		t.Fatalf("int32 buffers at %v: % x / %d bytes", offs, bufs[0], len(bufs[1]))
	}
	// global buffer 0 follows the data, 64-aligned, before the column metadata
	gb0 := binary.LittleEndian.Uint64(file[len(file)-footerSize-16:])
	if gb0 != 448 {
		t.Fatalf("file descriptor at %d, want 448", gb0)
	}
}

func TestFooterAndColumnEncoding(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil))
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{7}, nil)
	rec := buildRecord(as, b.NewArray())
	defer rec.Release()
	file := writeFile(t, s, Options{}, rec)
	ft := file[len(file)-footerSize:]
	if string(ft[36:]) != "LANC" || binary.LittleEndian.Uint16(ft[32:]) != 0 || binary.LittleEndian.Uint16(ft[34:]) != 3 {
		t.Fatalf("footer % x: want major 0 minor 3 LANC", ft)
	}
	f := parseFooter(ft)
	if f.numGlobalBuffers != 1 || f.numColumns != 1 {
		t.Fatalf("footer %+v", f)
	}
	// ColumnMetadata.encoding = direct Any{"/lance.encodings.ColumnEncoding", 0a 00}
	cm := file[f.columnMetaStart:f.cmoStart]
	var colEnc []byte
	pb.Walk(cm, func(x pb.Field) error {
		if x.Num == 1 {
			colEnc = x.Bytes
		}
		return nil
	})
	url, value, err := parseDirect(colEnc)
	if err != nil || url != "/lance.encodings.ColumnEncoding" || !bytes.Equal(value, []byte{0x0a, 0x00}) {
		t.Fatalf("column encoding %q % x %v", url, value, err)
	}
	// the page's Any carries the ArrayEncoding type URL
	if !bytes.Contains(cm, []byte("/lance.encodings.ArrayEncoding")) {
		t.Fatalf("page encoding type URL missing")
	}
	// the file descriptor: schema then length
	gb0 := binary.LittleEndian.Uint64(file[f.gboStart:])
	desc := file[gb0:f.columnMetaStart]
	ds, rows, err := parseFileDescriptor(desc)
	if err != nil || rows != 1 || ds.Fields[0].Name != "x" || ds.Fields[0].ParentID != -1 {
		t.Fatalf("file descriptor: %v rows %d %+v", err, rows, ds)
	}
	if gb0%64 != 0 {
		t.Fatalf("file descriptor at %d, not after padded buffers", gb0)
	}
}

func TestFixedSizeListBytes(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "vec", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)},
		{Name: "vn", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil))
	mem := memory.DefaultAllocator
	vb := array.NewFixedSizeListBuilderWithField(mem, 4, as.Field(0).Type.(*arrow.FixedSizeListType).ElemField())
	nb := array.NewFixedSizeListBuilderWithField(mem, 2, as.Field(1).Type.(*arrow.FixedSizeListType).ElemField())
	for i := 0; i < 5; i++ {
		vb.Append(true)
		for j := 0; j < 4; j++ {
			vb.ValueBuilder().(*array.Float32Builder).Append(float32(i*4 + j))
		}
		if i == 1 || i == 3 {
			nb.AppendNull()
			continue
		}
		nb.Append(true)
		nb.ValueBuilder().(*array.Float32Builder).Append(float32(i))
		if i == 4 {
			nb.ValueBuilder().(*array.Float32Builder).AppendNull()
		} else {
			nb.ValueBuilder().(*array.Float32Builder).Append(float32(-i))
		}
	}
	rec := buildRecord(as, vb.NewArray(), nb.NewArray())
	defer rec.Release()
	file := writeFile(t, s, Options{}, rec)
	r := mustOpen(t, file)
	enc, bufs, _, _ := pageBytes(t, file, r, 0, 0)
	expectHex(t, "fsl encoding", "12 16 0a 14 0a 12 1a 10 08 04 12 0c 12 0a 0a 08 0a 06 0a 04 08 20 12 00", enc)
	if len(bufs) != 1 || len(bufs[0]) != 80 {
		t.Fatalf("fsl buffers: %d, first %d bytes", len(bufs), len(bufs[0]))
	}
	// null rows: some_nulls{validity buf 0, fixed_size_list{2, some_nulls{validity buf 1, flat32 buf 2}}}
	enc, bufs, _, _ = pageBytes(t, file, r, 1, 0)
	want := encSomeNulls(encFlat(1, 0), encFSL(2, encSomeNulls(encFlat(1, 1), encFlat(32, 2))))
	if !bytes.Equal(enc, want) {
		t.Fatalf("fsl with nulls: % x, want % x", enc, want)
	}
	// rows 1 and 3 null; item validity: row items null with their rows, and item 9 (row 4) null
	if !bytes.Equal(bufs[0], []byte{0x15}) || !bytes.Equal(bufs[1], []byte{0x33, 0x01}) || len(bufs[2]) != 40 {
		t.Fatalf("fsl validity % x / % x, values %d bytes", bufs[0], bufs[1], len(bufs[2]))
	}
	got := readRange(t, r, s.Fields, 0, 5, nil)
	defer got.Release()
	for i := range s.Fields {
		expectArrays(t, s.Fields[i].Name, rec.Column(i), got.Column(i))
	}
}

func TestListBytes(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil))
	lb := array.NewListBuilderWithField(memory.DefaultAllocator, as.Field(0).Type.(*arrow.ListType).ElemField())
	vb := lb.ValueBuilder().(*array.StringBuilder)
	lb.Append(true) // []
	lb.Append(true)
	vb.Append("t1")
	lb.Append(true)
	vb.AppendValues([]string{"t2", "u2"}, nil)
	lb.AppendNull()
	lb.Append(true)
	vb.Append("t4")
	rec := buildRecord(as, lb.NewArray())
	defer rec.Release()
	file := writeFile(t, s, Options{}, rec)
	r := mustOpen(t, file)
	if r.NumColumns() != 2 {
		t.Fatalf("%d columns, want list + items", r.NumColumns())
	}
	enc, bufs, rows, _ := pageBytes(t, file, r, 0, 0)
	// list{offsets nullable.no_nulls.flat64, null_offset_adjustment 5, num_items 4}
	expectHex(t, "list encoding", "22 12 0a 0c 12 0a 0a 08 0a 06 0a 04 08 40 12 00 10 05 18 04", enc)
	if rows != 5 || !bytes.Equal(bufs[0], u64s(0, 1, 3, 8, 4)) {
		t.Fatalf("list offsets % x rows %d", bufs[0], rows)
	}
	enc, bufs, rows, _ = pageBytes(t, file, r, 1, 0)
	if rows != 4 || string(bufs[1]) != "t1t2u2t4" || !bytes.Contains(enc, []byte{0x18, 0x09}) {
		t.Fatalf("items page: rows %d bytes %q encoding % x (want null_adjustment 9)", rows, bufs[1], enc)
	}
	got := readRange(t, r, s.Fields, 0, 5, nil)
	defer got.Release()
	expectArrays(t, "tags", rec.Column(0), got.Column(0))
}

// TestNullListWithItems: Arrow lets a null list span items; lance's writer keeps them (the null's
// end advances), this writer drops them. Both must read back as the same null.
func TestNullListWithItems(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil))
	mem := memory.DefaultAllocator
	vb := array.NewInt32Builder(mem)
	vb.AppendValues([]int32{1, 2, 3, 4, 5, 6}, nil)
	values := vb.NewArray()
	defer values.Release()
	offsets := arrow.Int32Traits.CastToBytes([]int32{0, 2, 4, 6})
	valid := []byte{0b101}
	data := array.NewData(as.Field(0).Type, 3, []*memory.Buffer{memory.NewBufferBytes(valid), memory.NewBufferBytes(offsets)},
		[]arrow.ArrayData{values.Data()}, 1, 0)
	list := array.MakeFromData(data)
	data.Release()
	rec := buildRecord(as, list)
	defer rec.Release()
	file := writeFile(t, s, Options{}, rec)
	r := mustOpen(t, file)
	_, bufs, _, _ := pageBytes(t, file, r, 0, 0)
	if !bytes.Equal(bufs[0], u64s(2, 2+5, 4)) {
		t.Fatalf("offsets % x, want 2, 7, 4 (A=5)", bufs[0])
	}
	got := readRange(t, r, s.Fields, 0, 3, nil)
	defer got.Release()
	expectArrays(t, "l", rec.Column(0), got.Column(0))

	// the same rows as lance writes them: the null list keeps its two items
	lanceFile := rawFile(t, s, 3,
		[]rawPage{{rows: 3, enc: encList(encNoNulls(encFlat(64, 0)), 7, 6), bufs: [][]byte{u64s(2, 4+7, 6)}}},
		[]rawPage{{rows: 6, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{arrow.Int32Traits.CastToBytes([]int32{1, 2, 3, 4, 5, 6})}}})
	got2 := readRange(t, mustOpen(t, lanceFile), s.Fields, 0, 3, nil)
	defer got2.Release()
	expectArrays(t, "l (lance layout)", rec.Column(0), got2.Column(0))
}

// rawPage is a hand-built page for rawFile.
type rawPage struct {
	rows uint64
	enc  []byte
	bufs [][]byte
}

// rawFile assembles a file from hand-built pages, one []rawPage per column, through the
// writer's own container code.
func rawFile(t testing.TB, s *schema.Schema, rows uint64, cols ...[]rawPage) []byte {
	w := &Writer{schema: s, rows: int64(rows)}
	for _, pages := range cols {
		c := &column{}
		for _, p := range pages {
			pm := pageMeta{rows: p.rows, encoding: p.enc}
			size := 0
			for _, b := range p.bufs {
				size += padded(len(b))
			}
			w.reserve(size)
			for _, b := range p.bufs {
				copy(w.buffer(&pm, len(b)), b)
			}
			c.pages = append(c.pages, pm)
		}
		w.cols = append(w.cols, c)
	}
	out, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func encDictionary(indices, items []byte, n uint64) []byte {
	var d pb.Encoder
	d.BytesAlways(1, indices)
	d.BytesAlways(2, items)
	d.Uint(3, n)
	return nest(d.B, 7)
}

// TestDictionaryPage decodes a hand-built dictionary page as lance 2.0 writes them for
// low-cardinality strings: u8 indices, 1-based, 0 = null, items a nested binary.
func TestDictionaryPage(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "color", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	dict := rawPage{
		rows: 7,
		enc:  encDictionary(encNoNulls(encFlat(8, 0)), encBinary(encNoNulls(encFlat(64, 1)), encFlat(8, 2), 13), 3),
		bufs: [][]byte{{1, 0, 2, 1, 3, 2, 3}, u64s(3, 8, 12), []byte("redgreenblue")},
	}
	plain := rawPage{
		rows: 2,
		enc:  encBinary(encNoNulls(encFlat(64, 0)), encFlat(8, 1), 5),
		bufs: [][]byte{u64s(4, 4+5), []byte("pink")},
	}
	file := rawFile(t, s, 9, []rawPage{dict, plain})
	r := mustOpen(t, file)
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	sb.AppendValues([]string{"red", "", "green", "red", "blue", "green", "blue", "pink", ""},
		[]bool{true, false, true, true, true, true, true, true, false})
	want := sb.NewArray()
	defer want.Release()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, rg := range [][2]int64{{0, 9}, {2, 3}, {5, 3}, {6, 1}, {1, 0}} {
		got := readRange(t, r, s.Fields, rg[0], rg[1], mem)
		w := array.NewSlice(want, rg[0], rg[0]+rg[1])
		expectArrays(t, "color", w, got.Column(0))
		w.Release()
		got.Release()
	}
	_ = as
	// an index past the dictionary is a format error
	bad := dict
	bad.bufs = [][]byte{{1, 0, 2, 1, 4, 2, 3}, dict.bufs[1], dict.bufs[2]}
	_, err := mustOpen(t, rawFile(t, s, 9, []rawPage{bad, plain})).Read(context.Background(), s.Fields, nil, 0, 9, nil)
	if !isFormatError(err) {
		t.Fatalf("dictionary index out of range: %v", err)
	}
}

// TestUnalignedListPages: two offsets pages of 4+2 rows over item pages of 5+4 items, the layout
// the official reader was shown to accept (X); the reader must stitch items across pages.
func TestUnalignedListPages(t *testing.T) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "l", Type: arrow.LargeListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil))
	off := encList(encNoNulls(encFlat(64, 0)), 7, 6)
	items := func(vs ...int32) rawPage {
		return rawPage{rows: uint64(len(vs)), enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{arrow.Int32Traits.CastToBytes(vs)}}
	}
	file := rawFile(t, s, 6,
		[]rawPage{
			{rows: 4, enc: off, bufs: [][]byte{u64s(2, 2, 6, 6+7)}},                               // [0 1] [] [2 3 4 5] null
			{rows: 2, enc: encList(encNoNulls(encFlat(64, 0)), 4, 3), bufs: [][]byte{u64s(1, 3)}}, // [6] [7 8]
		},
		[]rawPage{items(0, 1, 2, 3, 4), items(5, 6, 7, 8)})
	r := mustOpen(t, file)
	lb := array.NewLargeListBuilderWithField(memory.DefaultAllocator, as.Field(0).Type.(*arrow.LargeListType).ElemField())
	vb := lb.ValueBuilder().(*array.Int32Builder)
	for _, l := range [][]int32{{0, 1}, {}, {2, 3, 4, 5}, nil, {6}, {7, 8}} {
		if l == nil {
			lb.AppendNull()
			continue
		}
		lb.Append(true)
		vb.AppendValues(l, nil)
	}
	want := lb.NewArray()
	defer want.Release()
	for off := int64(0); off <= 6; off++ {
		for n := int64(0); off+n <= 6; n++ {
			got := readRange(t, r, s.Fields, off, n, nil)
			w := array.NewSlice(want, off, off+n)
			expectArrays(t, "l", w, got.Column(0))
			w.Release()
			got.Release()
		}
	}
}
