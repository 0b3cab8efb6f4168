package file

import (
	"bytes"
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

// concatParts writes rows [cuts[i], cuts[i+1]) of rec as one file each and concatenates them,
// by Append (whole) and by AppendRange (ranged, its parts put together).
func concatParts(t *testing.T, s *schema.Schema, opts Options, rec arrow.Record, cuts []int64) (whole, ranged []byte, parts [][]byte) {
	t.Helper()
	c := NewConcat(s)
	for i := 0; i+1 < len(cuts); i++ {
		part := rec.NewSlice(cuts[i], cuts[i+1])
		var batches []int
		if part.NumRows() >= 16 {
			batches = []int{5, 0, 11} // slices of the part: arrays with offsets
		}
		b := writeFile(t, s, opts, part, batches...)
		part.Release()
		if err := c.Append(context.Background(), b, fmt.Sprintf("part%d.lance", i)); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, b)
	}
	if c.NumRows() != cuts[len(cuts)-1]-cuts[0] {
		t.Fatalf("NumRows %d, want %d", c.NumRows(), cuts[len(cuts)-1]-cuts[0])
	}
	out, err := c.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out, concatRanges(t, s, parts), parts
}

// concatRanges concatenates inputs by AppendRange and returns the file its parts make.
func concatRanges(t *testing.T, s *schema.Schema, inputs [][]byte) []byte {
	t.Helper()
	c := NewConcat(s)
	for i, b := range inputs {
		if err := c.AppendRange(context.Background(), BytesSource(b), fmt.Sprintf("part%d.lance", i)); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := c.FinishParts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return assemble(parts, inputs)
}

// assemble is the file parts describe, the ranges taken from inputs.
func assemble(parts []Part, inputs [][]byte) []byte {
	var out []byte
	for _, p := range parts {
		if p.Length == 0 {
			out = append(out, p.Data...)
		} else {
			out = append(out, inputs[p.Input][p.Offset:p.Offset+p.Length]...)
		}
	}
	return out
}

// The concatenation of files reads back, through this package's reader, as the rows of the
// files one after the other: every type the reader decodes, nullable or not, with and without
// nulls, pages of every size, 2.1 and 2.2 (compressed too), whole and by ranges across the
// joins.
func TestConcatRoundTrip(t *testing.T) {
	_, all := testSchema(t)
	var keep []arrow.Field
	for _, f := range all.Fields() {
		if fsl, ok := f.Type.(*arrow.FixedSizeListType); (ok && fsl.Elem().ID() == arrow.BOOL) || f.Type.ID() == arrow.STRUCT {
			continue // the reader does not decode these in 2.1 files; TestConcatCopiesPages covers them
		}
		keep = append(keep, f)
	}
	s, as := lanceSchema(t, arrow.NewSchema(keep, nil))
	optss := []Options{{}, {MaxPageRows: 7}, {MaxPageBytes: 100}, {Compress: true}}
	for _, v := range []Version{V2_1, V2_2} {
		for _, rate := range []float64{0, 0.3, 1} {
			for _, opts := range optss {
				if opts.Compress && v == V2_1 {
					continue
				}
				opts.Version = v
				t.Run(fmt.Sprintf("%s/nulls=%v/pagebytes=%d/pagerows=%d/lz4=%v", v, rate, opts.MaxPageBytes, opts.MaxPageRows, opts.Compress), func(t *testing.T) {
					mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
					defer mem.AssertSize(t, 0)
					rec := randomRecord(mem, as, 300, rate, 1)
					defer rec.Release()
					whole, ranged, _ := concatParts(t, s, opts, rec, []int64{0, 1, 38, 38 + 100, 300})
					for _, out := range [][]byte{whole, ranged} {
						r := mustOpen(t, out)
						if r.Version() != v || r.NumRows() != 300 || r.NumColumns() != len(ColumnFields(s, v)) {
							t.Fatalf("version %s rows %d columns %d", r.Version(), r.NumRows(), r.NumColumns())
						}
						checkReadsBack(t, r, s, rec, mem)
					}
				})
			}
		}
	}
}

// Every column type the writer emits, structs and vectors of booleans included (which the
// reader does not decode): the output's pages are the inputs' pages in order, their buffers
// byte for byte and 64-byte aligned, their layouts and lengths unchanged, their priorities
// moved by the rows before them.
func TestConcatCopiesPages(t *testing.T) {
	s, as := testSchema(t)
	for _, v := range []Version{V2_1, V2_2} {
		rec := randomRecord(memory.DefaultAllocator, as, 200, 0.3, 4)
		cuts := []int64{0, 70, 71, 200}
		whole, ranged, parts := concatParts(t, s, Options{Version: v, MaxPageRows: 9}, rec, cuts)
		rec.Release()
		for _, out := range [][]byte{whole, ranged} {
			checkCopiedPages(t, v, out, parts, s, cuts)
		}
	}
}

// checkCopiedPages checks that out's pages are those of parts, in order, as
// TestConcatCopiesPages says.
func checkCopiedPages(t *testing.T, v Version, out []byte, parts [][]byte, s *schema.Schema, cuts []int64) {
	t.Helper()
	{
		gotV, got := testColumns21(t, out)
		if gotV != v {
			t.Fatalf("footer says %s, want %s", gotV, v)
		}
		next := make([]int, len(got))
		for k, part := range parts {
			_, in := testColumns21(t, part)
			if len(in) != len(got) {
				t.Fatalf("%s: %d columns, input %d has %d", v, len(got), k, len(in))
			}
			for c := range in {
				for _, p := range in[c] {
					q := got[c][next[c]]
					next[c]++
					if q.rows != p.rows || q.priority != p.priority+uint64(cuts[k]) || !bytes.Equal(q.layout, p.layout) || len(q.bufs) != len(p.bufs) {
						t.Fatalf("%s column %d page %d: rows %d priority %d, input %d page: rows %d priority %d (+%d)",
							v, c, next[c]-1, q.rows, q.priority, k, p.rows, p.priority, cuts[k])
					}
					for b := range p.bufs {
						if !bytes.Equal(q.bufs[b], p.bufs[b]) {
							t.Fatalf("%s column %d page %d buffer %d differs from the input's", v, c, next[c]-1, b)
						}
					}
				}
			}
		}
		for c := range got {
			if next[c] != len(got[c]) {
				t.Fatalf("%s column %d: %d pages, the inputs have %d", v, c, len(got[c]), next[c])
			}
		}
		r := mustOpen(t, out)
		if !bytes.Equal(schema.EncodeSchemaMessage(r.Schema()), schema.EncodeSchemaMessage(s)) || r.NumRows() != cuts[len(cuts)-1] {
			t.Fatalf("%s: descriptor says %d rows and another schema", v, r.NumRows())
		}
	}
}

// With no gap allowed between the buffers of a range, every page buffer that does not end
// exactly where the next begins starts a range of its own: the output, made of many ranges and
// paddings, still holds the inputs' pages, aligned, and reads back.
func TestConcatRangesSplitAtGaps(t *testing.T) {
	defer func(g uint64) { rangeGap = g }(rangeGap)
	rangeGap = 0
	s, as := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := randomRecord(mem, as, 300, 0.3, 9)
	defer rec.Release()
	cuts := []int64{0, 50, 300}
	var inputs [][]byte
	for i := 0; i+1 < len(cuts); i++ {
		part := rec.NewSlice(cuts[i], cuts[i+1])
		inputs = append(inputs, writeFile(t, s, Options{Version: V2_2, MaxPageRows: 7}, part))
		part.Release()
	}
	c := NewConcat(s)
	for i, b := range inputs {
		if err := c.AppendRange(context.Background(), BytesSource(b), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := c.FinishParts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ranges := 0
	for _, p := range parts {
		if p.Length > 0 {
			ranges++
		}
	}
	if ranges <= 2*len(inputs) {
		t.Fatalf("%d ranges for %d inputs of many pages: the gaps did not split them", ranges, len(inputs))
	}
	out := assemble(parts, inputs)
	checkCopiedPages(t, V2_2, out, inputs, s, cuts)
	checkReadsBack(t, mustOpen(t, out), s, rec, mem)
}

func expectNotCopyable(t *testing.T, what string, err error) {
	t.Helper()
	var ce *CopyError
	if !errors.Is(err, ErrNotCopyable) || !errors.As(err, &ce) {
		t.Fatalf("%s: %v, want an error matching ErrNotCopyable", what, err)
	}
}

// Inputs that cannot share a file are refused, and a refusal leaves the concatenation as it
// was: the files accepted before it still make a good file.
func TestConcatRefusals(t *testing.T) {
	ctx := context.Background()
	as := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	s, as := lanceSchema(t, as)
	rec := randomRecord(memory.DefaultAllocator, as, 50, 0.2, 5)
	defer rec.Release()
	f21 := writeFile(t, s, Options{Version: V2_1}, rec)
	f22 := writeFile(t, s, Options{Version: V2_2}, rec)
	f20 := writeFile(t, s, Options{Version: V2_0}, rec)
	other, oas := lanceSchema(t, arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "t", Type: arrow.BinaryTypes.String}}, nil))
	orec := randomRecord(memory.DefaultAllocator, oas, 10, 0, 6)
	defer orec.Release()
	fOther := writeFile(t, other, Options{Version: V2_1}, orec)

	for _, in := range []struct {
		what string
		b    []byte
	}{{"2.0 file", f20}, {"another schema", fOther}, {"not a Lance file", []byte("not a lance file at all, nothing like one!")}} {
		expectNotCopyable(t, in.what+" by AppendRange", NewConcat(s).AppendRange(ctx, BytesSource(in.b), "x"))
	}
	rc := NewConcat(s)
	if err := rc.AppendRange(ctx, BytesSource(f21), "a"); err != nil {
		t.Fatal(err)
	}
	expectNotCopyable(t, "2.2 after 2.1 by AppendRange", rc.AppendRange(ctx, BytesSource(f22), "b"))
	if rc.Append(ctx, f21, "c") == nil {
		t.Fatal("Append after AppendRange succeeded")
	}
	if _, err := rc.Finish(); err == nil {
		t.Fatal("Finish of a ranged concatenation succeeded")
	}
	if parts, err := rc.FinishParts(ctx); err != nil || PartsSize(parts) <= uint64(len(f21)/2) {
		t.Fatalf("FinishParts after refusals: %d bytes, %v", PartsSize(parts), err)
	}
	if c := NewConcat(s); c.Append(ctx, f21, "a") != nil || c.AppendRange(ctx, BytesSource(f21), "b") == nil {
		t.Fatal("AppendRange after Append succeeded")
	}
	expectNotCopyable(t, "2.0 file", NewConcat(s).Append(ctx, f20, "f20"))
	expectNotCopyable(t, "another schema", NewConcat(s).Append(ctx, fOther, "other"))
	expectNotCopyable(t, "not a Lance file", NewConcat(s).Append(ctx, []byte("not a lance file at all, nothing like one!"), "junk"))

	c := NewConcat(nil)
	if err := c.Append(ctx, f21, "a"); err != nil {
		t.Fatal(err)
	}
	expectNotCopyable(t, "2.2 after 2.1", c.Append(ctx, f22, "b"))
	expectNotCopyable(t, "another schema after the first file", c.Append(ctx, fOther, "c"))
	if err := c.Append(ctx, f21, "d"); err != nil {
		t.Fatal(err)
	}
	out, err := c.Finish()
	if err != nil {
		t.Fatal(err)
	}
	got := readRange(t, mustOpen(t, out), s.Fields, 0, 100, nil)
	defer got.Release()
	for i := range s.Fields {
		want, _ := array.Concatenate([]arrow.Array{rec.Column(i), rec.Column(i)}, memory.DefaultAllocator)
		expectArrays(t, s.Fields[i].Name, want, got.Column(i))
		want.Release()
	}
	if _, err := c.Finish(); err == nil {
		t.Fatal("Finish twice succeeded")
	}
	if _, err := NewConcat(s).Finish(); err == nil {
		t.Fatal("Finish of no files succeeded")
	}
}

