package lance

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// buildCopyTable creates a stable-row-id table of version v whose fragments hold sizes[i] rows
// each and no deletions. Each appended fragment's row ids are its own range reversed, and its
// rows' created and last-updated versions vary row by row, so that a rewrite that lost the
// order of the sequences or cut them wrong would show.
func buildCopyTable(t *testing.T, st storage.Store, v file.Version, sizes []int, seed uint64) *Dataset {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, int64(sizes[0]))...), CreateOptions{FileVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(sizes[0])
	for _, n := range sizes[1:] {
		s, err := d.StageAppend(ctx, rows(seq(next, next+int64(n))...), StageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids, created, updated := make([]uint64, n), make([]uint64, n), make([]uint64, n)
		for j := range n {
			ids[j] = uint64(next) + uint64(n-1-j)
			created[j] = 1 + rng.Uint64N(d.Version()+1)
			updated[j] = created[j] + rng.Uint64N(3)
		}
		f := &s.Txn.Op.Fragments[0]
		f.RowIDs, f.CreatedAt, f.LastUpdatedAt = encodeRowIDSequence(ids), encodeVersionRuns(created), encodeVersionRuns(updated)
		d = commit(t, d, s, nil)
		next += int64(n)
	}
	return d
}

// namedStore is an in-memory store of its own for each name within a test.
func namedStore(t *testing.T, name string) storage.Store {
	t.Helper()
	st, err := storage.Open(context.Background(), "mem://"+strings.ReplaceAll(t.Name(), "/", "_")+"_"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.DeletePrefix(context.Background(), ""); st.Close() })
	return st
}

func fragmentIDs(d *Dataset) []uint64 { return idsOf(d.Manifest().Fragments) }

// compactTable stages and commits a compaction of all of d's fragments as one group.
func compactTable(t *testing.T, d *Dataset, co CompactionOptions) (*Dataset, *Compaction) {
	t.Helper()
	co.Fragments = fragmentIDs(d)
	s, c, err := d.StageCompaction(context.Background(), co, StageOptions{})
	if err != nil || s == nil {
		t.Fatalf("stage compaction: %v (staged %v)", err, s != nil)
	}
	return commit(t, d, s, nil), c
}

// The page copy gives exactly what decoding gives: on the same table, with output fragments
// cut at the same rows, the same fragments (rows, row id and version sequences byte for byte,
// ids), the same rows at the same addresses, the same counts and the same Remap; only the
// copy says it copied.
func TestCompactionCopyMatchesDecode(t *testing.T) {
	for _, v := range []file.Version{file.V2_1, file.V2_2} {
		for _, kind := range copyStoreKinds {
			t.Run(v.String()+"/"+kind, func(t *testing.T) {
				sizes := slices.Repeat([]int{10}, 12)
				co := CompactionOptions{TargetRowsPerFragment: 30}
				dc := buildCopyTable(t, copyStore(t, kind, "copy"), v, sizes, 1)
				dd := buildCopyTable(t, copyStore(t, kind, "decode"), v, sizes, 1)
				before := liveRows(t, dc)
				sameRows(t, "the two tables", liveRows(t, dd), before)

				nc, cc := compactTable(t, dc, co)
				co.NoPageCopy = true
				nd, cd := compactTable(t, dd, co)
				if cc.FragmentsCopied() != 4 || cc.FragmentsAdded() != 4 || cd.FragmentsCopied() != 0 {
					t.Fatalf("copied %d of %d fragments; decoding copied %d", cc.FragmentsCopied(), cc.FragmentsAdded(), cd.FragmentsCopied())
				}
				if cc.FragmentsAdded() != cd.FragmentsAdded() || cc.FragmentsRemoved() != cd.FragmentsRemoved() || cc.RowsRewritten() != cd.RowsRewritten() {
					t.Fatalf("copy: %d added %d removed %d rows; decode: %d %d %d", cc.FragmentsAdded(), cc.FragmentsRemoved(), cc.RowsRewritten(),
						cd.FragmentsAdded(), cd.FragmentsRemoved(), cd.RowsRewritten())
				}
				fc, fd := nc.Manifest().Fragments, nd.Manifest().Fragments
				if len(fc) != len(fd) {
					t.Fatalf("%d fragments, decoding made %d", len(fc), len(fd))
				}
				for i := range fc {
					a, b := &fc[i], &fd[i]
					if a.ID != b.ID || a.PhysicalRows != b.PhysicalRows || !bytes.Equal(a.RowIDs, b.RowIDs) ||
						!bytes.Equal(a.CreatedAt, b.CreatedAt) || !bytes.Equal(a.LastUpdatedAt, b.LastUpdatedAt) {
						t.Fatalf("fragment %d differs from decoding's: %+v vs %+v", i, a, b)
					}
					fa, fb := a.Files[0], b.Files[0]
					if !slices.Equal(fa.Fields, fb.Fields) || !slices.Equal(fa.ColumnIndices, fb.ColumnIndices) ||
						fa.FileMajor != fb.FileMajor || fa.FileMinor != fb.FileMinor || fa.FileSizeBytes == 0 {
						t.Fatalf("fragment %d data file %+v, decoding's %+v", i, fa, fb)
					}
					if size, err := nc.dir.Size(context.Background(), "data/"+fa.Path); err != nil || uint64(size) != fa.FileSizeBytes {
						t.Fatalf("fragment %d: %d bytes stored (%v), %d recorded", i, size, err, fa.FileSizeBytes)
					}
				}
				after := liveRows(t, nc)
				if !slices.Equal(after, liveRows(t, nd)) {
					t.Fatal("rows or addresses differ from decoding's")
				}
				sameRows(t, "after the copy", after, before)
				checkScanMeta(t, nc, after)
				rc, err := cc.Remap(nc)
				if err != nil {
					t.Fatal(err)
				}
				rd, err := cd.Remap(nd)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range dc.Manifest().Fragments {
					for off := uint64(0); off <= f.PhysicalRows; off++ {
						old := RowAddress(f.ID<<32 | off)
						a, okA := rc(old)
						b, okB := rd(old)
						if a != b || okA != okB || (off < f.PhysicalRows) != okA {
							t.Fatalf("remap of %d:%d: copy %v/%v, decode %v/%v", f.ID, off, a, okA, b, okB)
						}
					}
				}
			})
		}
	}
}

