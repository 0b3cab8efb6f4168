package lance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// indexFileRows decodes the index file name of x: every row, as one record.
func indexFileRows(t *testing.T, d *Dataset, x *Index, name string) arrow.Record {
	t.Helper()
	r := openIndexFile(t, d, x, name)
	rec, err := readIndexRows(context.Background(), r, name, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Release)
	return rec
}

// isCached says the page-data cache holds x's page data: after a build or a merged fold, not
// after an appending fold.
func isCached(x *Index) bool {
	rec := btreeCache.get(x.UUID)
	if rec != nil {
		rec.Release()
	}
	return rec != nil
}

// foldBoth folds the BTREE on column of d twice from the same version: from the cache (an
// appending fold where it can) and from the page data file (always a merge: only page data
// this process wrote in order is known to be in order). It returns the first's dataset and insists that both wrote the same entries and
// page lookup.
func foldBoth(t *testing.T, d *Dataset, column string) *Dataset {
	t.Helper()
	ctx := context.Background()
	spec := []IndexSpec{{Column: column, Kind: IndexBTree}}
	s, err := d.StageIndices(ctx, spec, StageOptions{})
	folded := commit(t, d, s, err)

	btreeCache.forget(d.BTree(column).UUID) // the first fold did: the second reads the file
	s, err = d.StageIndices(ctx, spec, StageOptions{})
	if err == nil {
		err = s.WriteTransaction(ctx) // its files, without a commit: both folds read version d
	}
	if err != nil {
		t.Fatal(err)
	}
	merged := s.Txn.Op.NewIndices[0]
	btreeCache.forget(merged.UUID)
	for _, name := range []string{btreeDataFile, btreeLookupFile} {
		a, b := indexFileRows(t, folded, folded.BTree(column), name), indexFileRows(t, d, &merged, name)
		if !array.RecordEqual(a, b) {
			t.Fatalf("%s of %s: the fold from the cache wrote\n%v\nthe merge\n%v", name, column, a, b)
		}
	}
	return folded
}

// A BTREE whose keys only grow is folded by appending: its old page data file copied page
// for page and the fresh entries after it. The files read as the merge's would, entry for
// entry and page for page, through a chain of such folds, on a store that composes the file
// from ranges and one that builds it in memory, with and without stable row ids, with the
// build's page data cached or not (the index's end suffices either way, and an appending fold
// leaves nothing cached); lookups answer exactly as a scan across every join.
func TestBTreeFoldAppendsKeysThatGrow(t *testing.T) {
	for _, kind := range copyStoreKinds {
		for _, stable := range []bool{true, false} {
			for _, cached := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/stable=%v/cached=%v", kind, stable, cached), func(t *testing.T) {
					ctx := context.Background()
					if !cached {
						withoutBTreeCache(t)
					}
					d, err := Create(ctx, copyStore(t, kind, "t"), testSchema(t), rows(seq(0, 9000)...), CreateOptions{DisableStableRowIDs: !stable})
					if err != nil {
						t.Fatal(err)
					}
					s, err := d.StageBTreeIndex(ctx, "id", IndexOptions{})
					d = commit(t, d, s, err)
					for k, batch := range [][2]int64{{9000, 9100}, {9100, 13000}, {13000, 13001}} {
						s, err = d.StageAppend(ctx, rows(seq(batch[0], batch[1])...), StageOptions{})
						d = commit(t, d, s, err)
						appended, _ := BTreeFolds()
						d = foldBoth(t, d, "id")
						x := d.BTree("id")
						if now, _ := BTreeFolds(); now != appended+1 {
							t.Fatalf("fold %d merged: %d appending folds", k, now-appended)
						}
						if isCached(x) {
							t.Fatalf("fold %d appended, and the cache holds its page data", k)
						}
						if rows, _ := d.Uncovered(x); rows != 0 {
							t.Fatalf("fold %d leaves %d rows uncovered", k, rows)
						}
					}
					for _, r := range []BTreeRange{Equal(int64(0)), Equal(int64(8191)), Equal(int64(8999)), Equal(int64(9000)), Equal(int64(12288)),
						Equal(int64(13000)), {Lo: int64(8990), Hi: int64(9010)}, {Lo: int64(9095), Hi: int64(9105)}, {Lo: int64(12999)}, {Hi: int64(2)}} {
						if got, want := mustSearch(t, d, "id", r), scanRange(t, d, "id", r); !slices.Equal(got, want) {
							t.Fatalf("id %+v: index %v, scan %v", r, got, want)
						}
					}
				})
			}
		}
	}
}

