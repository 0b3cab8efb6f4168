package lance

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// Folding a BTREE: Lance has no delta segments for scalar indices, so bringing one up to date
// writes it whole again (its optimize_indices calls the BTREE's update, which merges the old
// index's entries with the new rows). foldBTree does the same: the entries the index holds
// are read from its page data, already in order, and only the rows of the fragments it does
// not cover are read from the table and sorted. The cost of a fold is then a read and a write
// of the index, not a read of the column and a sort of every row. Where the new rows' keys all
// sort after the index's, the fold appends them instead, and the old entries are neither read
// nor encoded (btree_append.go).

// foldDeadShare bounds the entries a fold keeps for rows deleted since they were indexed (an
// index keeps those, as Lance's does, and queries skip them): past foldDeadShare times the
// live rows the index covers, the index is built anew from the table instead, which drops
// them.
const foldDeadShare = 2

// foldBTree builds the successor of the BTREE old on column over this version: old's entries
// merged with the rows of the fragments old does not cover, under old's name, covering old's
// fragments and those. ok is false, with no error, when the fold cannot be done this way and
// the caller builds the index whole: nothing left to cover, old's page data of another value
// type or not in BTREE order, or more than foldDeadShare times the entries it should hold. An
// entry of old for a row the new rows hold again (a row id the uncovered fragments hold) is
// left out: the table's row is the truth.
func (d *Dataset) foldBTree(ctx context.Context, reads *foldReads, old *Index, column string, fo file.Options, w *fileWrites) (x Index, ok bool, err error) {
	f, uncovered, coveredRows := d.lagOf(old, column)
	if len(uncovered) == 0 {
		return Index{}, false, nil
	}
	af, err := f.ToArrow()
	if err != nil || !btreeType(af.Type) {
		return Index{}, false, err
	}

	recs, err := d.readIndexed(ctx, reads, column, uncovered)
	if err != nil {
		return Index{}, false, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var freshChunks []arrow.Array
	for _, r := range recs {
		if r.NumRows() > 0 {
			freshChunks = append(freshChunks, r.Column(0))
		}
	}
	newIDs := rowIDsOf(recs)
	var fresh []btreeEntry
	if len(newIDs) > 0 {
		fresh = sortBTreeEntries(freshChunks, newIDs)
		for i := range fresh {
			fresh[i].chunk++ // chunks[0] is the old page data
		}
	}
	maxRows := int64(foldDeadShare*coveredRows + BTreePageRows)
	if end := btreeEnds.get(old.UUID); end != nil {
		if end.rows <= maxRows && len(fresh) > 0 {
			x, ok, err = d.appendBTree(ctx, old, column, af.Type, end, freshChunks, fresh, newIDs, fo, w)
		}
		end.release()
		if err != nil || ok {
			return x, ok, err
		}
	}

	oldRec, ordered, err := d.readBTreeData(ctx, old, maxRows)
	if err != nil {
		return Index{}, false, err
	}
	if oldRec == nil {
		return Index{}, false, nil
	}
	defer oldRec.Release()
	oldIDs, isU64 := oldRec.Column(1).(*array.Uint64)
	if !isU64 || !arrow.TypeEqual(oldRec.Column(0).DataType(), af.Type) {
		return Index{}, false, nil
	}
	chunks := append([]arrow.Array{oldRec.Column(0)}, freshChunks...)
	data, lookup, inOrder := mergeBTreePages(af.Type, chunks, oldIDs.Uint64Values(), fresh, newIDs, ordered)
	if !inOrder {
		return Index{}, false, nil
	}
	name := old.Name
	if data.NumRows() == 0 {
		data.Release()
		lookup.Release()
		return Index{}, false, &IndexError{Dataset: d.dir.URI(), Index: name, Op: OpCreateIndex, Reason: "the table has no rows to index"}
	}
	if x, err = d.successorMeta(old, &IndexDetails{TypeURL: BTreeDetailsType}, 0); err != nil {
		data.Release()
		lookup.Release()
		return Index{}, false, err
	}
	forgetCached(old.UUID)
	btreeCache.put(x.UUID, data)
	keepBTreeEnd(x.UUID, data, lookup)
	if err := writeNamedRecords(x, column, []namedRecord{{btreeDataFile, data}, {btreeLookupFile, lookup}}, fo, w); err != nil {
		return Index{}, false, err
	}
	btreeFolds.merged.Add(1)
	return x, true, nil
}

// readBTreeData reads the whole page data of BTREE x, values and row ids, as one record. nil,
// with no error, when the file is not two columns of values and UInt64 ids (a layout this
// package does not fold) or holds more than maxRows entries. ordered says the entries are
// known to be in BTREE order: they come from the cache, which holds only page data this
// process wrote in order.
func (d *Dataset) readBTreeData(ctx context.Context, x *Index, maxRows int64) (rec arrow.Record, ordered bool, err error) {
	if cached := btreeCache.get(x.UUID); cached != nil {
		if cached.NumRows() > maxRows {
			cached.Release()
			return nil, false, nil
		}
		return cached, true, nil
	}
	st, _, err := d.resolveBase(x.BaseID)
	if err != nil {
		return nil, false, err
	}
	key := x.Dir() + btreeDataFile
	size, err := st.Size(ctx, key)
	if err != nil {
		return nil, false, fmt.Errorf("lance: BTREE %s: %w", x.Name, err)
	}
	r, err := file.Open(ctx, &storeSource{st: st, key: key, size: size}, st.Location(key))
	if err != nil {
		return nil, false, err
	}
	if len(r.Schema().Fields) != 2 || r.NumRows() > maxRows {
		return nil, false, nil
	}
	rec, err = readIndexRows(ctx, r, st.Location(key), 0, r.NumRows())
	if err != nil {
		return nil, false, err
	}
	if _, ok := rec.Column(1).(*array.Uint64); !ok {
		rec.Release()
		return nil, false, nil
	}
	return rec, false, nil
}

// mergeBTreeEntries merges the entries of the old page data (chunks[0], in order, with row ids
// oldIDs) with fresh (sorted, over chunks[1:]), leaving out old entries whose row id is among
// newIDs. inOrder is false when the old entries are not in BTREE order.
func mergeBTreeEntries(chunks []arrow.Array, oldIDs []uint64, fresh []btreeEntry, newIDs []uint64) (out []btreeEntry, inOrder bool) {
	switch chunks[0].(type) {
	case *array.String:
		return mergeKeyed(chunks, oldIDs, fresh, newIDs, func(a arrow.Array, i int) string { return a.(*array.String).Value(i) }, strings.Compare)
	case *array.LargeString:
		return mergeKeyed(chunks, oldIDs, fresh, newIDs, func(a arrow.Array, i int) string { return a.(*array.LargeString).Value(i) }, strings.Compare)
	case *array.Float32, *array.Float64:
		return mergeKeyed(chunks, oldIDs, fresh, newIDs, func(a arrow.Array, i int) float64 {
			if x, ok := a.(*array.Float32); ok {
				return float64(x.Value(i))
			}
			return a.(*array.Float64).Value(i)
		}, compareFloat)
	case *array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64:
		return mergeKeyed(chunks, oldIDs, fresh, newIDs, unsignedAt, cmp.Compare[uint64])
	default:
		return mergeKeyed(chunks, oldIDs, fresh, newIDs, signedAt, cmp.Compare[int64])
	}
}

// mergeKeyed is mergeBTreeEntries for values read as K by get and ordered by compare. Each
// value is read once: the fresh ones into a slice up front, the old ones as the merge passes
// them.
func mergeKeyed[K any](chunks []arrow.Array, oldIDs []uint64, fresh []btreeEntry, newIDs []uint64,
	get func(arrow.Array, int) K, compare func(K, K) int) (out []btreeEntry, inOrder bool) {
	stale := staleIDs(newIDs)
	freshKeys := make([]K, len(fresh))
	for k, e := range fresh {
		if !e.null() {
			freshKeys[k] = get(chunks[e.at()], int(e.row))
		}
	}
	// before says fresh entry j goes before the old entry (null, key, id).
	before := func(j int, null bool, key K, id uint64) bool {
		f := &fresh[j]
		switch {
		case f.null() && null:
			return f.id < id
		case f.null():
			return true
		case null:
			return false
		}
		if c := compare(freshKeys[j], key); c != 0 {
			return c < 0
		}
		return f.id < id
	}
	vals := chunks[0]
	out = make([]btreeEntry, 0, len(oldIDs)+len(fresh))
	var prevKey K
	prevNull, havePrev := false, false
	j := 0
	for i, id := range oldIDs {
		null := vals.IsNull(i)
		var key K
		if !null {
			key = get(vals, i)
		}
		// Nulls first, then values in order; the engines order equal values by no rule of
		// ours, so ties may come in any row-id order.
		if havePrev && !prevNull && (null || compare(prevKey, key) > 0) {
			return nil, false
		}
		prevKey, prevNull, havePrev = key, null, true
		if stale(id) {
			continue
		}
		for j < len(fresh) && before(j, null, key, id) {
			out = append(out, fresh[j])
			j++
		}
		out = append(out, newEntry(0, i, id, null))
	}
	return append(out, fresh[j:]...), true
}
