package file

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/pierrec/lz4/v4"
	"google.golang.org/protobuf/encoding/protowire"
)

// wpage21 as a test reads it back from a file's bytes.
type testPage21 struct {
	rows, priority uint64
	layout         []byte   // PageLayout message
	bufs           [][]byte // page buffers, as stored
}

// testColumns21 parses the container of a 2.1+ file: footer version and every column's pages.
func testColumns21(t *testing.T, b []byte) (Version, [][]testPage21) {
	t.Helper()
	if len(b) < footerSize || string(b[len(b)-4:]) != magic {
		t.Fatalf("no footer")
	}
	f := parseFooter(b[len(b)-footerSize:])
	var cols [][]testPage21
	for c := 0; c < int(f.numColumns); c++ {
		pos := binary.LittleEndian.Uint64(b[f.cmoStart+16*uint64(c):])
		size := binary.LittleEndian.Uint64(b[f.cmoStart+16*uint64(c)+8:])
		var pages []testPage21
		err := pb.Walk(b[pos:pos+size], func(fl pb.Field) error {
			if fl.Num != 2 {
				return nil
			}
			var p testPage21
			var offs, sizes []uint64
			err := pb.Walk(fl.Bytes, func(g pb.Field) error {
				var err error
				switch g.Num {
				case 1:
					offs, err = g.Uints(offs)
				case 2:
					sizes, err = g.Uints(sizes)
				case 3:
					p.rows = g.Varint
				case 5:
					p.priority = g.Varint
				case 4:
					var url string
					url, p.layout, err = parseDirect(g.Bytes)
					if err == nil && url != pageLayout21URL {
						t.Errorf("page encoding %q", url)
					}
				}
				return err
			})
			for i := range offs {
				if offs[i]%64 != 0 {
					t.Errorf("buffer at %d is not 64-byte aligned", offs[i])
				}
				p.bufs = append(p.bufs, b[offs[i]:offs[i]+sizes[i]])
			}
			pages = append(pages, p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, pages)
	}
	return Version{uint32(f.major), uint32(f.minor)}, cols
}

func write21(t *testing.T, v Version, opts Options, as *arrow.Schema, cols ...arrow.Array) []byte {
	t.Helper()
	s, _ := lanceSchema(t, as)
	opts.Version = v
	rec := buildRecord(as, cols...)
	defer rec.Release()
	return writeFile(t, s, opts, rec)
}

func wantBytes(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if w := unhex(t, want); !bytes.Equal(got, w) {
		t.Errorf("%s:\n got %x\nwant %x", what, got, w)
	}
}

// The byte layouts below are those Lance 8, 10 and 12 write for the same values (the layout
// messages are copied field for field from their files).
func TestWrite21MiniBlockInt32Bytes(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
	mk := func() arrow.Array {
		b := array.NewInt32Builder(memory.DefaultAllocator)
		b.AppendValues([]int32{1, 0, 3}, []bool{true, false, true})
		return b.NewArray()
	}
	for _, v := range []Version{V2_1, V2_2} {
		b := write21(t, v, Options{Compress: true}, as, mk())
		got, cols := testColumns21(t, b)
		if got != v || len(cols) != 1 || len(cols[0]) != 1 {
			t.Fatalf("%s: version %s, %d columns", v, got, len(cols))
		}
		p := cols[0][0]
		if p.rows != 3 || p.priority != 0 || len(p.bufs) != 2 {
			t.Fatalf("%s: page %+v", v, p)
		}
		if v == V2_1 {
			wantBytes(t, "chunk metadata", p.bufs[0], "3000")
			wantBytes(t, "chunk", p.bufs[1], "0300 0600 0c00 fefe  0000 0100 0000 fefe  01000000 00000000 03000000 fefefefe")
			wantBytes(t, "layout", p.layout, "0a13 1204 0a020810 1a04 0a020820 3201 03 3801 4803")
			continue
		}
		// 2.2: u32 words and value buffer sizes; the value buffer is LZ4-compressed
		want22Chunk(t, p.bufs[0], p.bufs[1], "0300 0600", "0000 0100 0000 fefe", "01000000 00000000 03000000")
		wantBytes(t, "layout", p.layout, "0a1d 1204 0a020810 1a0c 520a 0a020801 1a04 0a020820 3201 03 3801 4803 5001")
	}
}

// want22Chunk checks a 2.2 file's only mini-block chunk: head is its header up to the size of
// its one value buffer, levels the level buffers (padded) after the header, and values the
// plain value buffer, stored as u32 length + LZ4 block.
func want22Chunk(t *testing.T, meta, chunk []byte, head, levels, values string) {
	t.Helper()
	h, lv, vals := unhex(t, head), unhex(t, levels), unhex(t, values)
	if !bytes.HasPrefix(chunk, h) || len(chunk) < len(h)+4 {
		t.Fatalf("chunk %x does not start with %x", chunk, h)
	}
	size := int(binary.LittleEndian.Uint32(chunk[len(h):]))
	at := pad8(len(h) + 4)
	if !bytes.Equal(chunk[at:at+len(lv)], lv) {
		t.Fatalf("levels %x, want %x", chunk[at:at+len(lv)], lv)
	}
	at += len(lv)
	if len(chunk) != at+pad8(size) {
		t.Fatalf("chunk of %d bytes, want %d", len(chunk), at+pad8(size))
	}
	buf := chunk[at : at+size]
	plain := make([]byte, binary.LittleEndian.Uint32(buf))
	n, err := lz4.UncompressBlock(buf[4:], plain)
	if err != nil || n != len(plain) || !bytes.Equal(plain, vals) {
		t.Fatalf("values %x (%v, %d of %d bytes), want %x", plain, err, n, len(plain), vals)
	}
	if w := binary.LittleEndian.Uint32(meta); len(meta) != 4 || int(w>>4+1)*8 != len(chunk) || w&15 != 0 {
		t.Fatalf("chunk word %x for %d bytes", meta, len(chunk))
	}
}

func TestWrite21MiniBlockStringBytes(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendValues([]string{"ab", "", "cde"}, []bool{true, false, true})
	_, cols := testColumns21(t, write21(t, V2_1, Options{}, as, b.NewArray()))
	p := cols[0][0]
	// offsets from the buffer start (4 x u32), the bytes, padded with 'H' to whole offsets
	wantBytes(t, "chunk", p.bufs[1], "0300 0600 1800 fefe  0000 0100 0000 fefe"+
		"10000000 12000000 12000000 15000000 6162 636465 484848")
	wantBytes(t, "metadata", p.bufs[0], "4000")
	// value_compression = variable{offsets = flat(32)}
	wantBytes(t, "layout", p.layout, "0a17 1204 0a020810 1a08 1206 0a04 0a020820 3201 03 3801 4803")

	// 2.2: the same buffer, LZ4-compressed (general{lz4, variable{flat(32)}})
	b = array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendValues([]string{"ab", "", "cde"}, []bool{true, false, true})
	_, cols = testColumns21(t, write21(t, V2_2, Options{Compress: true}, as, b.NewArray()))
	p = cols[0][0]
	want22Chunk(t, p.bufs[0], p.bufs[1], "0300 0600", "0000 0100 0000 fefe",
		"10000000 12000000 12000000 15000000 6162 636465 484848")
	wantBytes(t, "layout", p.layout, "0a21 1204 0a020810 1a10 520e 0a020801 1a08 1206 0a04 0a020820 3201 03 3801 4803 5001")
}

func TestWrite21ListBytes(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}}, nil)
	lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	vb := lb.ValueBuilder().(*array.Int32Builder)
	lb.Append(true)
	vb.AppendValues([]int32{1, 2}, nil)
	lb.AppendNull()
	lb.Append(true) // empty
	lb.Append(true)
	vb.Append(3)
	_, cols := testColumns21(t, write21(t, V2_2, Options{Compress: true}, as, lb.NewArray()))
	p := cols[0][0]
	if len(p.bufs) != 3 {
		t.Fatalf("%d buffers, want metadata, chunks, repetition index", len(p.bufs))
	}
	// rep: a row starts at 1; def: null list 2, empty list 3 (layers, declared from the
	// fields under a list: nullable item, null-and-empty list)
	want22Chunk(t, p.bufs[0], p.bufs[1], "0500 0a00 0a00",
		"0100 0000 0100 0100 0100 fefefefefefe"+"0000 0000 0200 0300 0000 fefefefefefe",
		"01000000 02000000 03000000")
	wantBytes(t, "repetition index", p.bufs[2], "0400000000000000 0000000000000000")
	wantBytes(t, "layout", p.layout, "0a26 0a04 0a020810 1204 0a020810 1a0c 520a 0a020801 1a04 0a020820 3202 0306 3801 4001 4803 5001")
}