// Where the fresh entries cannot simply follow the old ones, the fold merges (the cache then
// holds its page data again), and writes what the merge from the file writes: keys that do not
// grow, a null among the fresh keys, and a 2.0 table (its pages cannot be copied).
func TestBTreeFoldMergesWhatCannotBeAppended(t *testing.T) {
	ctx := context.Background()
	grown := func(t *testing.T, opts CreateOptions) *Dataset {
		d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 5000)...), opts)
		if err != nil {
			t.Fatal(err)
		}
		s, err := d.StageBTreeIndices(ctx, []string{"id", "name"}, IndexOptions{})
		d = commit(t, d, s, err)
		s, err = d.StageAppend(ctx, rows(seq(5000, 6000)...), StageOptions{})
		d = commit(t, d, s, err)
		d = foldBoth(t, d, "id") // appended (nothing cached) but on 2.0 (merged, cached)
		if got, want := isCached(d.BTree("id")), opts.FileVersion == file.V2_0; got != want {
			t.Fatalf("the cache holds the grown index: %v, want %v", got, want)
		}
		return d
	}
	cases := []struct {
		name   string
		opts   CreateOptions
		column string
		change func(t *testing.T, d *Dataset) *Dataset
	}{
		{"keys that do not grow", CreateOptions{}, "id", func(t *testing.T, d *Dataset) *Dataset {
			s, err := d.StageAppend(ctx, rows(-3, 2500, 7000), StageOptions{})
			return commit(t, d, s, err)
		}},
		{"names that do not grow", CreateOptions{}, "name", func(t *testing.T, d *Dataset) *Dataset {
			s, err := d.StageAppend(ctx, rows(7001, 7002), StageOptions{}) // n7001 sorts before n999
			return commit(t, d, s, err)
		}},
		{"a null among the fresh keys", CreateOptions{}, "name", func(t *testing.T, d *Dataset) *Dataset {
			b := array.NewRecordBuilder(memory.DefaultAllocator, testArrow)
			defer b.Release()
			b.Field(0).(*array.Int64Builder).AppendValues([]int64{8001, 8002}, nil)
			b.Field(1).(*array.StringBuilder).AppendValues([]string{"zz", ""}, []bool{true, false})
			s, err := d.StageAppend(ctx, []arrow.Record{b.NewRecord()}, StageOptions{})
			return commit(t, d, s, err)
		}},
		{"a 2.0 table", CreateOptions{FileVersion: file.V2_0}, "id", func(t *testing.T, d *Dataset) *Dataset {
			s, err := d.StageAppend(ctx, rows(seq(6000, 6100)...), StageOptions{})
			return commit(t, d, s, err)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.change(t, grown(t, c.opts))
			d = foldBoth(t, d, c.column)
			if !isCached(d.BTree(c.column)) {
				t.Fatal("the cache does not hold the folded index: it was appended, not merged")
			}
			for _, r := range []BTreeRange{Equal(int64(-3)), Equal(int64(2500)), Equal(int64(5999)), {Lo: int64(5990)}, {Hi: int64(1)}} {
				if got, _ := searchIDs(t, d, "id", r); !slices.Equal(got, scanRange(t, d, "id", r)) {
					t.Fatalf("id %+v: index %v, scan %v", r, got, scanRange(t, d, "id", r))
				}
			}
			for _, r := range []BTreeRange{Equal("n7001"), Equal("zz"), Equal("n5999"), {Lo: "n99"}} {
				if got, _ := searchIDs(t, d, "name", r); !slices.Equal(got, scanRange(t, d, "name", r)) {
					t.Fatalf("name %+v: index %v, scan %v", r, got, scanRange(t, d, "name", r))
				}
			}
		})
	}
}

// int64Pages is the page data and lookup of sorted int64 keys vals (nil: null), with row ids
// ids, as a build writes them.
func int64Pages(t *testing.T, vals []*int64, ids []uint64) (data, lookup arrow.Record) {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	es := make([]btreeEntry, len(vals))
	for i, v := range vals {
		if v == nil {
			b.AppendNull()
		} else {
			b.Append(*v)
		}
		es[i] = newEntry(0, i, ids[i], v == nil)
	}
	a := b.NewArray()
	defer a.Release()
	return writeBTreePages(arrow.PrimitiveTypes.Int64, []arrow.Array{a}, es)
}

// A BTREE's end lets fresh entries follow it only when no old entry is for a row they hold
// (every fresh row id above every old one: an update that kept its rows' stable ids must
// drop their old entries) and its last key is not above the first fresh one; its last key is
// its tail's, or, when its last page is full, that page's greatest.
func TestBTreeEndFollowedBy(t *testing.T) {
	keys := func(n int, nulls int, from int64) []*int64 {
		out := make([]*int64, n)
		for i := nulls; i < n; i++ {
			v := from + int64(i)
			out[i] = &v
		}
		return out
	}
	seqIDs := func(n int, from uint64) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = from + uint64(i)
		}
		return out
	}
	for _, c := range []struct {
		name     string
		n, nulls int
		fresh    int64
		freshID  uint64
		want     bool
	}{
		{"greater keys and ids", 10, 0, 100, 50, true},
		{"the last key again, a greater id", 10, 0, 9, 50, true},
		{"a smaller key", 10, 0, 5, 50, false},
		{"an old row id again", 10, 0, 100, 9, false},
		{"a smaller row id", 10, 0, 100, 0, false},
		{"old all null", 10, 10, -100, 50, true},
		{"a full last page", BTreePageRows, 0, BTreePageRows, 1 << 20, true},
		{"a full last page, a smaller key", BTreePageRows, 0, BTreePageRows - 2, 1 << 20, false},
		{"no old entry", 0, 0, 1, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, lookup := int64Pages(t, keys(c.n, c.nulls, 0), seqIDs(c.n, 0))
			defer data.Release()
			defer lookup.Release()
			e, err := newBTreeEnd(data, lookup)
			if err != nil {
				t.Fatal(err)
			}
			defer e.release()
			fb := array.NewInt64Builder(memory.DefaultAllocator)
			defer fb.Release()
			fb.Append(c.fresh)
			fresh := fb.NewArray()
			defer fresh.Release()
			es := []btreeEntry{{chunk: 1, row: 0, id: c.freshID}}
			if got := e.followedBy([]arrow.Array{fresh}, es, []uint64{c.freshID}); got != c.want {
				t.Fatalf("followedBy = %v, want %v", got, c.want)
			}
		})
	}
}

