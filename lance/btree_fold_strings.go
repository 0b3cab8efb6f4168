package lance

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The BTREEs the reference keeps are mostly on string keys without nulls (node and edge ids,
// edge ends). For those a fold merges straight into the new page data: each value's bytes are
// copied once into one buffer, where the general path (mergeBTreeEntries, then
// writeBTreePages) lists every entry first and appends them through an Arrow builder after.

// mergeBTreePages merges the old page data (chunks[0], in order, row ids oldIDs) with fresh
// (sorted, over chunks[1:]), leaving out old entries whose row id is among newIDs, into the
// new page data and page lookup of a BTREE of values of type t. inOrder is false when the old
// entries are not in BTREE order.
func mergeBTreePages(t arrow.DataType, chunks []arrow.Array, oldIDs []uint64, fresh []btreeEntry, newIDs []uint64, ordered bool) (data, lookup arrow.Record, inOrder bool) {
	if strs, ok := chunksAs[*array.String](chunks); ok && !hasNulls(chunks) {
		return mergeStringPages(strs, oldIDs, fresh, newIDs, ordered)
	}
	merged, inOrder := mergeBTreeEntries(chunks, oldIDs, fresh, newIDs)
	if !inOrder {
		return nil, nil, false
	}
	data, lookup = writeBTreePages(t, chunks, merged)
	return data, lookup, true
}

func hasNulls(chunks []arrow.Array) bool {
	for _, a := range chunks {
		if a.NullN() > 0 {
			return true
		}
	}
	return false
}

// mergeStringPages is mergeBTreePages for string values without nulls: strs[0] the old page
// data's, strs[1:] the fresh entries'. The output is written into slices sized up front: per
// entry this is the fold's hottest loop. ordered says the old page data is known to be in
// order (this process merged it), which saves checking each key against the one before.
func mergeStringPages(strs []*array.String, oldIDs []uint64, fresh []btreeEntry, newIDs []uint64, ordered bool) (data, lookup arrow.Record, inOrder bool) {
	size := 0
	for _, a := range strs {
		size += len(a.ValueBytes())
	}
	n := len(oldIDs) + len(fresh)
	vals := make([]byte, size)
	offs := make([]int32, n+1)
	ids := make([]uint64, n)
	k, end := 0, int32(0)
	emit := func(v string, id uint64) {
		end += int32(copy(vals[end:], v))
		ids[k] = id
		k++
		offs[k] = end
	}
	freshKey := func(j int) string { f := &fresh[j]; return strs[f.at()].Value(int(f.row)) }
	stale := staleIDs(newIDs)
	old, j := strs[0], 0
	var fv string
	if len(fresh) > 0 {
		fv = freshKey(0)
	}
	prev := ""
	for i, id := range oldIDs {
		key := old.Value(i)
		// Equal values may come in any row-id order (the engines order ties by no rule of ours).
		if !ordered && i > 0 && prev > key {
			return nil, nil, false
		}
		prev = key
		if stale(id) {
			continue
		}
		for j < len(fresh) {
			if c := strings.Compare(fv, key); c > 0 || c == 0 && fresh[j].id > id {
				break
			}
			emit(fv, fresh[j].id)
			if j++; j < len(fresh) {
				fv = freshKey(j)
			}
		}
		emit(key, id)
	}
	for ; j < len(fresh); j++ {
		emit(freshKey(j), fresh[j].id)
	}
	vals, offs, ids = vals[:end], offs[:k+1], ids[:k]

	values := array.NewStringData(array.NewData(arrow.BinaryTypes.String, len(ids),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs)), memory.NewBufferBytes(vals)}, nil, 0, 0))
	defer values.Release()
	idArr := uint64View(ids)
	defer idArr.Release()
	data = array.NewRecord(btreeDataSchema(arrow.BinaryTypes.String), []arrow.Array{values, idArr}, int64(len(ids)))

	return data, btreeLookupOf(arrow.BinaryTypes.String, []arrow.Array{values}, 0, 0), true
}

// staleIDs says whether an old entry's row id is one of newIDs (the new rows hold that row
// again): only an id within their range can be, so most old entries cost two comparisons.
func staleIDs(newIDs []uint64) func(uint64) bool {
	if len(newIDs) == 0 {
		return func(uint64) bool { return false }
	}
	lo, hi := newIDs[0], newIDs[0]
	for _, id := range newIDs {
		lo, hi = min(lo, id), max(hi, id)
	}
	var isNew map[uint64]struct{}
	return func(id uint64) bool {
		if id < lo || id > hi {
			return false
		}
		if isNew == nil {
			isNew = make(map[uint64]struct{}, len(newIDs))
			for _, n := range newIDs {
				isNew[n] = struct{}{}
			}
		}
		_, ok := isNew[id]
		return ok
	}
}
