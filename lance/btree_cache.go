package lance

import (
	"container/list"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
)

// A BTREE fold rewrites the whole index, and reading back the page data this process wrote at
// the previous fold was a quarter of a fold's cost. Index files are never changed once
// written (a fold writes a new index under a new uuid), so the page data of the BTREEs this
// process wrote last is kept in memory, by uuid, within a byte budget, and a fold of one of
// them starts from memory. A miss (another process wrote the index, it was evicted, or the
// process restarted) reads the file as before; the two give the same entries. An entry is the
// page data in one or more records, in order: a fold that appends (btree_append.go) keeps its
// predecessor's records and adds its fresh entries' after them.

// DefaultBTreeCacheBytes is the default budget of the page-data cache: about 2.8 million
// string keys of a dozen bytes with their row ids (the reference's four BTREEs on a node and
// an edge table of 700k rows each).
const DefaultBTreeCacheBytes = 64 << 20

var btreeCache = newPageDataCache(DefaultBTreeCacheBytes)

// SetBTreeCacheBytes sets the page-data cache's budget; 0 turns it off and empties it.
func SetBTreeCacheBytes(n int64) { btreeCache.setBudget(n) }

type pageDataCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	order  *list.List // of *cachedPageData, most recent first
	byUUID map[[16]byte]*list.Element
}

type cachedPageData struct {
	uuid  [16]byte
	recs  []arrow.Record
	bytes int64
}

func newPageDataCache(budget int64) *pageDataCache {
	return &pageDataCache{budget: budget, order: list.New(), byUUID: map[[16]byte]*list.Element{}}
}

// put keeps recs (retained) as the page data of the index uuid, evicting the least recently
// used entries past the budget. Page data larger than the whole budget is not kept.
func (c *pageDataCache) put(uuid [16]byte, recs ...arrow.Record) {
	var n int64
	for _, r := range recs {
		n += recordBytes(r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.budget {
		return
	}
	if e, ok := c.byUUID[uuid]; ok {
		c.drop(e)
	}
	for _, r := range recs {
		r.Retain()
	}
	c.byUUID[uuid] = c.order.PushFront(&cachedPageData{uuid: uuid, recs: slices.Clone(recs), bytes: n})
	c.used += n
	c.evict()
}

// get is the page data of index uuid, its records retained (the caller releases them), or nil.
func (c *pageDataCache) get(uuid [16]byte) []arrow.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byUUID[uuid]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	recs := slices.Clone(e.Value.(*cachedPageData).recs)
	for _, r := range recs {
		r.Retain()
	}
	return recs
}

// forget drops the entry of index uuid: a fold of it wrote its successor, which is cached,
// and the old index is not folded again.
func (c *pageDataCache) forget(uuid [16]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byUUID[uuid]; ok {
		c.drop(e)
	}
}

func (c *pageDataCache) setBudget(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.budget = max(n, 0)
	c.evict()
}

func (c *pageDataCache) evict() {
	for c.used > c.budget {
		c.drop(c.order.Back())
	}
}

func (c *pageDataCache) drop(e *list.Element) {
	p := c.order.Remove(e).(*cachedPageData)
	delete(c.byUUID, p.uuid)
	c.used -= p.bytes
	releaseAll(p.recs)
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
