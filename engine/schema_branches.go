package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// A schema apply changes main only. A branch forked before it keeps its manifest: its tables
// (and the versions of main's it still points at) have the columns of the schema it was forked
// under. This file is what the rest of the engine does about such a branch:
//
//   - a load into it that touches a table whose columns are not the accepted schema's, or a
//     type the branch does not have under its accepted name, is refused (*StaleBranchError,
//     schema_unsupported, dead-lettered): its rows would not fit the table;
//   - its merge into an up-to-date target is checked per table it changed: a table whose
//     columns still match merges as before; one whose accepted schema only added nullable
//     columns merges the rows the branch inserted, with nulls in the new columns; anything
//     else — a column the branch has that the accepted schema dropped or renamed, a changed
//     type, a required new column, rows the branch updated or deleted, a type the accepted
//     schema dropped — is a merge_conflict of kind schema_mismatch naming the difference.

// ConflictSchemaMismatch is the merge conflict kind of a branch change that is not well-typed
// under the accepted schema.
const ConflictSchemaMismatch = "schema_mismatch"

// StaleBranchError refuses a load into a branch whose table predates the accepted schema.
type StaleBranchError struct {
	Branch, TableKey, Reason string
}

func (e *StaleBranchError) Error() string {
	return fmt.Sprintf("branch %s predates the accepted schema for %s: %s; merge what it has and fork it again from main", e.Branch, e.TableKey, e.Reason)
}

// ErrorKind is errs.KindSchemaUnsupported: the batch can never apply on this branch.
func (e *StaleBranchError) ErrorKind() string { return errs.KindSchemaUnsupported }

// ErrorDetail names the branch and table.
func (e *StaleBranchError) ErrorDetail() map[string]any {
	return map[string]any{"branch": e.Branch, "table_key": e.TableKey}
}

// columnDelta is how a table's stored columns differ from the accepted schema's.
type columnDelta struct {
	added, required, removed, changed []string // required: added and not nullable
}

func (d columnDelta) same() bool {
	return len(d.added)+len(d.removed)+len(d.changed) == 0
}

