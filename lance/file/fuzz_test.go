package file

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// lowerDecodeLimit keeps fuzzed all-null pages from asking for gigabytes.
func lowerDecodeLimit(f *testing.F) {
	old := maxDecodeValues
	maxDecodeValues = 1 << 16
	f.Cleanup(func() { maxDecodeValues = old })
}

// seedFiles are valid files for FuzzOpen: written by the Writer, plus hand-built layouts the
// Writer does not produce (dictionary pages, item pages not aligned with offsets pages).
func seedFiles(t testing.TB) [][]byte {
	small, ss := smallFile(t)
	// one column of each storage kind; kept small because the fuzzer minimizes whole inputs
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "fb", Type: arrow.FixedSizeListOf(2, arrow.FixedWidthTypes.Boolean), Nullable: true},
		{Name: "lb", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "ll", Type: arrow.LargeListOf(arrow.FixedWidthTypes.Boolean), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), Nullable: true},
	}, nil))
	rec := randomRecord(memory.DefaultAllocator, as, 4, 0.3, 11)
	defer rec.Release()
	kinds := writeFile(t, s, Options{MaxPageRows: 3}, rec)
	w, _ := NewWriter(ss, Options{})
	empty, _ := w.Finish()

	cs, _ := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "c", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	dict := rawFile(t, cs, 4, []rawPage{{rows: 4,
		enc:  encDictionary(encNoNulls(encFlat(8, 0)), encBinary(encNoNulls(encFlat(64, 1)), encFlat(8, 2), 4), 2),
		bufs: [][]byte{{1, 0, 2, 1}, u64s(1, 3), []byte("abc")}}})
	ls, _ := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}}, nil))
	lists := rawFile(t, ls, 3,
		[]rawPage{{rows: 2, enc: encList(encNoNulls(encFlat(64, 0)), 4, 3), bufs: [][]byte{u64s(1, 3)}},
			{rows: 1, enc: encList(encNoNulls(encFlat(64, 0)), 2, 1), bufs: [][]byte{u64s(1 + 2)}}},
		[]rawPage{{rows: 2, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{make([]byte, 8)}},
			{rows: 1, enc: encNoNulls(encFlat(32, 0)), bufs: [][]byte{make([]byte, 4)}}})
	return [][]byte{small, kinds, empty, dict, lists}
}

// FuzzOpen: footer, offset tables, file descriptor and column metadata decoding from arbitrary
// bytes, then reading every column. Anything wrong must be a FormatError, never a panic.
func FuzzOpen(f *testing.F) {
	lowerDecodeLimit(f)
	for _, b := range seedFiles(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := openAndRead(b); err != nil && !isFormatError(err) {
			t.Fatalf("not a FormatError: %v", err)
		}
	})
}

// pageTypes are the types FuzzReadPage decodes pages as.
var pageTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64, arrow.FixedWidthTypes.Boolean, arrow.PrimitiveTypes.Float64,
	arrow.BinaryTypes.String, arrow.BinaryTypes.LargeBinary, arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32),
	arrow.FixedSizeListOf(2, arrow.FixedWidthTypes.Boolean), arrow.ListOf(arrow.PrimitiveTypes.Int32),
	arrow.LargeListOf(arrow.BinaryTypes.String), arrow.PrimitiveTypes.Uint8,
}

// pageReader is a Reader over one column holding one page with the given encoding and buffers.
func pageReader(s *schema.Schema, rows uint64, enc []byte, bufs [][]byte) *Reader {
	var data []byte
	p := pageInfo{rows: rows, encoding: enc}
	for _, b := range bufs {
		p.offsets = append(p.offsets, uint64(len(data)))
		p.sizes = append(p.sizes, uint64(len(b)))
		data = append(data, b...)
	}
	return &Reader{name: "page", src: BytesSource(data), size: int64(len(data)), numRows: int64(rows), schema: s,
		cols: []columnInfo{{pages: []pageInfo{p}, rows: rows}}}
}

func pageSchema(t testing.TB, typ uint8) *schema.Schema {
	s, _ := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "v", Type: pageTypes[int(typ)%len(pageTypes)], Nullable: true}}, nil))
	return s
}

