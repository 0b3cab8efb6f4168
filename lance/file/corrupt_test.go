package file

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// smallFile is a valid file with a few columns of several kinds, two pages each.
func smallFile(t testing.TB) ([]byte, *schema.Schema) {
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "vec", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil))
	rec := randomRecord(memory.DefaultAllocator, as, 6, 0.3, 5)
	defer rec.Release()
	return writeFile(t, s, Options{MaxPageRows: 3}, rec), s
}

// openAndRead opens b and reads every column of its own schema, whole and in two halves.
func openAndRead(b []byte) error {
	r, err := Open(context.Background(), BytesSource(b), "bad.lance")
	if err != nil {
		return err
	}
	for _, f := range r.Schema().Fields {
		if _, err := f.ArrowType(); err != nil {
			continue
		}
		n := min(r.NumRows(), 1<<12)
		for _, rg := range [][2]int64{{0, n}, {n / 2, n - n/2}} {
			rec, err := r.Read(context.Background(), []*schema.Field{f}, nil, rg[0], rg[1], memory.DefaultAllocator)
			if err != nil {
				return err
			}
			if v, ok := rec.Column(0).(interface{ ValidateFull() error }); ok {
				if err := v.ValidateFull(); err != nil {
					panic(fmt.Sprintf("field %q: decoded an invalid array: %v", f.Name, err))
				}
			}
			rec.Release()
		}
	}
	return nil
}

func expectFormatError(t *testing.T, what string, b []byte) {
	t.Helper()
	err := openAndRead(b)
	if !isFormatError(err) {
		t.Fatalf("%s: want a FormatError, got %v", what, err)
	}
}

func TestTruncations(t *testing.T) {
	file, _ := smallFile(t)
	if err := openAndRead(file); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(file); n++ { // every footer byte, and every other prefix
		expectFormatError(t, "truncated", file[:n])
	}
	// truncated at the front (the tail intact but the offsets now point past the end)
	for n := 1; n < 200; n++ {
		expectFormatError(t, "front-truncated", file[n:])
	}
}

func TestBadFooters(t *testing.T) {
	file, _ := smallFile(t)
	end := len(file) - footerSize
	mutate := func(what string, f func(b []byte)) {
		t.Helper()
		b := append([]byte(nil), file...)
		f(b)
		expectFormatError(t, what, b)
	}
	mutate("bad magic", func(b []byte) { copy(b[len(b)-4:], "LANX") })
	mutate("legacy version", func(b []byte) { binary.LittleEndian.PutUint16(b[end+34:], 2) })
	mutate("2.1", func(b []byte) {
		binary.LittleEndian.PutUint16(b[end+32:], 2)
		binary.LittleEndian.PutUint16(b[end+34:], 1)
	})
	for i, name := range []string{"column_meta_start", "cmo_table_start", "gbo_table_start"} {
		for _, v := range []uint64{uint64(len(file)), uint64(len(file)) * 2, 1<<64 - 1, uint64(end) - 1} {
			mutate(name, func(b []byte) { binary.LittleEndian.PutUint64(b[end+8*i:], v) })
		}
	}
	for _, v := range []uint32{0, 2, 1 << 31, 1<<32 - 1} {
		mutate("num_global_buffers", func(b []byte) { binary.LittleEndian.PutUint32(b[end+24:], v) })
	}
	for _, v := range []uint32{0, 50, 1 << 31, 1<<32 - 1} {
		mutate("num_columns", func(b []byte) { binary.LittleEndian.PutUint32(b[end+28:], v) })
	}
	gbo := binary.LittleEndian.Uint64(file[end+16:])
	mutate("file descriptor past EOF", func(b []byte) { binary.LittleEndian.PutUint64(b[gbo:], uint64(len(file))) })
	mutate("file descriptor too long", func(b []byte) { binary.LittleEndian.PutUint64(b[gbo+8:], uint64(len(file))) })
	mutate("file descriptor too short", func(b []byte) { binary.LittleEndian.PutUint64(b[gbo+8:], 3) })
}

