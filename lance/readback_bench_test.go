package lance

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// BenchmarkReadBackKeys262k reads the key column and row ids of 32 fragments of 8,192 rows
// from a local disk: what a fold reads back of a doubling table's new rows.
func BenchmarkReadBackKeys262k(b *testing.B) {
	ctx := context.Background()
	st, err := storage.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	as := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	s, err := schema.FromArrow(as)
	if err != nil {
		b.Fatal(err)
	}
	var d *Dataset
	for k := range 32 {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
		for i := range 8192 {
			rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("p%d-%d", 8_000_000+k, i))
			rb.Field(1).(*array.Int64Builder).Append(int64(i))
		}
		rec := rb.NewRecord()
		rb.Release()
		if d == nil {
			d, err = Create(ctx, st, s, []arrow.Record{rec}, CreateOptions{})
		} else {
			var sd *Staged
			if sd, err = d.StageAppend(ctx, []arrow.Record{rec}, StageOptions{}); err == nil {
				d, err = d.Commit(ctx, sd)
			}
		}
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
	}
	var frags []uint64
	for _, f := range d.Manifest().Fragments {
		frags = append(frags, f.ID)
	}
	b.ResetTimer()
	for range b.N {
		recs, err := d.readIndexed(ctx, nil, "id", frags)
		if err != nil {
			b.Fatal(err)
		}
		releaseAll(recs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(32*8192), "ns/row")
}
