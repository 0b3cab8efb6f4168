package rows

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// Helpers for the checks that need stored data (edge endpoints, @card, @unique against
// committed rows), which the engine runs over the batch and the committed snapshot.

// Len is the number of rows (after dedupe).
func (b *TableBatch) Len() int { return len(b.IDs) }

// Release releases the Arrow record.
func (b *TableBatch) Release() {
	if b.Record != nil {
		b.Record.Release()
		b.Record = nil
	}
}

// Rows maps each id to its row.
func (b *TableBatch) Rows() map[string]int {
	m := make(map[string]int, len(b.IDs))
	for i, id := range b.IDs {
		m[id] = i
	}
	return m
}

// OutDegree counts the batch's edges per source node id (nil for a node batch). After
// dedupe each edge id is one row, so the counts are already coalesced by id within the
// batch; the engine adds committed edges not replaced by the batch.
func (b *TableBatch) OutDegree() map[string]int {
	if b.Edge == nil {
		return nil
	}
	m := make(map[string]int)
	for _, s := range b.Src {
		m[s]++
	}
	return m
}

// CommittedUniqueGroups lists the @unique column groups that must also be checked against
// surviving committed rows: every @unique group except a node's @key (the key is the id,
// so a committed holder of the same key is the same entity — an upsert or a KeyConflict).
func (b *TableBatch) CommittedUniqueGroups() [][]string {
	tbl := b.table()
	groups, isKey := uniqueGroups(b.Node, tbl)
	var out [][]string
	for i, g := range groups {
		if !isKey[i] {
			out = append(out, g)
		}
	}
	return out
}

// Tuples returns, per row, the canonical tuple of columns (property names, or id/src/dst),
// rendered by CanonicalScalar; nil for a row with a null member (exempt from @unique).
// TupleID(tuple) is a collision-free map key and FormatTuple/UniqueViolation render the
// reference's message.
func (b *TableBatch) Tuples(columns []string) ([][]string, error) {
	arrs := make([]arrow.Array, len(columns))
	schema := b.Record.Schema()
	for j, c := range columns {
		idx := schema.FieldIndices(c)
		if len(idx) != 1 {
			return nil, fmt.Errorf("rows: %s has no column '%s'", b.TableKey, c)
		}
		arrs[j] = b.Record.Column(idx[0])
	}
	out := make([][]string, b.Record.NumRows())
rows:
	for i := range out {
		t := make([]string, len(arrs))
		for j, a := range arrs {
			s, ok, err := CanonicalScalar(a, i)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue rows
			}
			t[j] = s
		}
		out[i] = t
	}
	return out, nil
}

func (b *TableBatch) table() *pg.Table {
	if b.Node != nil {
		return &b.Node.Table
	}
	return &b.Edge.Table
}