func TestWrite21FullZipStringBytes(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	long := strings.Repeat("a", 300)
	b.AppendValues([]string{long, "", "b"}, []bool{true, false, true})
	_, cols := testColumns21(t, write21(t, V2_1, Options{}, as, b.NewArray()))
	p := cols[0][0]
	want := "00 2c010000 " + hex.EncodeToString([]byte(long)) + " 01 00 01000000 62"
	wantBytes(t, "zipped values", p.bufs[0], want)
	// row starts in u16 (the buffer is over 255 bytes), then its length
	wantBytes(t, "repetition index", p.bufs[1], "0000 3101 3201 3801")
	// bits_def 1, bits_per_offset 32, 3 items, 3 visible, variable{flat(32)}, layers [nullable item]
	wantBytes(t, "layout", p.layout, "1a15 1001 2020 2803 3003 3a08 1206 0a04 0a020820 4201 03")
}

func TestWrite21WideVectorFullZip(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.FixedSizeListOf(64, arrow.PrimitiveTypes.Float32), Nullable: true}}, nil)
	fb := array.NewFixedSizeListBuilder(memory.DefaultAllocator, 64, arrow.PrimitiveTypes.Float32)
	vb := fb.ValueBuilder().(*array.Float32Builder)
	for r := 0; r < 3; r++ {
		fb.Append(true)
		for k := 0; k < 64; k++ {
			vb.Append(float32(r*100 + k))
		}
	}
	_, cols := testColumns21(t, write21(t, V2_1, Options{}, as, fb.NewArray()))
	p := cols[0][0]
	if len(p.bufs) != 1 || len(p.bufs[0]) != 3*256 {
		t.Fatalf("full-zip of 3 vectors without nulls: buffers %d, %d bytes", len(p.bufs), len(p.bufs[0]))
	}
	if got := binary.LittleEndian.Uint32(p.bufs[0][256:]); got != 0x42c80000 { // 100.0
		t.Fatalf("second vector starts with %x", got)
	}
	// bits_per_value 2048, fixed_size_list{64, flat(32)}, layers [all-valid item]
	wantBytes(t, "layout", p.layout, "1a16 188010 2803 3003 3a0a 5a08 0840 1204 0a020820 4201 01")
}

