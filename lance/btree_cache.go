package lance

import (
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// A BTREE fold rewrites the whole index, and reading back the page data this process wrote at
// the previous fold was a quarter of a fold's cost. Index files are never changed once
// written (a fold writes a new index under a new uuid), so the page data of the BTREEs this
// process wrote last is kept in memory, by uuid, within a byte budget, and a fold of one of
// them starts from memory. A miss (another process wrote the index, it was evicted, or the
// process restarted) reads the file as before; the two give the same entries. An entry is the
// page data as one record. A fold that appends (btree_append.go) caches nothing: it needs
// only the index's end, and a later merging fold reads the file.

// DefaultBTreeCacheBytes is the default budget of the page-data cache: about 2.8 million
// string keys of a dozen bytes with their row ids (the reference's four BTREEs on a node and
// an edge table of 700k rows each).
const DefaultBTreeCacheBytes = 64 << 20

var btreeCache = newPageDataCache(DefaultBTreeCacheBytes)

// SetBTreeCacheBytes sets the page-data cache's budget; 0 turns it off and empties it.
func SetBTreeCacheBytes(n int64) { btreeCache.setBudget(n) }

// forgetCached drops what the caches hold of the index uuid, once a staged index replaces it:
// nothing reads a replaced index's entries again but a reader of an older version, which
// reads its files. A fold drops its predecessor's the same way.
func forgetCached(uuid [16]byte) {
	btreeCache.forget(uuid)
	btreeEnds.forget(uuid)
}

// pageDataCache holds page data by index uuid, as records in order.
type pageDataCache struct{ lru[[16]byte, []arrow.Record] }

func newPageDataCache(budget int64) *pageDataCache {
	return &pageDataCache{newLRU[[16]byte](budget, retainedClone, releaseAll)}
}

// put keeps recs (retained) as the page data of the index uuid, evicting the least recently
// used entries past the budget. Page data larger than the whole budget is not kept.
func (c *pageDataCache) put(uuid [16]byte, recs ...arrow.Record) {
	var n int64
	for _, r := range recs {
		n += recordBytes(r)
	}
	c.keep(uuid, retainedClone(recs), n)
}

// get is the page data of index uuid, its records retained (the caller releases them), or nil.
func (c *pageDataCache) get(uuid [16]byte) []arrow.Record {
	recs, _ := c.lru.get(uuid)
	return recs
}

// retainedClone is a copy of recs, each retained.
func retainedClone(recs []arrow.Record) []arrow.Record {
	for _, r := range recs {
		r.Retain()
	}
	return slices.Clone(recs)
}

// recordBytes is the size of rec's buffers.
func recordBytes(rec arrow.Record) int64 {
	var n int64
	for _, col := range rec.Columns() {
		for _, b := range col.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
	}
	return n
}

// releaseAll releases every record of recs.
func releaseAll(recs []arrow.Record) {
	for _, r := range recs {
		r.Release()
	}
}
