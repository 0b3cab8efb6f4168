package engine

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// writeItem is one row a merge writes to the target: new, or replacing the row at addr.
type writeItem struct {
	rowRef
	id     string
	addr   lance.RowAddress
	update bool
}

// deleteItem is one target row a merge deletes.
type deleteItem struct {
	id   string
	addr lance.RowAddress
}

// cut turns a table's changes into its chain: delete chunks of at most MergeChunkRows ids,
// then write chunks of at most MergeChunkRows rows and MergeChunkBytes bytes (measured on the
// rows actually taken). A single row over the byte bound, or a chain over
// recovery.MaxMergeChain transactions, is refused before anything is armed.
func (mt *mergeTable) cut(recs []arrow.Record, writes []writeItem, deletes []deleteItem) error {
	for start := 0; start < len(deletes); start += chunkRows {
		part := deletes[start:min(start+chunkRows, len(deletes))]
		c := &mergeChunk{}
		for _, d := range part {
			c.remove = append(c.remove, d.addr)
			c.removedIDs = append(c.removedIDs, d.id)
		}
		mt.chunks = append(mt.chunks, c)
	}
	for start := 0; start < len(writes); start += chunkRows {
		if err := mt.cutWrites(recs, writes[start:min(start+chunkRows, len(writes))]); err != nil {
			return err
		}
	}
	mt.stats.Transactions = len(mt.chunks)
	if len(mt.chunks) > recovery.MaxMergeChain {
		return &errs.ResourceLimitExceeded{Resource: "branch-merge recovery transactions for " + mt.key,
			Limit: recovery.MaxMergeChain, Actual: uint64(len(mt.chunks))}
	}
	return nil
}

// cutWrites builds one chunk from items, halving it while its rows exceed the byte bound.
func (mt *mergeTable) cutWrites(recs []arrow.Record, items []writeItem) error {
	c, bytes, err := mt.buildChunk(recs, items)
	if err != nil {
		return err
	}
	if bytes <= MergeChunkBytes {
		mt.chunks = append(mt.chunks, c)
		return nil
	}
	c.release()
	if len(items) == 1 {
		return &errs.ResourceLimitExceeded{Resource: "keyed write bytes for " + mt.key, Limit: MergeChunkBytes, Actual: uint64(bytes)}
	}
	half := len(items) / 2
	if err := mt.cutWrites(recs, items[:half]); err != nil {
		return err
	}
	return mt.cutWrites(recs, items[half:])
}

// buildChunk takes the items' rows (sorted by record, then row) out of recs.
func (mt *mergeTable) buildChunk(recs []arrow.Record, items []writeItem) (*mergeChunk, int64, error) {
	c := &mergeChunk{insertOnly: true}
	var size int64
	for i := 0; i < len(items); {
		j := i
		var keep []int
		for ; j < len(items) && items[j].rec == items[i].rec; j++ {
			keep = append(keep, items[j].row)
		}
		part, err := rows.TakeRows(recs[items[i].rec], keep)
		if err != nil {
			c.release()
			return nil, 0, err
		}
		size += rows.RecordBytes(part)
		c.recs = append(c.recs, part)
		if mt.isEdge {
			c.src = appendStrings(c.src, part, "src")
			c.dst = appendStrings(c.dst, part, "dst")
		}
		i = j
	}
	for _, it := range items {
		c.ids = append(c.ids, it.id)
		if it.update {
			c.remove = append(c.remove, it.addr)
			c.insertOnly = false
		}
	}
	return c, size, nil
}

func appendStrings(dst []string, rec arrow.Record, name string) []string {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) == 0 {
		panic(fmt.Sprintf("merge: edge record without a %s column", name))
	}
	col := rec.Column(idx[0]).(*array.String)
	for i := 0; i < col.Len(); i++ {
		dst = append(dst, col.Value(i))
	}
	return dst
}

func (c *mergeChunk) release() {
	for _, r := range c.recs {
		r.Release()
	}
	c.recs = nil
}