func TestWrite21AllNullPages(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	mk := func() (arrow.Array, arrow.Array) {
		nb := array.NewInt32Builder(memory.DefaultAllocator)
		nb.AppendNulls(2)
		lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
		lb.Append(true)
		lb.AppendNull()
		return nb.NewArray(), lb.NewArray()
	}
	for _, tc := range []struct {
		v      Version
		layout string
	}{
		{V2_1, "1204 2a02 0306"},
		{V2_2, "1214 2a02 0306 3a04 0a020810 4204 0a020810 4802 5002"},
	} {
		n, l := mk()
		_, cols := testColumns21(t, write21(t, tc.v, Options{}, as, n, l))
		if p := cols[0][0]; len(p.bufs) != 0 {
			t.Errorf("%s: an all-null column without lists has no buffers, got %d", tc.v, len(p.bufs))
		} else {
			wantBytes(t, tc.v.String()+" simple layout", p.layout, "1203 2a01 03")
		}
		p := cols[1][0]
		if len(p.bufs) != 2 {
			t.Fatalf("%s: %d buffers, want rep and def", tc.v, len(p.bufs))
		}
		wantBytes(t, tc.v.String()+" rep", p.bufs[0], "0100 0100")
		wantBytes(t, tc.v.String()+" def", p.bufs[1], "0300 0200")
		wantBytes(t, tc.v.String()+" layout", p.layout, tc.layout)
	}
}

