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
)

// renamed is rows of ids whose name is "r<id>" (rows() names them "n<id>").
func renamed(ids ...int64) []arrow.Record { return named("r", ids...) }

// named is rows of ids whose name is prefix<id>.
func named(prefix string, ids ...int64) []arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testArrow)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%s%d", prefix, id))
	}
	return []arrow.Record{b.NewRecord()}
}

// pageDataRows is the number of entries in the page data of index x.
func pageDataRows(t *testing.T, d *Dataset, x *Index) int64 {
	t.Helper()
	return openIndexFile(t, d, x, btreeDataFile).NumRows()
}

// A lagging BTREE is folded, not rebuilt: its entries (those of rows deleted since among them,
// as Lance keeps them) merged with the rows it did not cover, under its own name, covering
// every fragment; lookups then answer exactly as a scan, with and without stable row ids,
// through appends, deletions and upserts that changed indexed values.
func TestBTreeFoldMergesTheRowsAnIndexLacks(t *testing.T) {
	for _, stable := range []bool{true, false} {
		t.Run(fmt.Sprintf("stable=%v", stable), func(t *testing.T) {
			ctx := context.Background()
			d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 9000)...), CreateOptions{DisableStableRowIDs: !stable})
			if err != nil {
				t.Fatal(err)
			}
			s, err := d.StageBTreeIndex(ctx, "id", IndexOptions{Name: "by_id"})
			d = commit(t, d, s, err)
			s, err = d.StageBTreeIndex(ctx, "name", IndexOptions{})
			d = commit(t, d, s, err)
			before := map[string]Index{}
			for _, x := range d.Indices() {
				before[x.Name] = x
			}

			s, err = d.StageAppend(ctx, rows(seq(9000, 10000)...), StageOptions{})
			d = commit(t, d, s, err)
			s, err = d.StageDelete(ctx, In("id", 0, 4096, 9001, 9999), StageOptions{})
			d = commit(t, d, s, err)
			s, err = d.StageUpsert(ctx, "id", renamed(7, 4097, 9002, 20000), StageOptions{})
			d = commit(t, d, s, err)
			s, err = d.StageAppend(ctx, rows(-5, 12000), StageOptions{})
			d = commit(t, d, s, err)

			s, err = d.StageIndices(ctx, []IndexSpec{{Column: "id", Kind: IndexBTree}, {Column: "name", Kind: IndexBTree}}, StageOptions{})
			d = commit(t, d, s, err)
			if got := indexNames(d); fmt.Sprint(got) != "[by_id name_idx]" {
				t.Fatalf("indices after the fold %v", got)
			}
			for _, x := range d.Indices() {
				if x.UUID == before[x.Name].UUID {
					t.Fatalf("%s was not replaced", x.Name)
				}
				if rows, _ := d.Uncovered(&x); rows != 0 {
					t.Fatalf("%s leaves %d rows uncovered", x.Name, rows)
				}
				// A full build would hold the live rows only: the fold kept the entries of the
				// deleted and upserted rows, as Lance's update does.
				if n := pageDataRows(t, d, &x); n <= int64(d.CountRows()) {
					t.Fatalf("%s holds %d entries for %d live rows: it was built anew, not folded", x.Name, n, d.CountRows())
				}
			}
			for _, r := range []BTreeRange{Equal(int64(0)), Equal(int64(7)), Equal(int64(4097)), Equal(int64(9002)), Equal(int64(20000)),
				Equal(int64(-5)), {Lo: int64(8990), Hi: int64(9010)}, {Hi: int64(3)}, {Lo: int64(11000)}} {
				if got, want := mustSearch(t, d, "id", r), scanRange(t, d, "id", r); !slices.Equal(got, want) {
					t.Fatalf("id %+v: index %v, scan %v", r, got, want)
				}
			}
			// The upserted rows' old names are still entries of the folded index; a lookup of
			// them must not return the rows, whose names changed.
			for _, r := range []BTreeRange{Equal("n7"), Equal("r7"), Equal("n4097"), Equal("r4097"), Equal("r20000"), Equal("n9002"),
				Equal("n12000"), {Lo: "n99", Hi: "n990"}, {Lo: "r"}} {
				if got, want := mustSearch(t, d, "name", r), scanRange(t, d, "name", r); !slices.Equal(got, want) {
					t.Fatalf("name %+v: index %v, scan %v", r, got, want)
				}
			}
		})
	}
}

// mustSearch is searchIDs that also insists the index covers every fragment.
func mustSearch(t *testing.T, d *Dataset, column string, r BTreeRange) []int64 {
	t.Helper()
	got, s := searchIDs(t, d, column, r)
	if len(s.Uncovered) > 0 {
		t.Fatalf("%s: fragments %v uncovered", column, s.Uncovered)
	}
	return got
}