func (d columnDelta) String() string {
	var parts []string
	for _, p := range []struct {
		what string
		cols []string
	}{{"adds", d.added}, {"no longer has", d.removed}, {"changes the type of", d.changed}} {
		if len(p.cols) > 0 {
			parts = append(parts, "the accepted schema "+p.what+" "+strings.Join(p.cols, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// columnsAgainst compares ds's columns with want by name and type.
func columnsAgainst(ds *lance.Dataset, want *arrow.Schema) (columnDelta, error) {
	var d columnDelta
	have, err := ds.Schema().ToArrow()
	if err != nil {
		return d, err
	}
	for _, f := range want.Fields() {
		idx := have.FieldIndices(f.Name)
		switch {
		case len(idx) == 0:
			d.added = append(d.added, f.Name)
			if !f.Nullable {
				d.required = append(d.required, f.Name)
			}
		case !arrow.TypeEqual(have.Field(idx[0]).Type, f.Type):
			d.changed = append(d.changed, f.Name)
		}
	}
	for _, f := range have.Fields() {
		if len(want.FieldIndices(f.Name)) == 0 {
			d.removed = append(d.removed, f.Name)
		}
	}
	return d, nil
}

// projectRecord is rec with want's columns: each under its name (or the name from gives for
// it); a column rec does not have is made by fill when fill has it (a backfilled required
// property), else all null, which it must allow.
func projectRecord(rec arrow.Record, want *arrow.Schema, from map[string]string, fill func(name string, n int) (arrow.Array, bool, error)) (arrow.Record, error) {
	n := rec.NumRows()
	cols := make([]arrow.Array, len(want.Fields()))
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	for i, f := range want.Fields() {
		name := f.Name
		if old, ok := from[name]; ok {
			name = old
		}
		if idx := rec.Schema().FieldIndices(name); len(idx) == 1 {
			col := rec.Column(idx[0])
			if !arrow.TypeEqual(col.DataType(), f.Type) {
				release()
				return nil, fmt.Errorf("column %s is %s, the schema says %s", f.Name, col.DataType(), f.Type)
			}
			col.Retain()
			cols[i] = col
			continue
		}
		if fill != nil {
			col, ok, err := fill(f.Name, int(n))
			if err != nil {
				release()
				return nil, err
			}
			if ok {
				cols[i] = col
				continue
			}
		}
		if !f.Nullable {
			release()
			return nil, fmt.Errorf("column %s is new and not nullable", f.Name)
		}
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(n))
	}
	out := array.NewRecord(want, cols, n)
	release()
	return out, nil
}

func schemaConflict(key, format string, args ...any) errs.MergeConflict {
	kind, name, _ := strings.Cut(key, ":")
	return errs.MergeConflict{EntityKind: kind, TypeName: name, Kind: ConflictSchemaMismatch,
		Message: fmt.Sprintf("%s %s: %s", kind, name, fmt.Sprintf(format, args...))}
}

// byIdentity indexes a manifest's live tables by identity.
func byIdentity(st *publisher.State) map[ids.TableIdentity]publisher.TableEntry {
	out := map[ids.TableIdentity]publisher.TableEntry{}
	for _, e := range st.Tables() {
		out[e.Identity] = e
	}
	return out
}

// planStaleSource plans a table the source changed under columns the accepted schema has
// changed since (d): only rows it inserted, and only into columns the accepted schema kept,
// with nulls in the nullable ones it added.
func (g *Graph) planStaleSource(ctx context.Context, mt *mergeTable, base publisher.TableEntry, want *arrow.Schema, d columnDelta, budget *retained) ([]errs.MergeConflict, error) {
	switch {
	case len(d.removed) > 0 || len(d.changed) > 0 || len(d.required) > 0:
		return []errs.MergeConflict{schemaConflict(mt.key, "changed on the source under an earlier schema: %s", d)}, nil
	}
	bds, sds, _, err := mt.openSides(ctx, g, base)
	if err != nil {
		return nil, err
	}
	sd, err := diffSide(ctx, bds, sds)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range sd.recs {
			r.Release()
		}
	}()
	if len(sd.rewritten)+len(sd.deleted) > 0 {
		return []errs.MergeConflict{schemaConflict(mt.key, "rows updated or deleted on the source under an earlier schema (%s); only inserted rows merge across a schema change", d)}, nil
	}
	recs := make([]arrow.Record, 0, len(sd.recs))
	for _, r := range sd.recs {
		p, err := projectRecord(r, want, nil, nil)
		if err != nil {
			return nil, err
		}
		recs = append(recs, p)
	}
	if err := budget.charge(recs); err != nil {
		return nil, err
	}
	if mt.ts, err = g.openTable(ctx, mt.target, mt.isEdge); err != nil {
		return nil, err
	}
	mt.route = RouteDiff
	var writes []writeItem
	var conflicts []errs.MergeConflict
	for _, id := range sortedKeys(sd.written) {
		if _, exists := mt.ts.ids.Get(id); exists {
			id2 := id
			c := schemaConflict(mt.key, "%q inserted on both sides", id)
			c.EntityID, c.Kind = &id2, "divergent_insert"
			conflicts = append(conflicts, c)
			continue
		}
		writes = append(writes, writeItem{rowRef: sd.written[id], id: id})
	}
	if len(conflicts) > 0 {
		return conflicts, nil
	}
	sortWrites(writes)
	mt.stats.Inserted = len(writes)
	return nil, mt.cut(recs, writes, nil)
}

// staleBranchTable is the refusal of a load whose table the branch's manifest lacks under its
// accepted name: renamed since the branch forked, or added since.
func staleBranchTable(st *publisher.State, branch string, b *rows.TableBatch) error {
	var t *pg.Table
	if b.Edge != nil {
		t = &b.Edge.Table
	} else {
		t = &b.Node.Table
	}
	id := ids.TableIdentity{StableTableID: t.TypeID, TableIncarnationID: t.IncarnationID}
	if e, ok := byIdentity(st)[id]; ok {
		return &StaleBranchError{Branch: branch, TableKey: b.TableKey, Reason: "the branch has this type as " + e.TableKey}
	}
	return &StaleBranchError{Branch: branch, TableKey: b.TableKey, Reason: "the type was added after the branch was forked"}
}