// A struct null over a child that is not nullable cannot be stored in 2.0; from 2.1 on it is a
// def level of the struct's layer.
func TestWrite21StructNullOverRequiredChild(t *testing.T) {
	st := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32})
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: st, Nullable: true}}, nil)
	mk := func() arrow.Array {
		child := array.NewInt32Builder(memory.DefaultAllocator)
		child.AppendValues([]int32{7, 8}, nil)
		c := child.NewArray()
		defer c.Release()
		valid := memory.NewBufferBytes([]byte{0b01})
		d := array.NewData(st, 2, []*memory.Buffer{valid}, []arrow.ArrayData{c.Data()}, 1, 0)
		defer d.Release()
		return array.MakeFromData(d)
	}
	s, _ := lanceSchema(t, as)
	w, err := NewWriter(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := buildRecord(as, mk())
	defer rec.Release()
	if err := w.Write(rec); err == nil {
		t.Fatal("2.0 stored a struct null over a required child")
	}
	_, cols := testColumns21(t, write21(t, V2_1, Options{}, as, mk()))
	p := cols[0][0]
	// def: 0, then 1 for the null struct; layers: all-valid item, nullable item (the struct)
	wantBytes(t, "chunk", p.bufs[1], "0200 0400 0800 fefe  0000 0100 fefefefe  07000000 08000000")
	wantBytes(t, "layout", p.layout, "0a14 1204 0a020810 1a04 0a020820 3202 0103 3801 4802")
}

// Values are cut into chunks of 2^k values under 8186 value bytes; the last takes the rest.
func TestWrite21ChunksAndPages(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	for i := 0; i < 3000; i++ {
		b.Append("0123456789")
	}
	_, cols := testColumns21(t, write21(t, V2_1, Options{MaxPageRows: 2500}, as, b.NewArray()))
	if len(cols[0]) != 2 || cols[0][0].rows != 2500 || cols[0][1].rows != 500 || cols[0][1].priority != 2500 {
		t.Fatalf("pages %+v", cols[0])
	}
	meta := cols[0][0].bufs[0]
	// (513 offsets + 5120 bytes) fits, 1024 values do not: 4 chunks of 512 and one of 452
	if len(meta) != 2*5 {
		t.Fatalf("%d chunk words, want 5", len(meta)/2)
	}
	for i := 0; i < 5; i++ {
		w := binary.LittleEndian.Uint16(meta[2*i:])
		wantLog, wantSize := uint16(9), 8+pad8(513*4+5120)
		if i == 4 {
			wantLog, wantSize = 0, 8+pad8(453*4+4520)
		}
		if w&15 != wantLog || int(w>>4+1)*8 != wantSize {
			t.Errorf("chunk %d word %04x: want log %d, %d bytes", i, w, wantLog, wantSize)
		}
	}
}

// Long runs of empty lists make chunks whose levels cannot be described; such a page goes
// full-zip instead.
func TestWrite21LongEmptyRunsGoFullZip(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}}, nil)
	lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	vb := lb.ValueBuilder().(*array.Int32Builder)
	lb.Append(true)
	vb.AppendValues([]int32{1, 2}, nil)
	for i := 0; i < 40000; i++ {
		lb.Append(true)
	}
	lb.Append(true)
	vb.Append(3)
	_, cols := testColumns21(t, write21(t, V2_2, Options{}, as, lb.NewArray()))
	p := cols[0][0]
	var kind protowire.Number
	if err := pb.Walk(p.layout, func(f pb.Field) error { kind = f.Num; return nil }); err != nil {
		t.Fatal(err)
	}
	if kind != 3 {
		t.Fatalf("layout %d, want full-zip (3)", kind)
	}
	// one control word per level, rep << 2 | def (an empty list is def 3 under the declared
	// layers nullable item, null-and-empty list), and each value after its word
	if z := p.bufs[0]; len(z) != 40003+3*4 || z[0] != 0b100 || z[5] != 0 || z[10] != 0b111 {
		t.Fatalf("zipped buffer of %d bytes starts %x", len(z), z[:12])
	}
}

func TestPutRepIndex(t *testing.T) {
	// rows [a b c] [d e] [f] in chunks of 2 levels: chunk 0 ends no row (2 levels left over),
	// chunk 1 ends row 0 (row 1 starts in it; 1 left over), the last chunk ends rows 1 and 2.
	rep := []uint16{1, 0, 0, 1, 0, 1}
	ri := make([]byte, 16*3)
	left := putRepIndex(ri, 0, rep[0:2], 1, false, 0)
	left = putRepIndex(ri, 1, rep[2:4], 1, false, left)
	putRepIndex(ri, 2, rep[4:6], 1, true, left)
	var got []uint64
	for i := 0; i < 6; i++ {
		got = append(got, binary.LittleEndian.Uint64(ri[8*i:]))
	}
	want := []uint64{0, 2, 1, 1, 2, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("repetition index %v, want %v", got, want)
		}
	}
	// rows [a] [b] in chunks of one level: chunk 0 first counts [a] as left over; chunk 1
	// starting with a new row turns that into a row that ended in chunk 0.
	left = putRepIndex(ri, 0, []uint16{1}, 1, false, 0)
	putRepIndex(ri, 1, []uint16{1}, 1, true, left)
	for i, w := range []uint64{1, 0, 1, 0} {
		if g := binary.LittleEndian.Uint64(ri[8*i:]); g != w {
			t.Fatalf("repetition index word %d = %d, want %d", i, g, w)
		}
	}
}