// An index that holds more than foldDeadShare entries per live row it covers is built anew
// from the table (which drops the dead entries), not folded.
func TestBTreeFoldRebuildsAnIndexOfMostlyDeadRows(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 9000)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageBTreeIndex(ctx, "id", IndexOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageDelete(ctx, Filter{SQL: "id >= 1000", Columns: []string{"id"}, Match: func(rec arrow.Record) ([]bool, error) {
		ids := rec.Column(0).(*array.Int64)
		m := make([]bool, ids.Len())
		for i := range m {
			m[i] = ids.Value(i) >= 1000
		}
		return m, nil
	}}, StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageAppend(ctx, rows(seq(20000, 20100)...), StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageIndices(ctx, []IndexSpec{{Column: "id", Kind: IndexBTree}}, StageOptions{})
	d = commit(t, d, s, err)
	x := d.BTree("id")
	if n := pageDataRows(t, d, x); n != int64(d.CountRows()) || n != 1100 {
		t.Fatalf("the index holds %d entries for %d live rows", n, d.CountRows())
	}
	if got, want := mustSearch(t, d, "id", BTreeRange{Lo: int64(990), Hi: int64(20005)}), scanRange(t, d, "id", BTreeRange{Lo: int64(990), Hi: int64(20005)}); !slices.Equal(got, want) {
		t.Fatalf("index %v, scan %v", got, want)
	}
}

// The merge keeps BTREE order across the two sources, drops an old entry whose row the new rows
// hold again, accepts equal values in any row-id order (as the engines write them), and
// refuses old entries out of value order.
func TestMergeBTreeEntries(t *testing.T) {
	mk := func(vals ...int64) arrow.Array {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		for _, v := range vals {
			if v < 0 {
				b.AppendNull()
			} else {
				b.Append(v)
			}
		}
		return b.NewArray()
	}
	old, fresh := mk(-1, 10, 20, 20, 30), mk(20, 5, -1, 25)
	chunks := []arrow.Array{old, fresh}
	freshEntries := sortBTreeEntries(chunks[1:], []uint64{100, 3, 101, 102})
	for i := range freshEntries {
		freshEntries[i].chunk++
	}
	out, ok := mergeBTreeEntries(chunks, []uint64{1, 2, 4, 3, 5}, freshEntries, []uint64{100, 3, 101, 102})
	if !ok {
		t.Fatal("old entries in order were refused")
	}
	var got []string
	for _, e := range out {
		if e.null() {
			got = append(got, fmt.Sprintf("null/%d", e.id))
		} else {
			got = append(got, fmt.Sprintf("%d/%d", chunks[e.chunk].(*array.Int64).Value(int(e.row)), e.id))
		}
	}
	// Old row 3 (value 20) is held again by the new rows (value 5).
	if want := "[null/1 null/101 5/3 10/2 20/4 20/100 25/102 30/5]"; fmt.Sprint(got) != want {
		t.Fatalf("merged %v, want %s", got, want)
	}
	if _, ok := mergeBTreeEntries([]arrow.Array{mk(10, 5)}, []uint64{1, 2}, nil, nil); ok {
		t.Fatal("old entries out of order were merged")
	}
}

// A lagging BTREE whose page data is gone (or unreadable) is built anew from the table, which
// repairs it, instead of failing every fold. (With the page data cached, the fold needs no
// file: TestBTreeFoldFromTheCacheEqualsTheFileRead.)
func TestBTreeFoldRebuildsAnIndexWhosePageDataIsGone(t *testing.T) {
	withoutBTreeCache(t)
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 100)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageBTreeIndex(ctx, "id", IndexOptions{})
	d = commit(t, d, s, err)
	for _, damage := range []func(key string) error{
		func(key string) error { return d.Store().Delete(ctx, key) },
		func(key string) error { return d.Store().Put(ctx, key, []byte("not a lance file")) },
	} {
		if err := damage(d.BTree("id").Dir() + btreeDataFile); err != nil {
			t.Fatal(err)
		}
		s, err = d.StageAppend(ctx, rows(seq(1000, 1010)...), StageOptions{})
		d = commit(t, d, s, err)
		s, err = d.StageIndices(ctx, []IndexSpec{{Column: "id", Kind: IndexBTree}}, StageOptions{})
		d = commit(t, d, s, err)
		if n := pageDataRows(t, d, d.BTree("id")); n != int64(d.CountRows()) {
			t.Fatalf("the rebuilt index holds %d entries for %d rows", n, d.CountRows())
		}
	}
}

// withoutBTreeCache turns the page-data cache off for the test, so that folds read the index
// files.
func withoutBTreeCache(t *testing.T) {
	t.Helper()
	SetBTreeCacheBytes(0)
	t.Cleanup(func() { SetBTreeCacheBytes(DefaultBTreeCacheBytes) })
}

// A fold that starts from the page data this process cached writes exactly the files a fold
// reading them back writes, and a cached index that lost its files is still folded right.
func TestBTreeFoldFromTheCacheEqualsTheFileRead(t *testing.T) {
	fold := func(cached bool) (b []byte) {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) { b = foldOnce(t, cached) })
		return b
	}
	if a, b := fold(true), fold(false); len(a) == 0 || !slices.Equal(a, b) {
		t.Fatalf("the fold from the cache wrote %d bytes of page data, the fold from the file %d, not the same", len(a), len(b))
	}
}