// Extending a BTREE's end by fresh entries gives the end of the page data they make together:
// the lookup writeBTreePages writes for all of it, its last partial page, its counts and
// greatest row id, across page boundaries, with leading nulls and without.
func TestBTreeEndExtend(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, c := range []struct{ n, nulls, more int }{{1, 0, 1}, {4095, 0, 1}, {4096, 0, 4096}, {5000, 4500, 10000}, {9000, 0, 3}, {8192, 8192, 8191}, {100, 100, 5000}} {
		t.Run(fmt.Sprintf("n=%d/nulls=%d/more=%d", c.n, c.nulls, c.more), func(t *testing.T) {
			var vals []*int64
			var ids []uint64
			v := int64(0)
			for i := range c.n + c.more {
				ids = append(ids, uint64(i*2))
				if i < c.nulls {
					vals = append(vals, nil)
					continue
				}
				v += rng.Int64N(2)
				x := v
				vals = append(vals, &x)
			}
			data, lookup := int64Pages(t, vals[:c.n], ids[:c.n])
			defer data.Release()
			defer lookup.Release()
			all, wantLookup := int64Pages(t, vals, ids)
			defer all.Release()
			defer wantLookup.Release()
			fresh := all.NewSlice(int64(c.n), all.NumRows())
			defer fresh.Release()
			e, err := newBTreeEnd(data, lookup)
			if err != nil {
				t.Fatal(err)
			}
			defer e.release()
			next, err := e.extend(arrow.PrimitiveTypes.Int64, fresh)
			if err != nil {
				t.Fatal(err)
			}
			defer next.release()
			if !array.RecordEqual(next.lookup, wantLookup) {
				t.Fatalf("lookup\n%v\nwant\n%v", next.lookup, wantLookup)
			}
			rows := all.NumRows()
			wantTail := all.NewSlice(rows/BTreePageRows*BTreePageRows, rows)
			defer wantTail.Release()
			if !array.RecordEqual(next.tail, wantTail) {
				t.Fatalf("tail of %d rows, want %d", next.tail.NumRows(), wantTail.NumRows())
			}
			if next.rows != rows || next.nulls != int64(c.nulls) || next.maxID != ids[len(ids)-1] {
				t.Fatalf("end %d rows, %d nulls, max id %d; want %d, %d, %d", next.rows, next.nulls, next.maxID, rows, c.nulls, ids[len(ids)-1])
			}
		})
	}
}

// btreeLookupOf writes the page lookup writeBTreePages writes for the same entries, over
// values in pieces that do not fall on page boundaries, with leading nulls spanning pages or
// none, and pages all null.
func TestBTreeLookupOfEqualsTheWritersLookup(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct{ n, nulls int }{{1, 0}, {1, 1}, {4096, 0}, {4097, 4096}, {10000, 0}, {10000, 5000}, {12288, 8192}, {9000, 9000}} {
		t.Run(fmt.Sprintf("n=%d/nulls=%d", c.n, c.nulls), func(t *testing.T) {
			b := array.NewInt64Builder(memory.DefaultAllocator)
			defer b.Release()
			v := int64(-50)
			for i := range c.n {
				if i < c.nulls {
					b.AppendNull()
					continue
				}
				v += rng.Int64N(3)
				b.Append(v)
			}
			all := b.NewArray()
			defer all.Release()
			es := make([]btreeEntry, c.n)
			for i := range es {
				es[i] = newEntry(0, i, uint64(i), all.IsNull(i))
			}
			data, want := writeBTreePages(arrow.PrimitiveTypes.Int64, []arrow.Array{all}, es)
			defer data.Release()
			defer want.Release()
			var pieces []arrow.Array
			for lo := 0; lo < c.n; {
				hi := min(c.n, lo+1+rng.IntN(3000))
				pieces = append(pieces, array.NewSlice(all, int64(lo), int64(hi)))
				lo = hi
			}
			got := btreeLookupOf(arrow.PrimitiveTypes.Int64, pieces, c.nulls, 0)
			defer got.Release()
			for _, p := range pieces {
				p.Release()
			}
			if !array.RecordEqual(got, want) {
				t.Fatalf("lookup\n%v\nwant\n%v", got, want)
			}
		})
	}
}
