package file

import (
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// A batch written at once is encoded into an output sized for it up front: the output is not
// grown (and copied) page after page. A load writes each table's rows in one batch, and its
// commit holds the file whole until it is written, so each copy was memory the commit held.
func TestWriterSizesTheOutputForTheBatch(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	name := strings.Repeat("n", 2900)
	for i := range 4096 {
		b.Field(0).(*array.StringBuilder).Append(strings.Repeat("x", 20))
		b.Field(1).(*array.StringBuilder).Append(name)
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecord()
	defer rec.Release()
	for _, v := range []Version{V2_1, V2_2} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		w, err := NewWriter(s, Options{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		out, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; float64(alloc) > 1.25*float64(len(out)) {
			t.Errorf("%v: %d bytes allocated for a file of %d", v, alloc, len(out))
		}
	}
}