// An index built anew over the one it replaces (nothing is left to fold, so StageIndices
// builds it whole) drops the replaced index's cached page data and end, as a fold drops its
// predecessor's: a process that rebuilds an index again and again holds one copy, not one per
// build up to the budget.
func TestRebuiltIndexDropsTheReplacedOnesCache(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 3000)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cached := func(uuid [16]byte) (data, end bool) {
		if rec := btreeCache.get(uuid); rec != nil {
			rec.Release()
			data = true
		}
		if e := btreeEnds.get(uuid); e != nil {
			e.release()
			end = true
		}
		return data, end
	}
	s, err := d.StageIndices(ctx, []IndexSpec{{Column: "name", Kind: IndexBTree}}, StageOptions{})
	d = commit(t, d, s, err)
	first := d.BTree("name").UUID
	if data, end := cached(first); !data || !end {
		t.Fatalf("the first build cached page data %v, end %v; want both", data, end)
	}
	s, err = d.StageIndices(ctx, []IndexSpec{{Column: "name", Kind: IndexBTree}}, StageOptions{})
	d = commit(t, d, s, err)
	second := d.BTree("name").UUID
	if second == first {
		t.Fatal("the rebuild kept the replaced index's uuid")
	}
	if data, end := cached(first); data || end {
		t.Fatalf("after the rebuild the replaced index still has page data cached %v, end %v", data, end)
	}
	if data, end := cached(second); !data || !end {
		t.Fatalf("the rebuild cached page data %v, end %v; want both", data, end)
	}
	if got, want := mustSearch(t, d, "name", BTreeRange{Lo: "n100", Hi: "n200"}), scanRange(t, d, "name", BTreeRange{Lo: "n100", Hi: "n200"}); !slices.Equal(got, want) {
		t.Fatalf("rebuilt index %v, scan %v", got, want)
	}
}

// foldOnce indexes a table, upserts rows that change indexed names and folds the index, with
// the page data cached or not; with it cached, the index's page data file is deleted before
// the fold, which then cannot have read it. The new names sort among the old ones: the fold
// merges (one that appends copies the old file's pages). It returns the folded page data file.
func foldOnce(t *testing.T, cached bool) []byte {
	ctx := context.Background()
	if !cached {
		withoutBTreeCache(t)
	}
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 3000)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageBTreeIndices(ctx, []string{"id", "name"}, IndexOptions{})
	d = commit(t, d, s, err)
	if got := btreeCache.get(d.BTree("name").UUID); (got != nil) != cached {
		t.Fatalf("page data cached: %v, want %v", got != nil, cached)
	} else if got != nil {
		got.Release()
	}
	s, err = d.StageUpsert(ctx, "id", named("n0-", seq(2990, 3500)...), StageOptions{})
	d = commit(t, d, s, err)
	if cached {
		if err := d.Store().Delete(ctx, d.BTree("name").Dir()+btreeDataFile); err != nil {
			t.Fatal(err)
		}
	}
	s, err = d.StageIndices(ctx, []IndexSpec{{Column: "name", Kind: IndexBTree}}, StageOptions{})
	d = commit(t, d, s, err)
	b, err := d.Store().Get(ctx, d.BTree("name").Dir()+btreeDataFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustSearch(t, d, "name", BTreeRange{Lo: "n2995", Hi: "r3001"}), scanRange(t, d, "name", BTreeRange{Lo: "n2995", Hi: "r3001"}); !slices.Equal(got, want) {
		t.Fatalf("cached %v: index %v, scan %v", cached, got, want)
	}
	return b
}