func TestColumnFields(t *testing.T) {
	s, _ := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "v", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "b", Type: arrow.BinaryTypes.String}), Nullable: true},
	}, nil))
	// ids: id 0, l 1, l.item 2, v 3, s 4, s.a 5, s.b 6
	if got := ColumnFields(s, V2_0); len(got) != 7 {
		t.Fatalf("2.0: %v", got)
	}
	got := ColumnFields(s, V2_2)
	want := []int32{0, 2, 3, 5, 6}
	if len(got) != len(want) {
		t.Fatalf("2.2: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("2.2: %v, want %v", got, want)
		}
	}
	_, cols := testColumns21(t, writeFile(t, s, Options{Version: V2_2}, emptyRecord(t, s)))
	if len(cols) != len(want) {
		t.Fatalf("a 2.2 file of this schema has %d columns, ColumnFields says %d", len(cols), len(want))
	}
}

func emptyRecord(t *testing.T, s *schema.Schema) arrow.Record {
	as, err := s.ToArrow()
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer rb.Release()
	return rb.NewRecord()
}

func TestWriter21Refusals(t *testing.T) {
	s := &schema.Schema{Fields: []*schema.Field{
		{ID: 0, ParentID: -1, Name: "ok", LogicalType: "int64"},
		{ID: 1, ParentID: -1, Name: "nothing", LogicalType: "null", Nullable: true},
	}}
	if _, err := NewWriter(s, Options{Version: V2_2}); err == nil || !strings.Contains(err.Error(), `"nothing"`) {
		t.Fatalf("null type: %v", err)
	}
	s.Fields[1] = &schema.Field{ID: 1, ParentID: -1, Name: "empty", LogicalType: "struct", Nullable: true}
	if _, err := NewWriter(s, Options{Version: V2_1}); err == nil || !strings.Contains(err.Error(), `"empty"`) {
		t.Fatalf("struct without fields: %v", err)
	}
	s.Fields[1] = &schema.Field{ID: 1, ParentID: -1, Name: "bits", LogicalType: "fixed_size_list:bool:65537", Nullable: true}
	if _, err := NewWriter(s, Options{Version: V2_1}); err == nil || !strings.Contains(err.Error(), `"bits"`) {
		t.Fatalf("wide boolean vector: %v", err)
	}
	var uv *UnsupportedVersionError
	if _, err := NewWriter(s, Options{Version: Version{2, 3}}); !errors.As(err, &uv) {
		t.Fatalf("2.3: %v", err)
	}
}

// A refused batch leaves the writer as it was: the file equals one written without it.
func TestWriter21RefusedBatchChangesNothing(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "l", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.String}), Nullable: true},
	}, nil)
	s, _ := lanceSchema(t, as)
	mk := func(lo int, idValid []bool) arrow.Record {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		ib.AppendValues([]int64{int64(lo), int64(lo + 1)}, idValid)
		lb := array.NewListBuilderWithField(memory.DefaultAllocator, as.Field(1).Type.(*arrow.ListType).ElemField())
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append("x")
		lb.AppendNull()
		return buildRecord(as, ib.NewArray(), lb.NewArray())
	}
	for _, v := range []Version{V2_1, V2_2} {
		w, err := NewWriter(s, Options{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []arrow.Record{mk(0, nil), mk(2, []bool{true, false}), mk(4, nil)} {
			bad := r.Column(0).NullN() > 0
			err := w.Write(r)
			r.Release()
			if bad != (err != nil) {
				t.Fatalf("%s: batch with null id %v: error %v", v, bad, err)
			}
		}
		got, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		w, _ = NewWriter(s, Options{Version: v})
		for _, lo := range []int{0, 4} {
			r := mk(lo, nil)
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
			r.Release()
		}
		want, _ := w.Finish()
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: a refused batch changed the file", v)
		}
	}
}