// TestLyingColumnMetadata changes every column metadata offset-table entry.
func TestLyingColumnMetadata(t *testing.T) {
	file, _ := smallFile(t)
	ft := parseFooter(file[len(file)-footerSize:])
	for c := 0; c < int(ft.numColumns); c++ {
		at := int(ft.cmoStart) + 16*c
		pos, size := binary.LittleEndian.Uint64(file[at:]), binary.LittleEndian.Uint64(file[at+8:])
		for _, d := range []int64{-3, -1, 1, 1000, 1 << 40} {
			b := append([]byte(nil), file...)
			binary.LittleEndian.PutUint64(b[at+8:], uint64(int64(size)+d))
			expectFormatError(t, "column metadata size", b)
			b = append([]byte(nil), file...)
			binary.LittleEndian.PutUint64(b[at:], uint64(int64(pos)+d))
			if err := openAndRead(b); err != nil && !isFormatError(err) {
				t.Fatalf("column metadata position %+d: %v", d, err)
			}
		}
	}
}

// TestByteFlips flips every bit pattern of every byte of a small file: whatever happens must be a
// FormatError or a successful read, never a panic or another kind of error.
func TestByteFlips(t *testing.T) {
	file, _ := smallFile(t)
	for i := range file {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			b := append([]byte(nil), file...)
			b[i] ^= x
			if err := openAndRead(b); err != nil && !isFormatError(err) {
				t.Fatalf("byte %d ^ %#x: %v", i, x, err)
			}
		}
	}
}

func TestBadPages(t *testing.T) {
	s, _ := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil))
	ss, _ := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	ls, _ := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}}, nil))
	ints := func(n int) []byte { return make([]byte, 4*n) }
	var compressed pb.Encoder
	compressed.Uint(1, 32)
	compressed.BytesAlways(2, nil)
	compressed.Message(3, func(e *pb.Encoder) { e.String(1, "zstd") })
	cases := []struct {
		name string
		file []byte
	}{
		{"buffer shorter than rows", rawFile(t, s, 4, []rawPage{{rows: 4, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{ints(3)}}})},
		{"buffer index out of range", rawFile(t, s, 4, []rawPage{{rows: 4, enc: encNoNulls(encFlat(32, 1)), bufs: [][]byte{ints(4)}}})},
		{"wrong bit width", rawFile(t, s, 4, []rawPage{{rows: 4, enc: encNoNulls(encFlat(64, 0)), bufs: [][]byte{ints(8)}}})},
		{"validity too short", rawFile(t, s, 20, []rawPage{{rows: 20, enc: encSomeNulls(encFlat(1, 0), encFlat(32, 1)), bufs: [][]byte{{0xff, 0xff}, ints(20)}}})},
		{"more rows than the file", rawFile(t, s, 4, []rawPage{{rows: 5, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{ints(5)}}})},
		{"fewer rows than the file", rawFile(t, s, 4, []rawPage{{rows: 3, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{ints(3)}}})},
		{"bitpacked", rawFile(t, s, 1, []rawPage{{rows: 1, enc: nest(nil, 10), bufs: [][]byte{ints(1)}}})},
		{"compressed", rawFile(t, s, 1, []rawPage{{rows: 1, enc: nest(compressed.B, 1), bufs: [][]byte{ints(1)}}})},
		{"empty encoding", rawFile(t, s, 1, []rawPage{{rows: 1, enc: nil, bufs: [][]byte{ints(1)}}})},
		{"garbage encoding", rawFile(t, s, 1, []rawPage{{rows: 1, enc: []byte{0x12, 0x05, 0x0a}, bufs: [][]byte{ints(1)}}})},
		{"list encoding for ints", rawFile(t, s, 1, []rawPage{{rows: 1, enc: encList(encNoNulls(encFlat(64, 0)), 1, 0), bufs: [][]byte{u64s(0)}}})},
		{"string ends decrease", rawFile(t, ss, 2, []rawPage{{rows: 2, enc: encBinary(encNoNulls(encFlat(64, 0)), encFlat(8, 1), 5), bufs: [][]byte{u64s(3, 2), []byte("abcd")}}})},
		{"string ends past bytes", rawFile(t, ss, 2, []rawPage{{rows: 2, enc: encBinary(encNoNulls(encFlat(64, 0)), encFlat(8, 1), 50), bufs: [][]byte{u64s(3, 9), []byte("abcd")}}})},
		{"null adjustment 0", rawFile(t, ss, 1, []rawPage{{rows: 1, enc: encBinary(encNoNulls(encFlat(64, 0)), encFlat(8, 1), 0), bufs: [][]byte{u64s(0), nil}}})},
		{"list ends past items", rawFile(t, ls, 1,
			[]rawPage{{rows: 1, enc: encList(encNoNulls(encFlat(64, 0)), 5, 2), bufs: [][]byte{u64s(4)}}},
			[]rawPage{{rows: 2, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{ints(2)}}})},
		{"list items missing", rawFile(t, ls, 1,
			[]rawPage{{rows: 1, enc: encList(encNoNulls(encFlat(64, 0)), 3, 2), bufs: [][]byte{u64s(2)}}},
			[]rawPage{{rows: 1, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{ints(1)}}})},
		{"list pages not contiguous", rawFile(t, ls, 2,
			[]rawPage{{rows: 1, enc: encList(encNoNulls(encFlat(64, 0)), 3, 2), bufs: [][]byte{u64s(1)}},
				{rows: 1, enc: encList(encNoNulls(encFlat(64, 0)), 2, 1), bufs: [][]byte{u64s(1)}}},
			[]rawPage{{rows: 3, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{ints(3)}}})},
	}
	for _, c := range cases {
		expectFormatError(t, c.name, c.file)
	}
	// a foreign type URL (same length, so the file stays well-formed otherwise)
	b := rawFile(t, s, 1, []rawPage{{rows: 1, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{ints(1)}}})
	i := indexOf(b, []byte(arrayEncodingURL))
	copy(b[i:], "/lance.encodings.ArrayEncodinX")
	expectFormatError(t, "foreign page type URL", b)
	// a 2.1 page is recognised as such (Open refuses it in a 2.0 file: TestOpen21VersionMismatch)
	var page pb.Encoder
	page.Uint(3, 1)
	page.BytesAlways(4, directEncoding(pageLayout21URL, nil))
	if p, err := parsePage(page.B, 100); err != nil || !p.layout21 {
		t.Fatalf("2.1 page layout: %v, layout21 %v", err, p.layout21)
	}
}

