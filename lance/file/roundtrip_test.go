package file

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

func TestRoundTripAllTypes(t *testing.T) {
	s, as := testSchema(t)
	for _, rate := range []float64{0, 0.3, 1} {
		for _, opts := range []Options{{}, {MaxPageRows: 7}, {MaxPageBytes: 100}, {MaxPageBytes: 1}} {
			t.Run(fmt.Sprintf("nulls=%v/pagebytes=%d/pagerows=%d", rate, opts.MaxPageBytes, opts.MaxPageRows), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				rec := randomRecord(mem, as, 300, rate, 1)
				defer rec.Release()
				// non-nullable columns must not get nulls: randomRecord only nulls nullable ones
				checkRoundTrip(t, s, opts, rec, len(s.Flatten()), mem)
			})
		}
	}
}

// checkRoundTrip writes rec's 300 rows in slices, reads them back whole and in 40 random
// projected ranges (across page boundaries), and compares value by value; columns is the
// file's expected column count.
func checkRoundTrip(t *testing.T, s *schema.Schema, opts Options, rec arrow.Record, columns int, mem memory.Allocator) {
	t.Helper()
	file := writeFile(t, s, opts, rec, 1, 0, 37, 100, 62)
	r := mustOpen(t, file)
	if r.NumRows() != 300 || r.NumColumns() != columns {
		t.Fatalf("rows %d columns %d", r.NumRows(), r.NumColumns())
	}
	checkReadsBack(t, r, s, rec, mem)
}

// checkReadsBack reads rec's 300 rows back from r whole and in 40 random projected ranges,
// and compares value by value.
func checkReadsBack(t *testing.T, r *Reader, s *schema.Schema, rec arrow.Record, mem memory.Allocator) {
	t.Helper()
	got := readRange(t, r, s.Fields, 0, 300, mem)
	defer got.Release()
	for i := range s.Fields {
		expectArrays(t, s.Fields[i].Name, rec.Column(i), got.Column(i))
	}
	rng := rand.New(rand.NewSource(2))
	for k := 0; k < 40; k++ {
		i := rng.Intn(len(s.Fields))
		off := rng.Int63n(301)
		n := rng.Int63n(301 - off)
		part := readRange(t, r, s.Fields[i:i+1], off, n, mem)
		want := array.NewSlice(rec.Column(i), off, off+n)
		expectArrays(t, fmt.Sprintf("%s[%d:%d]", s.Fields[i].Name, off, off+n), want, part.Column(0))
		want.Release()
		part.Release()
	}
}

func TestReadProjectionOrderAndSchema(t *testing.T) {
	s, as := testSchema(t)
	rec := randomRecord(memory.DefaultAllocator, as, 50, 0.2, 3)
	defer rec.Release()
	r := mustOpen(t, writeFile(t, s, Options{}, rec))
	if got := r.Schema().Flatten(); len(got) != len(s.Flatten()) {
		t.Fatalf("file schema has %d fields, want %d", len(got), len(s.Flatten()))
	}
	// fields in another order than the file's
	got := readRange(t, r, []*schema.Field{s.Fields[5], s.Fields[0]}, 10, 20, nil)
	defer got.Release()
	for k, i := range []int{5, 0} {
		want := array.NewSlice(rec.Column(i), 10, 30)
		expectArrays(t, s.Fields[i].Name, want, got.Column(k))
		want.Release()
	}
	if got.Schema().Field(0).Name != s.Fields[5].Name {
		t.Fatalf("record schema %v", got.Schema())
	}
	_ = arrow.Null
}
