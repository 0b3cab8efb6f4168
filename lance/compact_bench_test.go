package lance

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// personArrow is the engine's table of internal/benchdata's Person nodes: the key as id, then
// the properties.
var personArrow = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "handle", Type: arrow.BinaryTypes.String},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "age", Type: arrow.PrimitiveTypes.Int64},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64},
}, nil)

// people is rows [k*n, (k+1)*n) of the Person table, as benchdata.GraphBatch makes them.
func people(k, n int) []arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, personArrow)
	defer b.Release()
	for i := 0; i < n; i++ {
		h := fmt.Sprintf("p%d-%d", k, i)
		b.Field(0).(*array.StringBuilder).Append(h)
		b.Field(1).(*array.StringBuilder).Append(h)
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("name-%d-%d", k, i))
		b.Field(3).(*array.Int64Builder).Append(int64(i % 90))
		b.Field(4).(*array.Float64Builder).Append(float64(i) * 0.5)
	}
	return []arrow.Record{b.NewRecord()}
}

// BenchmarkStageCompaction stages what the worker's background compaction stages: 16
// fragments of 8,192 Person rows (a 2.2 table) rewritten as one, by page copy and by decoding,
// in memory and on a local disk (without fsync, as the e2e bench's durability=none). On disk
// the page copy composes the file from ranges of the inputs (storage.Compose).
func BenchmarkStageCompaction(b *testing.B) {
	ctx := context.Background()
	const frags, rowsPer = 16, 8192
	for _, where := range []string{"mem", "disk"} {
		for _, mode := range []string{"copy", "decode"} {
			b.Run(mode+"/"+where, func(b *testing.B) {
				uri := "mem://BenchmarkStageCompaction_" + mode
				if where == "disk" {
					uri = b.TempDir()
				}
				st, err := storage.Open(ctx, uri, storage.WithLocalFsync(false))
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = st.DeletePrefix(ctx, ""); st.Close() }() // b.Run may call this again
				s, err := schema.FromArrow(personArrow)
				if err != nil {
					b.Fatal(err)
				}
				d, err := Create(ctx, st, s, people(0, rowsPer), CreateOptions{FileVersion: file.V2_2})
				if err != nil {
					b.Fatal(err)
				}
				for k := 1; k < frags; k++ {
					sa, err := d.StageAppend(ctx, people(k, rowsPer), StageOptions{})
					if err != nil {
						b.Fatal(err)
					}
					if d, err = d.Commit(ctx, sa); err != nil {
						b.Fatal(err)
					}
				}
				co := CompactionOptions{Fragments: fragmentIDs(d), NoPageCopy: mode == "decode"}
				var fileBytes uint64
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					staged, c, err := d.StageCompaction(ctx, co, StageOptions{InlineTransactionOnly: true})
					if err != nil || staged == nil || c.FragmentsAdded() != 1 || (c.FragmentsCopied() == 1) != (mode == "copy") {
						b.Fatalf("stage: %v (%d added, %d copied)", err, c.FragmentsAdded(), c.FragmentsCopied())
					}
					// The staged file is unreferenced: drop it so the store does not grow.
					df := staged.Txn.Op.Groups[0].NewFragments[0].Files[0]
					if err := st.Delete(ctx, "data/"+df.Path); err != nil {
						b.Fatal(err)
					}
					fileBytes = df.FileSizeBytes
				}
				b.ReportMetric(float64(frags*rowsPer)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
				b.ReportMetric(float64(fileBytes), "file_bytes")
			})
		}
	}
}

// BenchmarkCompactionRemap maps every row of the worker's usual compaction, 16 fragments of
// 8,192 rows merged into one, to its new address: what a commit of the compaction does for
// each id of the table's id index, on the commit path.
func BenchmarkCompactionRemap(b *testing.B) {
	const frags, rowsPer = 16, 8192
	g := compactGroup{paths: []string{"new.lance"}, ends: []uint64{frags * rowsPer}}
	for k := range uint64(frags) {
		g.old = append(g.old, compactOld{id: 100 + k, physical: rowsPer, base: k * rowsPer})
	}
	c := &Compaction{readVersion: 1, groups: []compactGroup{g}}
	committed := &Dataset{manifest: &Manifest{Version: 2, Fragments: []Fragment{{ID: 200, Files: []DataFile{{Path: "new.lance"}}}}}}
	addrs := make([]RowAddress, 0, frags*rowsPer+1024)
	for k := range uint64(frags) {
		for off := range uint64(rowsPer) {
			addrs = append(addrs, RowAddress((100+k)<<32|off))
		}
	}
	for off := range uint64(1024) { // rows of fragments the compaction left alone
		addrs = append(addrs, RowAddress(300<<32|off))
	}
	remap, err := c.Remap(committed)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var sink RowAddress
	for range b.N {
		for _, a := range addrs {
			n, _ := remap(a)
			sink += n
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(addrs)), "ns/row")
	_ = sink
}