// The cache keeps the most recently used page data within its budget, keeps none larger than
// the whole budget, and forgets on request.
func TestPageDataCacheBudget(t *testing.T) {
	rec := func(n int64) arrow.Record { return renamed(seq(0, n)...)[0] }
	one := recordBytes(rec(100))
	c := newPageDataCache(2*one + one/2)
	ids := [][16]byte{{1}, {2}, {3}}
	for _, id := range ids {
		c.put(id, rec(100))
	}
	if c.get(ids[0]) != nil || c.get(ids[1]) == nil || c.get(ids[2]) == nil {
		t.Fatal("the least recently used entry was not the one evicted")
	}
	c.get(ids[1])
	c.put(ids[0], rec(100))
	if c.get(ids[2]) != nil || c.get(ids[1]) == nil {
		t.Fatal("a read did not make an entry recent")
	}
	c.put([16]byte{9}, rec(1000))
	if c.get([16]byte{9}) != nil || c.get(ids[0]) == nil {
		t.Fatal("a record over the whole budget was kept, or evicted the others")
	}
	c.forget(ids[0])
	if c.get(ids[0]) != nil || c.used != one {
		t.Fatalf("after forget: %d bytes used, want %d", c.used, one)
	}
	c.setBudget(0)
	if c.get(ids[1]) != nil || c.used != 0 {
		t.Fatal("a budget of 0 kept an entry")
	}
}

// The one-pass merge of string keys writes exactly the page data and lookup the general merge
// writes (old ties in any row-id order, stale old entries, more than one page), and refuses
// old entries out of order as it does.
func TestMergeStringPagesEqualsTheGeneralMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	str := func(vals []string) *array.String {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		b.AppendValues(vals, nil)
		return b.NewStringArray()
	}
	key := func() string { return fmt.Sprintf("k%d-%d", rng.IntN(3), rng.IntN(3000)) }
	var oldVals []string
	for range 3 * BTreePageRows {
		oldVals = append(oldVals, key())
	}
	slices.Sort(oldVals)
	oldIDs := make([]uint64, len(oldVals))
	for i := range oldIDs {
		oldIDs[i] = uint64(rng.IntN(1 << 30)) // ties in any row-id order
	}
	var freshVals []string
	var newIDs []uint64
	for i := range BTreePageRows + 100 {
		freshVals = append(freshVals, key())
		if i%10 == 0 {
			newIDs = append(newIDs, oldIDs[rng.IntN(len(oldIDs))]) // an old row held again
		} else {
			newIDs = append(newIDs, 1<<40+uint64(i))
		}
	}
	old, freshA, freshB := str(oldVals), str(freshVals[:1000]), str(freshVals[1000:])
	chunks := []arrow.Array{old, freshA, freshB}
	fresh := sortBTreeEntries(chunks[1:], newIDs)
	for i := range fresh {
		fresh[i].chunk++
	}
	data, lookup, ok := mergeStringPages([]*array.String{old, freshA, freshB}, oldIDs, fresh, newIDs, false)
	if !ok {
		t.Fatal("old entries in order were refused")
	}
	merged, _ := mergeBTreeEntries(chunks, oldIDs, fresh, newIDs)
	wantData, wantLookup := writeBTreePages(arrow.BinaryTypes.String, chunks, merged)
	if !array.RecordEqual(data, wantData) || !array.RecordEqual(lookup, wantLookup) {
		t.Fatalf("one-pass merge: %d entries, %d pages; general: %d entries, %d pages, or other values", data.NumRows(), lookup.NumRows(), wantData.NumRows(), wantLookup.NumRows())
	}
	if data.NumRows() >= int64(len(oldVals)+len(freshVals)) {
		t.Fatal("no stale entry was left out")
	}
	if _, _, ok := mergeStringPages([]*array.String{str([]string{"b", "a"})}, []uint64{1, 2}, nil, nil, false); ok {
		t.Fatal("old entries out of order were merged")
	}
}

// Old page data without entries (an index over rows all deleted since, written by another
// engine) merges to the fresh entries alone.
func TestMergeStringPagesFromEmptyPageData(t *testing.T) {
	empty := array.NewStringBuilder(memory.DefaultAllocator).NewStringArray()
	fb := array.NewStringBuilder(memory.DefaultAllocator)
	fb.AppendValues([]string{"b", "a"}, nil)
	fresh := fb.NewStringArray()
	entries := []btreeEntry{{chunk: 1, row: 1, id: 7}, {chunk: 1, row: 0, id: 8}}
	data, lookup, ok := mergeStringPages([]*array.String{empty, fresh}, nil, entries, []uint64{8, 7}, false)
	if !ok {
		t.Fatal("refused")
	}
	defer data.Release()
	defer lookup.Release()
	vals := data.Column(0).(*array.String)
	ids := data.Column(1).(*array.Uint64)
	if vals.Len() != 2 || vals.Value(0) != "a" || vals.Value(1) != "b" || ids.Value(0) != 7 || ids.Value(1) != 8 {
		t.Fatalf("merged %v %v", vals, ids)
	}
}
