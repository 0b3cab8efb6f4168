package lance

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// searchIDs answers r on column through the BTREE (Take of its addresses, plus a filtered scan
// of the fragments it does not cover) and returns the ids found, sorted.
func searchIDs(t *testing.T, d *Dataset, column string, r BTreeRange) ([]int64, *BTreeSearch) {
	t.Helper()
	ctx := context.Background()
	addrs, s, err := d.SearchBTree(ctx, column, r)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := d.Take(ctx, addrs, ScanOptions{Columns: []string{"id", column}})
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, rec := range recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, rec.Column(0).(*array.Int64).Value(i))
		}
		rec.Release()
	}
	if len(s.Uncovered) > 0 {
		f := Filter{Columns: []string{column}, Match: func(rec arrow.Record) ([]bool, error) {
			col, err := recordColumn(rec, column)
			if err != nil {
				return nil, err
			}
			m := make([]bool, col.Len())
			for i := range m {
				if col.IsValid(i) {
					if m[i], err = r.contains(col, i); err != nil {
						return nil, err
					}
				}
			}
			return m, nil
		}}
		err := d.Each(ctx, ScanOptions{Columns: []string{"id"}, Filter: &f, Fragments: s.Uncovered}, func(rec arrow.Record) error {
			for i := 0; i < int(rec.NumRows()); i++ {
				out = append(out, rec.Column(0).(*array.Int64).Value(i))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out, s
}

// scanRange is the same question answered by reading every row.
func scanRange(t *testing.T, d *Dataset, column string, r BTreeRange) []int64 {
	t.Helper()
	recs, err := d.ReadAll(context.Background(), ScanOptions{Columns: []string{"id", column}})
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, rec := range recs {
		col := rec.Column(1)
		for i := 0; i < col.Len(); i++ {
			if col.IsNull(i) {
				continue
			}
			in, err := r.contains(col, i)
			if err != nil {
				t.Fatal(err)
			}
			if in {
				out = append(out, rec.Column(0).(*array.Int64).Value(i))
			}
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

// A BTREE lookup returns exactly the rows a scan selects, through deletions, fragments appended
// after the index was built, a compaction that moved rows, with and without stable row ids.
func TestSearchBTreeMatchesScan(t *testing.T) {
	for _, stable := range []bool{true, false} {
		t.Run(fmt.Sprintf("stable=%v", stable), func(t *testing.T) {
			ctx := context.Background()
			d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 9000)...), CreateOptions{DisableStableRowIDs: !stable})
			if err != nil {
				t.Fatal(err)
			}
			s, err := d.StageAppend(ctx, rows(seq(9000, 10000)...), StageOptions{})
			d = commit(t, d, s, err)
			for _, col := range []string{"id", "name"} {
				s, err = d.StageBTreeIndex(ctx, col, IndexOptions{})
				d = commit(t, d, s, err)
			}
			ranges := []BTreeRange{
				Equal(int64(0)), Equal(int64(4096)), Equal(int64(9999)), Equal(int64(-1)), Equal(int64(20000)),
				{Lo: int64(4000), Hi: int64(4200)}, {Lo: int64(4000), Hi: int64(4200), LoExcl: true, HiExcl: true},
				{Lo: int64(9990)}, {Hi: int64(3)}, {Hi: int64(3), HiExcl: true}, {Lo: int64(12000)},
			}
			check := func(stage string, wantUncovered int) { // -1: either
				t.Helper()
				for _, r := range ranges {
					got, s := searchIDs(t, d, "id", r)
					if want := scanRange(t, d, "id", r); !slices.Equal(got, want) {
						t.Fatalf("%s: %+v: index %v, scan %v", stage, r, got, want)
					}
					if wantUncovered >= 0 && (len(s.Uncovered) > 0) != (wantUncovered > 0) {
						t.Fatalf("%s: uncovered %v", stage, s.Uncovered)
					}
					if s.Pages != 3 || s.PagesRead > 3 {
						t.Fatalf("%s: %+v read %d of %d pages", stage, r, s.PagesRead, s.Pages)
					}
				}
				for _, r := range []BTreeRange{Equal("n7"), Equal("n4097"), Equal("nope"), {Lo: "n99", Hi: "n990"}} {
					got, _ := searchIDs(t, d, "name", r)
					if want := scanRange(t, d, "name", r); !slices.Equal(got, want) {
						t.Fatalf("%s: name %+v: index %v, scan %v", stage, r, got, want)
					}
				}
			}
			check("indexed", 0)
			if _, s, _ := d.SearchBTree(ctx, "id", Equal(int64(7))); s.PagesRead != 1 || s.RowIDs != 1 {
				t.Fatalf("an equality read %d pages, %d row ids", s.PagesRead, s.RowIDs)
			}
			s, err = d.StageDelete(ctx, In("id", 0, 4096, 4100, 9999), StageOptions{})
			d = commit(t, d, s, err)
			check("deleted", 0)
			s, err = d.StageAppend(ctx, rows(0, 4096, 12000, 12001), StageOptions{})
			d = commit(t, d, s, err)
			check("appended", 1)
			if stable {
				// The first two fragments (indexed, with deletions) folded into one: rows move,
				// their stable row ids with them, and the index follows them.
				var frags []uint64
				for _, f := range d.Manifest().Fragments[:2] {
					frags = append(frags, f.ID)
				}
				s, _, err = d.StageCompaction(ctx, CompactionOptions{Fragments: frags}, StageOptions{})
				d = commit(t, d, s, err)
				if n := len(d.Manifest().Fragments); n != 2 {
					t.Fatalf("%d fragments after compaction", n)
				}
				check("compacted", 1)
			}
			if _, _, err := d.SearchBTree(ctx, "id", Equal("7")); err == nil {
				t.Fatal("a string bound on an integer column was taken")
			}
		})
	}
}

// Take skips deleted and absent rows, reads each address once, and returns the columns asked.
func TestTake(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 100)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageDelete(ctx, In("id", 5), StageOptions{})
	d = commit(t, d, s, err)
	f := d.Manifest().Fragments[0].ID << 32
	recs, err := d.Take(ctx, []RowAddress{RowAddress(f | 7), RowAddress(f | 5), RowAddress(f | 6), RowAddress(f | 7), RowAddress(f | 99), RowAddress(f | 100), RowAddress(9<<32 | 1)}, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.NumCols() != 2 {
			t.Fatalf("%d columns", r.NumCols())
		}
		for i := 0; i < int(r.NumRows()); i++ {
			got = append(got, fmt.Sprintf("%d:%v", r.Column(0).(*array.Int64).Value(i), r.Column(1).ValueStr(i)))
		}
		r.Release()
	}
	if fmt.Sprint(got) != "[6:n6 7:n7 99:n99]" {
		t.Fatalf("took %v", got)
	}
}

// Take applies a filter and adds the columns a scan adds.
func TestTakeFilterAndAddress(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f0 := d.Manifest().Fragments[0].ID << 32
	odd := In("id", 1, 3, 9)
	recs, err := d.Take(ctx, []RowAddress{RowAddress(f0 | 1), RowAddress(f0 | 2), RowAddress(f0 | 3)},
		ScanOptions{Columns: []string{"name"}, Filter: &odd, WithRowAddress: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.NumCols() != 2 || r.Schema().Field(1).Name != RowAddressColumn {
			t.Fatalf("schema %v", r.Schema())
		}
		for i := 0; i < int(r.NumRows()); i++ {
			got = append(got, fmt.Sprintf("%s@%d", r.Column(0).ValueStr(i), r.Column(1).(*array.Uint64).Value(i)&0xffffffff))
		}
		r.Release()
	}
	if fmt.Sprint(got) != "[n1@1 n3@3]" {
		t.Fatalf("took %v", got)
	}
}
