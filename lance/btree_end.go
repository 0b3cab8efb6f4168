package lance

import (
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// An appending fold (btree_append.go) does not read the old page data: it needs only to know
// that it is in order, where it ends (its last key, its greatest row id, its entry count) and
// the page lookup it had, with the entries of its last page when that is not full (the new
// entries fill it). That is a few kilobytes where the page data is megabytes, so it is kept
// for every BTREE this process writes, whatever the page-data cache holds: keys that only
// grow are folded by appending at any size of index.

// btreeEnd is that summary of the page data of a BTREE this process wrote in order.
type btreeEnd struct {
	rows   int64        // entries
	nulls  int64        // the entries with a null value: the first ones
	maxID  uint64       // the greatest row id
	lookup arrow.Record // the page lookup
	tail   arrow.Record // the entries (values, ids) of the last page when it is not full, copied
}

// newBTreeEnd is the end of page data data (values, ids), in BTREE order, whose page lookup is
// lookup (retained). nil when data is not two columns of values and UInt64 ids.
func newBTreeEnd(data, lookup arrow.Record) (*btreeEnd, error) {
	ids, ok := data.Column(1).(*array.Uint64)
	if !ok {
		return nil, nil
	}
	e := &btreeEnd{rows: data.NumRows(), nulls: int64(data.Column(0).NullN())}
	for _, id := range ids.Uint64Values() {
		e.maxID = max(e.maxID, id)
	}
	full := e.rows / BTreePageRows * BTreePageRows
	tail, err := concatRecords([]arrow.Record{data.NewSlice(full, e.rows)})
	if err != nil {
		return nil, err
	}
	lookup.Retain()
	e.lookup, e.tail = lookup, tail
	return e, nil
}

func (e *btreeEnd) release() {
	e.lookup.Release()
	e.tail.Release()
}

func (e *btreeEnd) bytes() int64 { return recordBytes(e.lookup) + recordBytes(e.tail) + 64 }

// followedBy says fresh entries (sorted, over chunks as chunks 1 onward, with row ids newIDs)
// sort after every entry of the page data, with no entry of it for a row they hold: every
// fresh row id is above every old one, and the last old key (null when all are) is not above
// the first fresh key.
func (e *btreeEnd) followedBy(chunks []arrow.Array, fresh []btreeEntry, newIDs []uint64) bool {
	if e.rows == 0 || len(fresh) == 0 || slices.Min(newIDs) <= e.maxID {
		return false
	}
	// The last entry: the tail's, or the last full page's greatest value.
	last, i := e.tail.Column(0), int(e.tail.NumRows())-1
	if i < 0 {
		last, i = e.lookup.Column(1), int(e.lookup.NumRows())-1
	}
	first := fresh[0]
	return last.IsNull(i) || compareValues(last, i, chunks[first.at()-1], int(first.row)) <= 0
}

// extend is the end of the page data followed by fresh (values, ids: in order after it, no
// null among them): its page lookup written anew from the first page that was not full.
func (e *btreeEnd) extend(t arrow.DataType, fresh arrow.Record) (*btreeEnd, error) {
	full := e.rows / BTreePageRows // pages that keep their lookup row
	kept := e.lookup.NewSlice(0, full)
	defer kept.Release()
	tailNulls := max(e.nulls-full*BTreePageRows, 0)
	rest := btreeLookupOf(t, []arrow.Array{e.tail.Column(0), fresh.Column(0)}, int(tailNulls), int(full))
	defer rest.Release()
	lookup, err := concatRecords([]arrow.Record{kept, rest})
	if err != nil {
		return nil, err
	}
	next := &btreeEnd{rows: e.rows + fresh.NumRows(), nulls: e.nulls, maxID: e.maxID, lookup: lookup}
	for _, id := range fresh.Column(1).(*array.Uint64).Uint64Values() {
		next.maxID = max(next.maxID, id)
	}
	// The new tail: the entries after the last full page, of the old tail and fresh.
	from := next.rows / BTreePageRows * BTreePageRows
	var parts []arrow.Record
	if at := full * BTreePageRows; from < e.rows {
		parts = append(parts, e.tail.NewSlice(from-at, e.tail.NumRows()))
	}
	parts = append(parts, fresh.NewSlice(max(from-e.rows, 0), fresh.NumRows()))
	defer releaseAll(parts)
	if next.tail, err = concatRecords(parts); err != nil {
		lookup.Release()
		return nil, err
	}
	return next, nil
}

// btreeEndBudget bounds the memory of the ends kept: a BTREE of ten million entries has a
// lookup of 2,442 rows, tens of kilobytes with its tail. (An end larger than all of it, an
// index of billions of entries, is not kept: that index's folds merge.)
const btreeEndBudget = 16 << 20

var btreeEnds = &btreeEndCache{newLRU[[16]byte](btreeEndBudget, (*btreeEnd).shared, (*btreeEnd).release)}

// btreeEndCache keeps the ends of the BTREEs this process wrote last, by uuid.
type btreeEndCache struct{ lru[[16]byte, *btreeEnd] }

// put keeps e (owned from now on) as the end of index uuid.
func (c *btreeEndCache) put(uuid [16]byte, e *btreeEnd) { c.keep(uuid, e, e.bytes()) }

// get is the end of index uuid, its records retained (the caller releases it), or nil.
func (c *btreeEndCache) get(uuid [16]byte) *btreeEnd {
	e, _ := c.lru.get(uuid)
	return e
}

// shared is a copy of e, its records retained.
func (e *btreeEnd) shared() *btreeEnd {
	c := *e
	c.lookup.Retain()
	c.tail.Retain()
	return &c
}

// keepBTreeEnd records the end of BTREE uuid, whose page data (in order) and lookup this
// process just made.
func keepBTreeEnd(uuid [16]byte, data, lookup arrow.Record) {
	e, err := newBTreeEnd(data, lookup)
	if err != nil || e == nil {
		btreeEnds.forget(uuid) // an index without an end is folded by merging
		return
	}
	btreeEnds.put(uuid, e)
}
