package engine

import (
	"context"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// uniqueIndex maps the canonical tuples of one @unique column group to the ids holding them,
// built on first use from the stored table and then kept current by the single writer.
type uniqueIndex struct {
	cols    []string
	byTuple map[string]string // tuple id -> entity id
	byID    map[string]string // entity id -> tuple id
}

func (ts *tableState) uniqueIndex(ctx context.Context, key string, cols []string) (*uniqueIndex, error) {
	name := strings.Join(cols, ",")
	if ix, ok := ts.unique[name]; ok {
		return ix, nil
	}
	ix := &uniqueIndex{cols: cols, byTuple: map[string]string{}, byID: map[string]string{}}
	err := ts.ds.Each(ctx, lance.ScanOptions{Columns: append([]string{"id"}, cols...)}, func(rec arrow.Record) error {
		tb := &rows.TableBatch{TableKey: key, Record: rec}
		tuples, err := tb.Tuples(cols)
		if err != nil {
			return err
		}
		idc, err := tb.Tuples([]string{"id"})
		if err != nil {
			return err
		}
		for i, t := range tuples {
			if t != nil {
				ix.add(idc[i][0], rows.TupleID(t))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ts.unique == nil {
		ts.unique = map[string]*uniqueIndex{}
	}
	ts.unique[name] = ix
	return ix, nil
}

func (ix *uniqueIndex) add(id, tuple string) {
	if old, ok := ix.byID[id]; ok {
		delete(ix.byTuple, old)
	}
	ix.byID[id] = tuple
	ix.byTuple[tuple] = id
}

func (ix *uniqueIndex) remove(id string) {
	if old, ok := ix.byID[id]; ok {
		delete(ix.byTuple, old)
		delete(ix.byID, id)
	}
}

// checkCommittedUnique refuses a batch row whose @unique tuple is held by a surviving committed
// row of another entity. Rows with a null member are exempt; an entity keeping its own value is
// not a violation; a holder the batch re-tuples (merge) does not survive with that value.
func checkCommittedUnique(ctx context.Context, t *plannedTable) error {
	b := t.batch
	name := b.TableKey[strings.IndexByte(b.TableKey, ':')+1:]
	for _, cols := range b.CommittedUniqueGroups() {
		ix, err := t.ts.uniqueIndex(ctx, b.TableKey, cols)
		if err != nil {
			return err
		}
		tuples, err := b.Tuples(cols)
		if err != nil {
			return err
		}
		inBatch := b.Rows()
		for i, tup := range tuples {
			if tup == nil {
				continue
			}
			holder, ok := ix.byTuple[rows.TupleID(tup)]
			if !ok || holder == b.IDs[i] {
				continue
			}
			if j, replaced := inBatch[holder]; replaced && (tuples[j] == nil || rows.TupleID(tuples[j]) != rows.TupleID(tup)) {
				continue
			}
			return &errs.InvalidInput{Line: b.Lines[i], Field: "data." + strings.Join(cols, ","),
				Reason: rows.UniqueViolation(name, cols, tup, holder, b.IDs[i])}
		}
	}
	return nil
}

// foldUnique keeps the built unique indexes current after a commit.
func (ts *tableState) foldUnique(b *rows.TableBatch, overwrite bool) error {
	for _, ix := range ts.unique {
		if overwrite {
			ix.byTuple, ix.byID = map[string]string{}, map[string]string{}
		}
		tuples, err := b.Tuples(ix.cols)
		if err != nil {
			return err
		}
		for i, tup := range tuples {
			if tup == nil {
				ix.remove(b.IDs[i])
			} else {
				ix.add(b.IDs[i], rows.TupleID(tup))
			}
		}
	}
	return nil
}
