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
)

// benchIndexTable is a table of n rows: id (the bench's string keys "p-1-<i>"), text (4 to 19
// words) and v (384 float32s when dim > 0).
func benchIndexTable(b *testing.B, n, dim int) *Dataset {
	b.Helper()
	fields := []arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "text", Type: arrow.BinaryTypes.String, Nullable: true}}
	if dim > 0 {
		fields = append(fields, arrow.Field{Name: "v", Type: arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32), Nullable: true})
	}
	as := arrow.NewSchema(fields, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer rb.Release()
	seed := uint64(0x9e3779b97f4a7c15)
	next := func() uint64 { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; return seed }
	words := []string{"graph", "nodes", "edge", "indexing", "query", "vectors", "table", "commit", "The", "branch"}
	for i := 0; i < n; i++ {
		rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("p-1-%d", i))
		text := ""
		for w := 4 + int(next()%16); w > 0; w-- {
			text += words[next()%uint64(len(words))] + fmt.Sprint(next()%300) + " "
		}
		rb.Field(1).(*array.StringBuilder).Append(text)
		if dim > 0 {
			lb := rb.Field(2).(*array.FixedSizeListBuilder)
			lb.Append(true)
			for j := 0; j < dim; j++ {
				lb.ValueBuilder().(*array.Float32Builder).Append(float32(next()%20001)/10000 - 1)
			}
		}
	}
	rec := rb.NewRecord()
	defer rec.Release()
	s, err := schema.FromArrow(as)
	if err != nil {
		b.Fatal(err)
	}
	d, err := Create(context.Background(), memStore(b), s, []arrow.Record{rec}, CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func benchIndexBuild(b *testing.B, n, dim int, spec IndexSpec) {
	d := benchIndexTable(b, n, dim)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := d.StageIndices(ctx, []IndexSpec{spec}, StageOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBTreeBuild100k(b *testing.B) {
	benchIndexBuild(b, 100_000, 0, IndexSpec{Kind: IndexBTree, Column: "id"})
}

func BenchmarkInvertedBuild100k(b *testing.B) {
	benchIndexBuild(b, 100_000, 0, IndexSpec{Kind: IndexInverted, Column: "text"})
}

func BenchmarkIVFFlatBuild20k(b *testing.B) {
	benchIndexBuild(b, 20_000, 384, IndexSpec{Kind: IndexIVFFlat, Column: "v"})
}

// BenchmarkIndexBuildPeakHeap reports the live heap an index build holds at its peak
// (benchPeak), its files staged in memory as the worker stages them: peak_MiB and peak_B/row
// per row of the table. engine's IndexWorkBytes estimates index work by these figures.
func BenchmarkIndexBuildPeakHeap(b *testing.B) {
	for _, c := range []struct {
		name   string
		n, dim int
		spec   IndexSpec
	}{
		{"btree-200k", 200_000, 0, IndexSpec{Kind: IndexBTree, Column: "id"}},
		{"inverted-200k", 200_000, 0, IndexSpec{Kind: IndexInverted, Column: "text"}},
		{"ivf_flat-20k", 20_000, 384, IndexSpec{Kind: IndexIVFFlat, Column: "v"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			d := benchIndexTable(b, c.n, c.dim)
			benchPeak(b, c.n, func() {
				if _, err := d.StageIndices(context.Background(), []IndexSpec{c.spec}, StageOptions{}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkBTreeFold400kPlus100k folds 100k appended rows into a BTREE of 400k; beside
// BenchmarkBTreeBuild500k it shows what the fold saves over building the index anew. The old
// page data is read from its file each time.
func BenchmarkBTreeFold400kPlus100k(b *testing.B) {
	benchBTreeLag(b, 400_000, 100_000, lagFold)
}

func BenchmarkBTreeBuild500k(b *testing.B) {
	benchBTreeLag(b, 400_000, 100_000, lagBuild)
}

// BenchmarkBTreeFoldCached256kPlus256k is the fold the worker makes when a table has doubled
// since its index was last folded (indexLagShare): from the old page data this process
// cached, as the worker's folds of its own indices start.
func BenchmarkBTreeFoldCached256kPlus256k(b *testing.B) {
	benchBTreeLag(b, 262_144, 262_144, lagFoldCached)
}

// BenchmarkBTreeFoldAppend256kPlus256k is that fold with keys that only grow: the fresh keys
// all sort after the old ones, and the fold appends them (btree_append.go).
func BenchmarkBTreeFoldAppend256kPlus256k(b *testing.B) {
	benchBTreeLag(b, 262_144, 262_144, lagFoldAppend)
}

// How benchBTreeLag brings the index up to date.
const (
	lagBuild      = iota // built anew over every row
	lagFold              // folded, the old page data read from its file
	lagFoldCached        // folded, the old page data in the cache
	lagFoldAppend        // folded, the old page data in the cache, the new keys after the old
)

// BenchmarkBTreeFoldPeakHeap reports the live heap a fold of a BTREE on the bench's ~10-byte
// string keys holds at its peak (peak_MiB; peak_B/row: per row of the folded index), as a
// worker's folds make it when its table has doubled: appending keys that sort after the old
// ones, and merging keys that interleave with them (old page data read from its file). The
// worker estimates index work by it (engine's IndexWorkBytes); docs/operators.md sizes memory by it.
func BenchmarkBTreeFoldPeakHeap(b *testing.B) {
	b.Run("append-512k+512k", func(b *testing.B) { benchBTreeLagHeap(b, 1<<19, 1<<19, lagFoldAppend, true) })
	b.Run("merge-800k+200k", func(b *testing.B) { benchBTreeLagHeap(b, 800_000, 200_000, lagFold, true) })
}

// benchBTreeLag indexes id on a table of n rows, appends more rows, and times bringing the
// index up to date (how), its files written.
func benchBTreeLag(b *testing.B, n, more, how int) { benchBTreeLagHeap(b, n, more, how, false) }

// benchBTreeLagHeap is benchBTreeLag, which with peak reports the live heap's peak of a fold
// instead (benchPeak: the collector then runs far more often than usual, so its times are not
// the fold's).
func benchBTreeLagHeap(b *testing.B, n, more, how int, peak bool) {
	ctx := context.Background()
	d := benchIndexTable(b, n, 0)
	spec := []IndexSpec{{Kind: IndexBTree, Column: "id"}}
	s, err := d.StageIndices(ctx, spec, StageOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if d, err = d.Commit(ctx, s); err != nil {
		b.Fatal(err)
	}
	as := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "text", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer rb.Release()
	prefix := "p-1-" // "p-1-262144" sorts before "p-1-99": the keys interleave
	if how == lagFoldAppend {
		prefix = "p-2-"
	}
	for i := n; i < n+more; i++ {
		rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s%d", prefix, i))
		rb.Field(1).AppendNull()
	}
	rec := rb.NewRecord()
	defer rec.Release()
	if s, err = d.StageAppend(ctx, []arrow.Record{rec}, StageOptions{}); err != nil {
		b.Fatal(err)
	}
	if d, err = d.Commit(ctx, s); err != nil {
		b.Fatal(err)
	}
	old := d.BTree("id")
	var page arrow.Record
	if how == lagFoldCached || how == lagFoldAppend {
		if page, _, err = d.readBTreeData(ctx, old, 1<<40); err != nil || page == nil {
			b.Fatal(err)
		}
		defer page.Release()
	}
	fo, err := d.fileOptions(file.Options{})
	if err != nil {
		b.Fatal(err)
	}
	fold := func() {
		if page != nil {
			b.StopTimer()
			btreeCache.put(old.UUID, page) // a fold forgets the index it folded
			b.StartTimer()
		}
		w := &fileWrites{}
		if how == lagBuild {
			if _, err := d.buildBTree(ctx, "id", "", fo, w); err != nil {
				b.Fatal(err)
			}
		} else if _, ok, err := d.foldBTree(ctx, nil, old, "id", fo, w); err != nil || !ok {
			b.Fatalf("fold: %v %v", ok, err)
		}
		s := &Staged{base: d, files: w.files, inlineOnly: true}
		if err := s.WriteTransaction(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if peak {
		benchPeak(b, n+more, fold)
		return
	}
	b.ResetTimer()
	for range b.N {
		fold()
	}
}

// BenchmarkBTreePageDataEncode encodes the page data of a BTREE of 524,288 string keys (the
// bench's shape) at each file version: what a fold of that size spends writing its index.
func BenchmarkBTreePageDataEncode(b *testing.B) {
	const n = 1 << 19
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	ub := array.NewUint64Builder(memory.DefaultAllocator)
	for i := range n {
		sb.Append(fmt.Sprintf("p%d-%d", i/8192, i%8192))
		ub.Append(uint64(i))
	}
	vals, ids := sb.NewArray(), ub.NewArray()
	rec := array.NewRecord(btreeDataSchema(arrow.BinaryTypes.String), []arrow.Array{vals, ids}, n)
	defer rec.Release()
	vals.Release()
	ids.Release()
	for _, v := range file.Known {
		b.Run(v.String(), func(b *testing.B) {
			for range b.N {
				if _, err := encodeIndexFile(rec, file.Options{Version: v}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBTreeSortStrings orders 262,144 new string keys of the bench's shape ("p<batch>-<i>",
// 32 fragments of 8,192), as a fold of an id BTREE does: the ns/key of the sort alone.
func BenchmarkBTreeSortStrings(b *testing.B) {
	var chunks []arrow.Array
	var ids []uint64
	for k := 32; k < 64; k++ {
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		for i := range 8192 {
			sb.Append(fmt.Sprintf("p%d-%d", k, i))
			ids = append(ids, uint64(k)<<32|uint64(i))
		}
		chunks = append(chunks, sb.NewArray())
	}
	for b.Loop() {
		sortBTreeEntries(chunks, ids)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ids)), "ns/key")
}

// BenchmarkInvertedBuildKeys100k indexes the keys `make bench` publishes, "p<batch>-<i>" in
// batches of 4,096: the full-text index the reference builds on a String @key. Most tokens
// are in few documents, so the per-token costs show, where BenchmarkInvertedBuild100k's
// words are each in thousands.
func BenchmarkInvertedBuildKeys100k(b *testing.B) {
	as := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer rb.Release()
	for i := range 100_000 {
		rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("p%d-%d", 8_000_000+i/4096, i%4096))
	}
	rec := rb.NewRecord()
	defer rec.Release()
	s, err := schema.FromArrow(as)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	d, err := Create(ctx, memStore(b), s, []arrow.Record{rec}, CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := d.StageIndices(ctx, []IndexSpec{{Kind: IndexInverted, Column: "id"}}, StageOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