// Pages are cut from the values alone, so writing a record whole or in slices (arrays with
// offsets) gives the same pages (only their order in the file may differ); and every array a
// Writer retains is released again.
func TestWrite21SlicesWriteTheSameFile(t *testing.T) {
	s, as := testSchema(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := randomRecord(mem, as, 3000, 0.2, 21)
	defer rec.Release()
	for _, v := range []Version{V2_1, V2_2} {
		for _, o := range []Options{{}, {MaxPageRows: 333}, {MaxPageBytes: 5000}} {
			o.Version = v
			whole := writeFile(t, s, o, rec)
			_, cols := testColumns21(t, whole)
			_, sliced := testColumns21(t, writeFile(t, s, o, rec, 1, 7, 0, 500, 1000))
			for c := range cols {
				if len(cols[c]) != len(sliced[c]) {
					t.Fatalf("%s %+v column %d: %d pages, sliced %d", v, o, c, len(cols[c]), len(sliced[c]))
				}
				for i, p := range cols[c] {
					q := sliced[c][i]
					same := p.rows == q.rows && bytes.Equal(p.layout, q.layout) && len(p.bufs) == len(q.bufs)
					for k := 0; same && k < len(p.bufs); k++ {
						same = bytes.Equal(p.bufs[k], q.bufs[k])
					}
					if !same {
						t.Fatalf("%s %+v column %d page %d differs when written from slices", v, o, c, i)
					}
				}
			}
			if want := len(ColumnFields(s, v)); len(cols) != want {
				t.Fatalf("%d columns, want %d", len(cols), want)
			}
			for c, pages := range cols {
				rows := uint64(0)
				for _, p := range pages {
					if p.priority != rows {
						t.Fatalf("column %d: page at row %d says priority %d", c, rows, p.priority)
					}
					rows += p.rows
				}
				if rows != 3000 {
					t.Fatalf("column %d: pages hold %d rows", c, rows)
				}
			}
		}
	}
}

// A leaf under a list declares the same layers on every page, whatever its data.
func TestWrite21ListLayersSameOnEveryPage(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true}}, nil)
	mk := func() arrow.Array {
		lb := array.NewListBuilder(memory.DefaultAllocator, arrow.BinaryTypes.String)
		vb := lb.ValueBuilder().(*array.StringBuilder)
		lb.Append(true)
		vb.Append("a") // page 1: no null, no empty
		lb.Append(true)
		vb.Append(strings.Repeat("b", 300)) // page 2: full-zip
		lb.AppendNull()                     // page 3: a null list, no values (all-null layout)
		lb.Append(true)
		vb.AppendNull() // page 4: a null item
		return lb.NewArray()
	}
	for _, v := range []Version{V2_1, V2_2} {
		_, cols := testColumns21(t, write21(t, v, Options{MaxPageRows: 1}, as, mk()))
		if len(cols[0]) != 4 {
			t.Fatalf("%d pages", len(cols[0]))
		}
		for i, p := range cols[0] {
			var layers []byte
			err := pb.Walk(p.layout, func(f pb.Field) error {
				return pb.Walk(f.Bytes, func(g pb.Field) error {
					if (f.Num == 1 && g.Num == 6) || (f.Num == 3 && g.Num == 8) || (f.Num == 2 && g.Num == 5) {
						layers = g.Bytes
					}
					return nil
				})
			})
			if err != nil || !bytes.Equal(layers, []byte{3, 6}) {
				t.Fatalf("%s page %d: layers %v (%v), want nullable item, null-and-empty list", v, i, layers, err)
			}
		}
	}
}

// What the 2.1/2.2 writer writes, this package's reader reads back: every test type, nullable
// or not, with and without nulls, in pages of every size, whole and by ranges. (Structs and
// vectors of booleans are left out: the reader does not decode them yet; the engines read
// them, write21check.)
func TestRoundTrip21AllTypes(t *testing.T) {
	_, all := testSchema(t)
	var keep []arrow.Field
	for _, f := range all.Fields() {
		if fsl, ok := f.Type.(*arrow.FixedSizeListType); (ok && fsl.Elem().ID() == arrow.BOOL) || f.Type.ID() == arrow.STRUCT {
			continue
		}
		keep = append(keep, f)
	}
	s, as := lanceSchema(t, arrow.NewSchema(keep, nil))
	for _, v := range []Version{V2_1, V2_2} {
		for _, rate := range []float64{0, 0.3, 1} {
			for _, opts := range []Options{{}, {MaxPageRows: 7}, {MaxPageBytes: 100}, {MaxPageBytes: 1}} {
				opts.Version = v
				t.Run(fmt.Sprintf("%s/nulls=%v/pagebytes=%d/pagerows=%d", v, rate, opts.MaxPageBytes, opts.MaxPageRows), func(t *testing.T) {
					mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
					defer mem.AssertSize(t, 0)
					rec := randomRecord(mem, as, 300, rate, 1)
					defer rec.Release()
					checkRoundTrip(t, s, opts, rec, len(ColumnFields(s, v)), mem)
				})
			}
		}
	}
}