// What the container can hold but a copy would lose is refused: column buffers, a column
// encoding other than the plain one, fields of the column or page messages this package does
// not know, a priority past the file's rows, pages that do not add up to the file's rows.
func TestConcatRefusesWhatItCannotCarry(t *testing.T) {
	plain := func() columnInfo {
		return columnInfo{plainEnc: true, rows: 3, pages: []pageInfo{{rows: 3, encoding: mustLayout(t)}}}
	}
	cases := map[string]func(*columnInfo){
		"column buffers":        func(ci *columnInfo) { ci.colBuffers = 1 },
		"column encoding":       func(ci *columnInfo) { ci.plainEnc = false },
		"unknown column":        func(ci *columnInfo) { ci.unknown = true },
		"unknown page field":    func(ci *columnInfo) { ci.pages[0].unknown = true },
		"priority past rows":    func(ci *columnInfo) { ci.pages[0].priority = 4 },
		"rows do not add up":    func(ci *columnInfo) { ci.rows = 2 },
		"layout does not parse": func(ci *columnInfo) { ci.pages[0].encoding = []byte{0xff} },
	}
	ok := plain()
	if err := checkCopyColumn(&ok, 3, nil); err != nil {
		t.Fatalf("plain column refused: %v", err)
	}
	for name, spoil := range cases {
		ci := plain()
		spoil(&ci)
		if err := checkCopyColumn(&ci, 3, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// mustLayout is the PageLayout of an all-null 2.1 page of a nullable item.
func mustLayout(t *testing.T) []byte {
	t.Helper()
	as := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
	s, as := lanceSchema(t, as)
	rec := randomRecord(memory.DefaultAllocator, as, 3, 1, 1)
	defer rec.Release()
	_, cols := testColumns21(t, writeFile(t, s, Options{Version: V2_1}, rec))
	return cols[0][0].layout
}

// A corrupt input never yields a bad file, by Append or AppendRange: each byte flip and
// truncation of the second input is either refused (ErrNotCopyable) or copied faithfully, so that the output's rows of that
// input read exactly as the input itself reads (the same values, or an error both ways).
func TestConcatCorruptInputs(t *testing.T) {
	ctx := context.Background()
	as := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}}, nil)
	s, as := lanceSchema(t, as)
	rec := randomRecord(memory.DefaultAllocator, as, 40, 0.2, 7)
	defer rec.Release()
	for _, v := range []Version{V2_1, V2_2} {
		good := writeFile(t, s, Options{Version: v, MaxPageRows: 16}, rec)
		rng := rand.New(rand.NewSource(8))
		refused, copied := 0, 0
		for k := 0; k < 600; k++ {
			bad := bytes.Clone(good)
			if k%10 == 9 {
				bad = bad[:rng.Intn(len(bad))]
			} else {
				bad[rng.Intn(len(bad))] ^= byte(1 + rng.Intn(255))
			}
			ranged := k%2 == 1 // by AppendRange
			c := NewConcat(s)
			add := func(b []byte, name string) error {
				if ranged {
					return c.AppendRange(ctx, BytesSource(b), name)
				}
				return c.Append(ctx, b, name)
			}
			if err := add(good, "good"); err != nil {
				t.Fatal(err)
			}
			if err := add(bad, "bad"); err != nil {
				expectNotCopyable(t, fmt.Sprintf("flip %d", k), err)
				refused++
				continue
			}
			copied++
			var out []byte
			var err error
			if ranged {
				var parts []Part
				if parts, err = c.FinishParts(ctx); err == nil {
					out = assemble(parts, [][]byte{good, bad})
				}
			} else {
				out, err = c.Finish()
			}
			if err != nil {
				t.Fatalf("flip %d: accepted, then Finish: %v", k, err)
			}
			want, werr := readWhole(bad, s, 0, 40)
			got, gerr := readWhole(out, s, 40, 40)
			switch {
			case (werr == nil) != (gerr == nil):
				t.Fatalf("%s flip %d: the input reads with %v, its copy with %v", v, k, werr, gerr)
			case werr == nil:
				for i := range s.Fields {
					if !array.Equal(want.Column(i), got.Column(i)) {
						t.Fatalf("%s flip %d: column %d reads otherwise from the copy", v, k, i)
					}
				}
				want.Release()
				got.Release()
			}
		}
		if refused == 0 || copied == 0 {
			t.Fatalf("%s: %d refused, %d copied: the flips should land in both metadata and values", v, refused, copied)
		}
	}
}

func readWhole(b []byte, s *schema.Schema, off, n int64) (arrow.Record, error) {
	r, err := Open(context.Background(), BytesSource(b), "x")
	if err != nil {
		return nil, err
	}
	return r.Read(context.Background(), s.Fields, nil, off, n, nil)
}