// copyStoreKinds are the stores the page-copy tests run on: in memory the copy is built in
// memory (file.Concat.Append), on a local disk from ranges of the inputs (AppendRange and
// storage.Compose).
var copyStoreKinds = []string{"mem", "local"}

// copyStore is a store of kind of its own for each name within a test.
func copyStore(t *testing.T, kind, name string) storage.Store {
	t.Helper()
	if kind == "mem" {
		return namedStore(t, name)
	}
	st, err := storage.Open(context.Background(), t.TempDir(), storage.WithLocalFsync(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// With inputs of uneven sizes the copy cuts its fragments between input files, before one
// would pass the row target or the byte limit; rows, row ids, versions and Remap stay right.
func TestCompactionCopyCutsBetweenFiles(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := make([]int, 25)
	for i := range sizes {
		sizes[i] = 1 + rng.IntN(20)
	}
	for _, co := range []CompactionOptions{{TargetRowsPerFragment: 32}, {TargetRowsPerFragment: 1000, MaxBytesPerFile: 3000}} {
		for _, kind := range copyStoreKinds {
			t.Run(fmt.Sprintf("rows=%d/bytes=%d/%s", co.TargetRowsPerFragment, co.MaxBytesPerFile, kind), func(t *testing.T) {
				d := buildCopyTable(t, copyStore(t, kind, "t"), file.V2_2, sizes, 2)
				before := liveRows(t, d)
				nd, c := compactTable(t, d, co)
				if c.FragmentsCopied() != c.FragmentsAdded() || c.FragmentsAdded() < 3 || c.RowsRewritten() != uint64(len(before)) {
					t.Fatalf("copied %d of %d fragments, %d rows", c.FragmentsCopied(), c.FragmentsAdded(), c.RowsRewritten())
				}
				after := liveRows(t, nd)
				sameRows(t, "after", after, before)
				checkScanMeta(t, nd, after)
				// Each new fragment is whole inputs: its rows are a run of the inputs' sizes.
				at := 0
				for _, f := range nd.Manifest().Fragments {
					n := 0
					for n < int(f.PhysicalRows) {
						n += sizes[at]
						at++
					}
					if n != int(f.PhysicalRows) || f.PhysicalRows > co.TargetRowsPerFragment {
						t.Fatalf("fragment %d holds %d rows: not whole inputs within %d", f.ID, f.PhysicalRows, co.TargetRowsPerFragment)
					}
					if co.MaxBytesPerFile > 0 && f.Files[0].FileSizeBytes > co.MaxBytesPerFile+1024 {
						t.Fatalf("fragment %d: %d bytes, limit %d", f.ID, f.Files[0].FileSizeBytes, co.MaxBytesPerFile)
					}
				}
				remap, err := c.Remap(nd)
				if err != nil {
					t.Fatal(err)
				}
				now := addresses(after)
				for _, r := range before {
					if got, ok := remap(r.addr); !ok || got != now[r.key] {
						t.Fatalf("key %d: remapped to %v (%v), lives at %v", r.key, got, ok, now[r.key])
					}
				}
				if diff, err := nd.DiffFrom(ctx, d); err != nil || len(diff.NewFragments)+len(diff.NewRows)+len(diff.Removed) != 0 {
					t.Fatalf("diff across the copy: %+v %v", diff, err)
				}
			})
		}
	}
}

// Where the pages cannot be copied the group is decoded as before: a fragment with a deletion
// file, a 2.0 table, NoPageCopy, a data file of another version than its fragment says (found
// only once the copy has begun).
func TestCompactionCopyFallsBack(t *testing.T) {
	for _, kind := range copyStoreKinds {
		t.Run(kind, func(t *testing.T) { testCopyFallsBack(t, kind) })
	}
}

func testCopyFallsBack(t *testing.T, kind string) {
	ctx := context.Background()
	newStore := func(t *testing.T) storage.Store { return copyStore(t, kind, "t") }
	sizes := []int{5, 6, 7, 8}
	check := func(t *testing.T, d *Dataset, co CompactionOptions) {
		t.Helper()
		before := liveRows(t, d)
		nd, c := compactTable(t, d, co)
		if c.FragmentsCopied() != 0 || c.FragmentsAdded() != 1 {
			t.Fatalf("copied %d of %d fragments", c.FragmentsCopied(), c.FragmentsAdded())
		}
		after := liveRows(t, nd)
		sameRows(t, "after", after, before)
		checkScanMeta(t, nd, after)
	}
	t.Run("deletion", func(t *testing.T) {
		d := buildCopyTable(t, newStore(t), file.V2_2, sizes, 1)
		s, err := d.StageDelete(ctx, In("id", int64(13)), StageOptions{})
		check(t, commit(t, d, s, err), CompactionOptions{})
	})
	t.Run("2.0", func(t *testing.T) {
		check(t, buildCopyTable(t, newStore(t), file.V2_0, sizes, 1), CompactionOptions{})
	})
	t.Run("forbidden", func(t *testing.T) {
		check(t, buildCopyTable(t, newStore(t), file.V2_1, sizes, 1), CompactionOptions{NoPageCopy: true})
	})
	t.Run("file of another version", func(t *testing.T) {
		st := newStore(t)
		d := buildCopyTable(t, st, file.V2_2, sizes, 1)
		// The third fragment's file re-encoded as 2.1, its manifest entry still saying 2.2.
		f := &d.Manifest().Fragments[2]
		recs, err := d.ReadAll(ctx, ScanOptions{Fragments: []uint64{f.ID}})
		if err != nil {
			t.Fatal(err)
		}
		w, err := file.NewWriter(d.Schema(), file.Options{Version: file.V2_1})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
			r.Release()
		}
		b, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, "data/"+f.Files[0].Path, b); err != nil {
			t.Fatal(err)
		}
		f.Files[0].FileSizeBytes = uint64(len(b))
		check(t, d, CompactionOptions{})
	})
}

// On a local disk the page copy never holds the inputs or the output in memory: staging the
// compaction of 16 fragments of 4,096 rows (appended as loads append them) allocates a small
// part (a third at most) of the file it writes (the rows' id and version sequences, mostly), where building the
// file in memory allocates about twice its size.
func TestCompactionCopyOnLocalDiskStaysOutOfMemory(t *testing.T) {
	ctx := context.Background()
	as := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "body", Type: arrow.BinaryTypes.String}}, nil)
	sc, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	// Rows of about 200 bytes, as a graph's nodes with a few properties are.
	batch := func(k int) []arrow.Record {
		b := array.NewRecordBuilder(memory.DefaultAllocator, as)
		defer b.Release()
		for i := range 4096 {
			b.Field(0).(*array.Int64Builder).Append(int64(k*4096 + i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d of batch %d %s", i, k, strings.Repeat("x", 180)))
		}
		return []arrow.Record{b.NewRecord()}
	}
	d, err := Create(ctx, copyStore(t, "local", "t"), sc, batch(0), CreateOptions{FileVersion: file.V2_2})
	for k := 1; k < 16 && err == nil; k++ {
		var s *Staged
		if s, err = d.StageAppend(ctx, batch(k), StageOptions{}); err == nil {
			d, err = d.Commit(ctx, s)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	before := liveRows(t, d)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	s, c, err := d.StageCompaction(ctx, CompactionOptions{Fragments: fragmentIDs(d)}, StageOptions{})
	runtime.ReadMemStats(&m1)
	if err != nil || s == nil || c.FragmentsCopied() != 1 {
		t.Fatalf("stage: %v (copied %d)", err, c.FragmentsCopied())
	}
	size := s.Txn.Op.Groups[0].NewFragments[0].Files[0].FileSizeBytes
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > size/3 {
		t.Fatalf("staging a %d-byte file allocated %d bytes", size, alloc)
	}
	nd := commit(t, d, s, nil)
	after := liveRows(t, nd)
	sameRows(t, "after", after, before)
	checkScanMeta(t, nd, after)
}