// Full-zip pages (values of 256 bytes or more) read back: long strings, lists of them, wide
// vectors with null vectors and items, across pages.
func TestRoundTrip21Wide(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.LargeString), Nullable: true},
		{Name: "v", Type: arrow.FixedSizeListOf(100, arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	s, as := lanceSchema(t, as)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rb := array.NewRecordBuilder(mem, as)
	defer rb.Release()
	sb := rb.Field(0).(*array.StringBuilder)
	lb := rb.Field(1).(*array.ListBuilder)
	lv := lb.ValueBuilder().(*array.LargeStringBuilder)
	fb := rb.Field(2).(*array.FixedSizeListBuilder)
	fv := fb.ValueBuilder().(*array.Float32Builder)
	for i := 0; i < 60; i++ {
		switch i % 4 {
		case 0:
			sb.AppendNull()
		case 1:
			sb.Append(strings.Repeat("x", 70_000+i))
		default:
			sb.Append(strings.Repeat("y", 300*(i%3)))
		}
		switch i % 5 {
		case 0:
			lb.AppendNull()
		case 1:
			lb.Append(true)
		default:
			lb.Append(true)
			lv.Append(strings.Repeat("z", 256+i))
			lv.AppendNull()
			lv.Append("")
		}
		if i%6 == 5 {
			fb.AppendNull()
			continue
		}
		fb.Append(true)
		for k := 0; k < 100; k++ {
			if (i+k)%37 == 0 {
				fv.AppendNull()
			} else {
				fv.Append(float32(i*100 + k))
			}
		}
	}
	rec := rb.NewRecord()
	defer rec.Release()
	for _, v := range []Version{V2_1, V2_2} {
		for _, opts := range []Options{{Version: v}, {Version: v, MaxPageRows: 7}} {
			r := mustOpen(t, writeFile(t, s, opts, rec, 13, 20))
			got := readRange(t, r, s.Fields, 0, 60, mem)
			for i := range s.Fields {
				expectArrays(t, fmt.Sprintf("%s %s", v, s.Fields[i].Name), rec.Column(i), got.Column(i))
			}
			got.Release()
			part := readRange(t, r, s.Fields, 11, 30, mem)
			for i := range s.Fields {
				want := array.NewSlice(rec.Column(i), 11, 41)
				expectArrays(t, fmt.Sprintf("%s %s[11:41]", v, s.Fields[i].Name), want, part.Column(i))
				want.Release()
			}
			part.Release()
		}
	}
}

// Levels are u16: a leaf nested deeper than maxNesting fields is refused.
func TestWriter21RefusesTooDeepNesting(t *testing.T) {
	leaf := &schema.Field{Name: "item", LogicalType: "int32", Nullable: true}
	f := leaf
	for i := 0; i < maxNesting; i++ {
		f = &schema.Field{Name: "item", LogicalType: "list", Nullable: true, Children: []*schema.Field{f}}
	}
	f.Name = "deep"
	var number func(f *schema.Field, parent int32, next *int32)
	number = func(f *schema.Field, parent int32, next *int32) {
		f.ID, f.ParentID = *next, parent
		*next++
		for _, k := range f.Children {
			number(k, f.ID, next)
		}
	}
	next := int32(0)
	number(f, -1, &next)
	s := &schema.Schema{Fields: []*schema.Field{f}}
	if _, err := NewWriter(s, Options{Version: V2_2}); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("%d nested lists: %v", maxNesting, err)
	}
	// one level less is written
	s.Fields[0] = f.Children[0]
	s.Fields[0].Name, s.Fields[0].ParentID = "deep", -1
	if _, err := NewWriter(s, Options{Version: V2_2}); err != nil {
		t.Fatalf("%d nested lists: %v", maxNesting-1, err)
	}
}
