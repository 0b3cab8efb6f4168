package lance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Folding by appending. Keys that only grow (ULIDs, timestamps, sequence numbers: most ids
// producers make) give folds whose fresh entries all sort after the index's last one. The
// merged page data is then the old page data followed by the fresh entries, row for row, and
// its file is the old file's pages copied as they are (file.Concat; on a local disk the kernel
// copies them) followed by a file of the fresh entries alone. The old entries are neither
// merged nor encoded again, so such a fold costs the fresh rows, not the whole index. Only the
// page lookup is written whole: a BTREE page is 4,096 rows of the page data wherever the file's
// own pages fall, and the pages that hold the join mix old entries and fresh.
//
// The old entries are kept unread only where that is exactly what the merge would write:
//   - this process wrote the old page data, in order (btreeEnds holds its end);
//   - no fresh entry is null (nulls sort first);
//   - every fresh row id is above every old one, so no old entry is for a row the fresh rows
//     hold again (an upsert keeps a row's stable id: the merge would drop its old entry), and
//     fresh entries equal to the last old key sort after it;
//   - the last old key is not above the first fresh one;
//   - the files can be copied (2.1 or later, one version and schema).
//
// Anything else folds by merging, as before.

// btreeFolds counts this process's BTREE folds by how they were done.
var btreeFolds struct{ appended, merged atomic.Uint64 }

// BTreeFolds is how many BTREE folds this process staged by appending the fresh entries to
// the old page data, and how many by merging the two.
func BTreeFolds() (appended, merged uint64) {
	return btreeFolds.appended.Load(), btreeFolds.merged.Load()
}

// appendBTree is foldBTree's fold of old, which this process wrote in order and whose end
// is end, when its fresh entries (sorted, over freshChunks as chunks 1 onward, with row ids
// newIDs) can follow its page data: ok is false, with no error, when they cannot, and nothing
// was written. The old page data is not read: its file's pages are copied, and end holds what
// the new page lookup needs of it.
func (d *Dataset) appendBTree(ctx context.Context, old *Index, column string, t arrow.DataType, end *btreeEnd,
	freshChunks []arrow.Array, fresh []btreeEntry, newIDs []uint64, fo file.Options, w *fileWrites) (x Index, ok bool, err error) {
	if fo.Version == file.V2_0 || fresh[0].null() || !end.followedBy(freshChunks, fresh, newIDs) {
		return Index{}, false, nil
	}
	empty := array.MakeArrayOfNull(memory.DefaultAllocator, t, 0)
	defer empty.Release()
	data, lookup, _ := mergeBTreePages(t, append([]arrow.Array{empty}, freshChunks...), nil, fresh, nil, true)
	lookup.Release() // the fresh entries' own pages: the index's pages are counted from its first row
	defer data.Release()
	freshFile, err := encodeIndexFile(data, fo)
	if err != nil {
		return Index{}, false, fmt.Errorf("lance: index %s on %s: %s: %w", old.Name, column, btreeDataFile, err)
	}

	st, _, err := d.resolveBase(old.BaseID)
	if err != nil {
		return Index{}, false, err
	}
	key := old.Dir() + btreeDataFile
	size, err := st.Size(ctx, key)
	if err != nil {
		return Index{}, false, fmt.Errorf("lance: BTREE %s: %w", old.Name, err)
	}
	c := file.NewConcat(nil)
	err = c.AppendRange(ctx, &storeSource{st: st, key: key, size: size}, st.Location(key))
	if err == nil {
		err = c.AppendRange(ctx, file.BytesSource(freshFile), "the fresh entries of "+old.Name)
	}
	var parts []file.Part
	if err == nil {
		parts, err = c.FinishParts(ctx)
	}
	if errors.Is(err, file.ErrNotCopyable) {
		return Index{}, false, nil
	}
	if err != nil {
		return Index{}, false, err
	}
	if c.NumRows() != end.rows+data.NumRows() {
		return Index{}, false, nil // the old file is not the page data this process wrote
	}

	next, err := end.extend(t, data)
	if err != nil {
		return Index{}, false, err
	}
	if x, err = d.successorMeta(old, &IndexDetails{TypeURL: BTreeDetailsType}, 0); err != nil {
		next.release()
		return Index{}, false, err
	}
	composed := make([]storage.Part, len(parts))
	for i, p := range parts {
		switch {
		case p.Length == 0:
			composed[i] = storage.Part{Data: p.Data}
		case p.Input == 0:
			composed[i] = storage.Part{Source: st, Key: key, Offset: int64(p.Offset), Length: int64(p.Length)}
		default:
			composed[i] = storage.Part{Data: freshFile[p.Offset : p.Offset+p.Length]}
		}
	}
	// A failpoint of its own: the crash matrix kills a worker at the write of an appended
	// index (a build, or a merging fold, hits lance.write_index_file first).
	w.addParts(x.Dir()+btreeDataFile, composed, "lance.append_index_file", "index file")
	next.lookup.Retain()
	if err := writeNamedRecords(x, column, []namedRecord{{btreeLookupFile, next.lookup}}, fo, w); err != nil {
		next.release()
		return Index{}, false, err
	}
	// The page data is not cached for the successor, and its predecessor's leaves the cache: an
	// index whose folds append never reads it (the end above is all they need), and a later
	// merging fold reading the file costs that fold about a quarter more. Kept, in pieces, it
	// held every entry of such an index in the heap for good, which the collector (at the
	// worker's gc_percent 400) lets grow by five times as much again: measured, the indexed
	// bench child's peak resident memory fell from about 700 to 620 MiB without it.
	forgetCached(old.UUID)
	btreeEnds.put(x.UUID, next)
	btreeFolds.appended.Add(1)
	return x, true, nil
}

// compareValues orders a[i] and b[j], non-null values of one type, as a BTREE orders them.
func compareValues(a arrow.Array, i int, b arrow.Array, j int) int {
	switch x := a.(type) {
	case *array.String:
		return strings.Compare(x.Value(i), b.(*array.String).Value(j))
	case *array.LargeString:
		return strings.Compare(x.Value(i), b.(*array.LargeString).Value(j))
	case *array.Float32, *array.Float64:
		return compareFloat(floatAt(a, i), floatAt(b, j))
	case *array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64:
		return cmp.Compare(unsignedAt(a, i), unsignedAt(b, j))
	default:
		return cmp.Compare(signedAt(a, i), signedAt(b, j))
	}
}

func floatAt(a arrow.Array, i int) float64 {
	if x, ok := a.(*array.Float32); ok {
		return float64(x.Value(i))
	}
	return a.(*array.Float64).Value(i)
}

// btreeLookupOf is the page lookup of page data whose values are vals, in order, the first
// nulls of them null and none after: per page of BTreePageRows rows, its first and last
// non-null value, its null count and its number (from firstPage on), as writeBTreePages
// writes them.
func btreeLookupOf(t arrow.DataType, vals []arrow.Array, nulls, firstPage int) arrow.Record {
	lb := array.NewRecordBuilder(memory.DefaultAllocator, btreeLookupSchema(t))
	defer lb.Release()
	starts := make([]int, len(vals)+1)
	for i, a := range vals {
		starts[i+1] = starts[i] + a.Len()
	}
	total := starts[len(vals)]
	at := func(pos int) (arrow.Array, int) {
		k := sort.Search(len(vals), func(k int) bool { return starts[k+1] > pos })
		return vals[k], pos - starts[k]
	}
	for page := 0; page*BTreePageRows < total; page++ {
		lo, hi := page*BTreePageRows, min(total, (page+1)*BTreePageRows)
		n := min(max(nulls-lo, 0), hi-lo)
		if n == hi-lo {
			lb.Field(0).AppendNull()
			lb.Field(1).AppendNull()
		} else {
			a, i := at(lo + n)
			appendValue(lb.Field(0), a, i)
			a, i = at(hi - 1)
			appendValue(lb.Field(1), a, i)
		}
		lb.Field(2).(*array.Uint32Builder).Append(uint32(n))
		lb.Field(3).(*array.Uint32Builder).Append(uint32(firstPage + page))
	}
	return lb.NewRecord()
}

// recordsRows is the rows of recs.
func recordsRows(recs []arrow.Record) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

// concatRecords is recs, records of one schema, as one record.
func concatRecords(recs []arrow.Record) (arrow.Record, error) {
	cols := make([]arrow.Array, recs[0].NumCols())
	for c := range cols {
		parts := make([]arrow.Array, len(recs))
		for i, r := range recs {
			parts[i] = r.Column(c)
		}
		a, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			for _, done := range cols[:c] {
				done.Release()
			}
			return nil, err
		}
		cols[c] = a
	}
	out := array.NewRecord(recs[0].Schema(), cols, recordsRows(recs))
	for _, a := range cols {
		a.Release()
	}
	return out, nil
}
