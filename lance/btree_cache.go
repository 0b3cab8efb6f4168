package lance

import (
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

// pageDataCache holds page data by index uuid, one record each.
type pageDataCache struct{ lru[[16]byte, arrow.Record] }

func newPageDataCache(budget int64) *pageDataCache {
	return &pageDataCache{newLRU[[16]byte](budget, retained, arrow.Record.Release)}
}

// put keeps rec (retained) as the page data of the index uuid, evicting the least recently
// used entries past the budget. Page data larger than the whole budget is not kept.
func (c *pageDataCache) put(uuid [16]byte, rec arrow.Record) {
	c.keep(uuid, retained(rec), recordBytes(rec))
}

// get is the page data of index uuid, retained (the caller releases it), or nil.
func (c *pageDataCache) get(uuid [16]byte) arrow.Record {
	rec, _ := c.lru.get(uuid)
	return rec
}

// retained is rec, retained once more.
func retained(rec arrow.Record) arrow.Record {
	rec.Retain()
	return rec
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