// FuzzReadPage decodes an arbitrary page encoding with arbitrary buffers as one of pageTypes.
// (For lists the page is the offsets page; the items read as nulls.) Errors must be
// FormatErrors; successes must be valid Arrow arrays of the right length.
func FuzzReadPage(f *testing.F) {
	lowerDecodeLimit(f)
	for typ := range pageTypes {
		s := pageSchema(f, uint8(typ))
		as, _ := s.ToArrow()
		for _, rate := range []float64{0, 0.4, 1} {
			rec := randomRecord(memory.DefaultAllocator, as, 10, rate, int64(typ))
			file := writeFile(f, s, Options{}, rec)
			rec.Release()
			r := mustOpen(f, file)
			enc, bufs, rows, _ := pageBytes(f, file, r, 0, 0)
			bufs = append(bufs, nil, nil, nil)
			f.Add(uint8(typ), uint16(rows), enc, bufs[0], bufs[1], bufs[2])
		}
	}
	f.Add(uint8(4), uint16(4), encDictionary(encNoNulls(encFlat(8, 0)), encBinary(encNoNulls(encFlat(64, 1)), encFlat(8, 2), 4), 2),
		[]byte{1, 0, 2, 1}, u64s(1, 3), []byte("abc"))
	f.Fuzz(func(t *testing.T, typ uint8, rows uint16, enc, b0, b1, b2 []byte) {
		n := uint64(rows % 4096)
		r := pageReader(pageSchema(t, typ), n, enc, [][]byte{b0, b1, b2})
		column := func(id int32) (int, bool) { return 0, id == 0 }
		for _, rg := range [][2]uint64{{0, n}, {n / 3, n / 3}} {
			rec, err := r.Read(context.Background(), r.schema.Fields, column, int64(rg[0]), int64(rg[1]), nil)
			if err != nil {
				if !isFormatError(err) {
					t.Fatalf("not a FormatError: %v", err)
				}
				return
			}
			arr := rec.Column(0)
			if uint64(arr.Len()) != rg[1] {
				t.Fatalf("read %d values, want %d", arr.Len(), rg[1])
			}
			if v, ok := arr.(interface{ ValidateFull() error }); ok {
				if err := v.ValidateFull(); err != nil {
					t.Fatalf("invalid array: %v", err)
				}
			}
			rec.Release()
		}
	})
}

// FuzzRoundTrip writes random data of every test type with fuzzed page limits and batch
// splits, and checks that reads of the whole and of a range give it back.
func FuzzRoundTrip(f *testing.F) {
	f.Add(int64(1), uint8(10), uint8(0), uint8(0), uint16(0))
	f.Add(int64(2), uint8(40), uint8(50), uint8(3), uint16(0))
	f.Add(int64(3), uint8(33), uint8(100), uint8(0), uint16(40))
	f.Add(int64(4), uint8(0), uint8(10), uint8(1), uint16(1))
	s, as := testSchema(f)
	f.Fuzz(func(t *testing.T, seed int64, rows uint8, nullPct uint8, pageRows uint8, pageBytes uint16) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		n := int64(rows % 64)
		rec := randomRecord(mem, as, int(n), float64(nullPct%101)/100, seed)
		defer rec.Release()
		rng := rand.New(rand.NewSource(seed))
		var batches []int
		for left := int(n); left > 0; {
			k := rng.Intn(left + 1)
			batches = append(batches, k)
			left -= k
		}
		file := writeFile(t, s, Options{MaxPageRows: int(pageRows), MaxPageBytes: int(pageBytes)}, rec, batches...)
		r := mustOpen(t, file)
		off := rng.Int63n(n + 1)
		ln := rng.Int63n(n - off + 1)
		for _, rg := range [][2]int64{{0, n}, {off, ln}} {
			got := readRange(t, r, s.Fields, rg[0], rg[1], mem)
			for i := range s.Fields {
				want := array.NewSlice(rec.Column(i), rg[0], rg[0]+rg[1])
				expectArrays(t, fmt.Sprintf("%s[%d:%d]", s.Fields[i].Name, rg[0], rg[0]+rg[1]), want, got.Column(i))
				want.Release()
			}
			got.Release()
		}
	})
}

// TestWriteFuzzCorpus regenerates the checked-in seed files under testdata/fuzz when
// LANCE_FILE_WRITE_CORPUS is set (the seeds in the fuzz functions are built at run time too).
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("LANCE_FILE_WRITE_CORPUS") == "" {
		t.Skip("set LANCE_FILE_WRITE_CORPUS=1 to regenerate testdata/fuzz seeds")
	}
	write := func(target, name string, vals ...any) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out := "go test fuzz v1\n"
		for _, v := range vals {
			switch v := v.(type) {
			case []byte:
				out += fmt.Sprintf("[]byte(%q)\n", v)
			default:
				out += fmt.Sprintf("%T(%v)\n", v, v)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range seedFiles(t) {
		write("FuzzOpen", fmt.Sprintf("seed-writer-%d", i), b)
	}
	for typ := range pageTypes {
		s := pageSchema(t, uint8(typ))
		as, _ := s.ToArrow()
		rec := randomRecord(memory.DefaultAllocator, as, 10, 0.4, int64(typ))
		file := writeFile(t, s, Options{}, rec)
		rec.Release()
		enc, bufs, rows, _ := pageBytes(t, file, mustOpen(t, file), 0, 0)
		bufs = append(bufs, nil, nil, nil)
		write("FuzzReadPage", fmt.Sprintf("seed-writer-%d", typ), uint8(typ), uint16(rows), enc, bufs[0], bufs[1], bufs[2])
	}
}