func indexOf(b, sub []byte) int {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}

func TestFooter20Accepted(t *testing.T) {
	file, _ := smallFile(t)
	b := append([]byte(nil), file...)
	binary.LittleEndian.PutUint16(b[len(b)-8:], 2)
	binary.LittleEndian.PutUint16(b[len(b)-6:], 0)
	if err := openAndRead(b); err != nil {
		t.Fatalf("footer 2.0: %v", err)
	}
}

func TestSchemaTooDeep(t *testing.T) {
	s := &schema.Schema{}
	parent := (*schema.Field)(nil)
	for i := int32(0); i < 70; i++ {
		f := &schema.Field{ID: i, ParentID: i - 1, Name: fmt.Sprint("s", i), LogicalType: "struct"}
		if parent == nil {
			s.Fields = append(s.Fields, f)
		} else {
			parent.Children = append(parent.Children, f)
		}
		parent = f
	}
	_, err := Open(context.Background(), BytesSource(rawFile(t, s, 0)), "deep.lance")
	if !isFormatError(err) {
		t.Fatalf("70-level schema: %v", err)
	}
}

// TestUnknownFooterVersions: a footer naming a version this package cannot read (2.3, the
// official engine's "next"; 3.0; the legacy 0.1 and 0.2) is a *FormatError whose cause is an
// *UnsupportedVersionError naming that version.
func TestUnknownFooterVersions(t *testing.T) {
	file, s := smallFile(t)
	end := len(file) - footerSize
	for _, v := range []Version{{2, 3}, {3, 0}, {0, 1}, {0, 2}} {
		b := append([]byte(nil), file...)
		binary.LittleEndian.PutUint16(b[end+32:], uint16(v.Major))
		binary.LittleEndian.PutUint16(b[end+34:], uint16(v.Minor))
		_, err := Open(t.Context(), BytesSource(b), "f.lance")
		var fe *FormatError
		var ue *UnsupportedVersionError
		if !errors.As(err, &fe) || !errors.As(err, &ue) || ue.Version != v || ue.Op != "read" {
			t.Fatalf("%s: got %v", v, err)
		}
		if !strings.Contains(err.Error(), v.String()) {
			t.Fatalf("%s: message %q does not name the version", v, err)
		}
	}
	if _, err := NewWriter(s, Options{Version: Version{2, 3}}); !errors.As(err, new(*UnsupportedVersionError)) {
		t.Fatalf("writer accepted 2.3: %v", err)
	}
}
