package lance

import (
	"fmt"
	"slices"
	"sort"
)

// How a commit carries the index section, operation by operation, as Lance's own commit does
// (its build_manifest; docs/lance-indices.md): an index only ever loses fragments it covered
// (an Update that rewrote an indexed column in place, a Rewrite that moved them into new
// fragments, which it then covers instead), never gains rows it does not hold, and is dropped
// only where Lance drops it (Overwrite; a field gone from the schema; a vector index, or a
// second index of one name, left covering no fragment that exists).

// IndexError is returned when an operation cannot carry an index through: committing it would
// leave the index pointing at rows that moved, so nothing is committed. Compaction avoids
// these by leaving such fragments alone; a Rewrite rebased onto a version with a new index can
// still meet one.
type IndexError struct {
	Dataset string
	Index   string // the index name
	UUID    string
	Op      OpKind
	Reason  string
}

func (e *IndexError) Error() string {
	return fmt.Sprintf("lance: %s: a %s cannot carry index %q (%s): %s", e.Dataset, e.Op, e.Index, e.UUID, e.Reason)
}

// Indices is the index section of this version: every index the manifest lists, in its order.
// The slice is the handle's own; callers must not change it.
func (d *Dataset) Indices() []Index { return d.manifest.Indices }

// carryIndices sets m.Indices, the index section of the manifest txn makes of old.
// pureUpdated are the ids of the new fragments that arrived with a row id for each of their
// rows (rows an Update moved, keeping their ids), before ids were assigned; rewritten are a
// Rewrite's new fragment ids, group by group.
func (d *Dataset) carryIndices(old, m *Manifest, txn *Transaction, pureUpdated []uint64, rewritten [][]uint64) error {
	op := &txn.Op
	xs := cloneIndices(old.Indices)
	switch op.Kind {
	case OpAppend, OpReserveFragments, OpUpdateConfig:
	case OpOverwrite:
		xs = nil
	case OpDelete:
		xs = retainRelevantIndices(xs, m)
	case OpUpdate:
		pruneModifiedFields(xs, op.UpdatedFragments, op.FieldsModified)
		if old.StableRowIDs() && op.UpdateMode == UpdateRewriteRows && len(pureUpdated) > 0 {
			origins := slices.Clone(op.RemovedFragmentIDs)
			for i := range op.UpdatedFragments {
				origins = append(origins, op.UpdatedFragments[i].ID)
			}
			registerMovedRows(xs, pureUpdated, origins, op.FieldsForPreservingFragBitmap)
		}
		xs = retainRelevantIndices(xs, m)
	case OpRewrite:
		var err error
		if xs, err = d.rewriteIndices(xs, old, op.Groups, rewritten); err != nil {
			return err
		}
	case OpCreateIndex:
		xs = slices.DeleteFunc(xs, func(x Index) bool {
			return slices.ContainsFunc(op.NewIndices, func(n Index) bool { return n.Name == x.Name }) ||
				slices.ContainsFunc(op.RemovedIndices, func(r Index) bool { return r.UUID == x.UUID })
		})
		xs = append(xs, cloneIndices(op.NewIndices)...)
	case OpRestore:
		// applyTxn took the restored version's section.
		return nil
	default:
		return fmt.Errorf("%w: carrying indices through a %s", ErrUnsupported, op.Kind)
	}
	if len(xs) == 0 {
		xs = nil
	}
	m.Indices = xs
	return nil
}

// pruneModifiedFields takes the updated fragments out of every index on a modified field: their
// rows of that column were rewritten in place, so the index no longer describes them.
func pruneModifiedFields(xs []Index, updated []Fragment, modified []uint32) {
	if len(modified) == 0 {
		return
	}
	for i := range xs {
		x := &xs[i]
		if !x.HasFragments || !slices.ContainsFunc(x.Fields, func(f int32) bool { return f >= 0 && slices.Contains(modified, uint32(f)) }) {
			continue
		}
		x.Fragments = slices.DeleteFunc(x.Fragments, func(id uint32) bool {
			return slices.ContainsFunc(updated, func(f Fragment) bool { return f.ID == uint64(id) })
		})
	}
}

// registerMovedRows adds fragments that hold only rows moved by a RewriteRows update (same
// stable row ids) to every index that covered all the fragments they came from and is on no
// field whose values changed: the index still describes those rows.
func registerMovedRows(xs []Index, moved, origins []uint64, changed []uint32) {
	for i := range xs {
		x := &xs[i]
		if !x.HasFragments || slices.ContainsFunc(x.Fields, func(f int32) bool { return f >= 0 && slices.Contains(changed, uint32(f)) }) {
			continue
		}
		if !slices.ContainsFunc(origins, func(id uint64) bool { return !x.Covers(id) }) {
			for _, id := range moved {
				x.Fragments = append(x.Fragments, uint32(id))
			}
			slices.Sort(x.Fragments)
			x.Fragments = slices.Compact(x.Fragments)
		}
	}
}

// retainRelevantIndices drops what Lance drops after a Delete or an Update: indices on a field
// the schema no longer has (system indices excepted), and, among the indices of one name, those
// that cover no fragment of m: all of them if others of that name still cover some, else all
// but the oldest, and a vector index even when it is the only one of its name.
func retainRelevantIndices(xs []Index, m *Manifest) []Index {
	fields := map[int32]bool{}
	for _, id := range m.Schema.FieldIDs() {
		fields[int32(id)] = true
	}
	xs = slices.DeleteFunc(xs, func(x Index) bool {
		return !x.IsSystem() && slices.ContainsFunc(x.Fields, func(f int32) bool { return !fields[f] })
	})
	live := map[uint32]bool{}
	for i := range m.Fragments {
		live[uint32(m.Fragments[i].ID)] = true
	}
	empty := func(x *Index) bool {
		return !slices.ContainsFunc(x.Fragments, func(id uint32) bool { return live[id] })
	}
	byName := map[string][]int{}
	for i := range xs {
		if xs[i].Name != FragReuseIndexName {
			byName[xs[i].Name] = append(byName[xs[i].Name], i)
		}
	}
	keep := make([]bool, len(xs))
	for i := range xs {
		keep[i] = xs[i].Name == FragReuseIndexName
	}
	for _, idx := range byName {
		var full, vacant []int
		for _, i := range idx {
			if empty(&xs[i]) {
				vacant = append(vacant, i)
			} else {
				full = append(full, i)
			}
		}
		switch {
		case len(full) > 0:
			for _, i := range full {
				keep[i] = true
			}
		case len(idx) > 1:
			sort.SliceStable(vacant, func(a, b int) bool { return xs[vacant[a]].DatasetVersion < xs[vacant[b]].DatasetVersion })
			if !xs[vacant[0]].IsVector() {
				keep[vacant[0]] = true
			}
		default:
			keep[idx[0]] = !xs[idx[0]].IsVector()
		}
	}
	out := xs[:0]
	for i := range xs {
		if keep[i] {
			out = append(out, xs[i])
		}
	}
	return out
}

// rewriteIndices carries the indices through a Rewrite of groups. With stable row ids the
// moved rows keep their ids, so an index that covered a group's old fragments covers its new
// ones instead; a group half covered would leave rows the index holds in fragments it does not
// cover, and is refused. Without stable row ids the rows' addresses change, which would take
// rewriting the index files (Lance's remap): a group touching any index is refused. A table
// with a fragment reuse index (a compaction whose remap was deferred) is refused whole.
func (d *Dataset) rewriteIndices(xs []Index, old *Manifest, groups []RewriteGroup, newIDs [][]uint64) ([]Index, error) {
	refuse := func(x *Index, reason string) error {
		return &IndexError{Dataset: d.dir.URI(), Index: x.Name, UUID: x.UUIDString(), Op: OpRewrite, Reason: reason}
	}
	stable := old.StableRowIDs()
	for i := range xs {
		x := &xs[i]
		if x.Name == FragReuseIndexName {
			return nil, refuse(x, "the table has a fragment reuse index (a compaction whose index remap is deferred); compact it with Lance")
		}
		if !x.HasFragments {
			if stable {
				continue // Lance leaves an index of unknown coverage as it is
			}
			return nil, refuse(x, "the index records no fragment bitmap, so the fragments it covers are unknown")
		}
		for gi, g := range groups {
			in := 0
			for _, f := range g.OldFragments {
				if x.Covers(f.ID) {
					in++
				}
			}
			switch {
			case in == 0:
				continue
			case !stable:
				return nil, refuse(x, fmt.Sprintf("rewrite group %d moves rows the index holds and the table has no stable row ids (the index files would need remapping)", gi))
			case in != len(g.OldFragments):
				return nil, refuse(x, fmt.Sprintf("rewrite group %d mixes fragments the index covers with fragments it does not", gi))
			}
			x.Fragments = slices.DeleteFunc(x.Fragments, func(id uint32) bool {
				return slices.ContainsFunc(g.OldFragments, func(f Fragment) bool { return f.ID == uint64(id) })
			})
			for _, id := range newIDs[gi] {
				x.Fragments = append(x.Fragments, uint32(id))
			}
			slices.Sort(x.Fragments)
			x.Fragments = slices.Compact(x.Fragments)
		}
	}
	return xs, nil
}

// indexCoverage is, per fragment id of the version, the positions of the indices that cover
// it; compaction groups only fragments with the same coverage, as Lance's planner does.
// blocked says the fragment may not be rewritten at all (no stable row ids and an index covers
// it, or an index whose coverage is unknown or that the rewrite could not carry).
func (m *Manifest) indexCoverage() (cover func(id uint64) string, blocked func(id uint64) bool) {
	stable := m.StableRowIDs()
	all := false
	for i := range m.Indices {
		x := &m.Indices[i]
		if x.Name == FragReuseIndexName || (!x.HasFragments && !stable) {
			all = true
		}
	}
	cover = func(id uint64) string {
		var key []byte
		for i := range m.Indices {
			if m.Indices[i].Covers(id) {
				key = fmt.Appendf(key, "%d,", i)
			}
		}
		return string(key)
	}
	blocked = func(id uint64) bool {
		if all {
			return true
		}
		return !stable && cover(id) != ""
	}
	return cover, blocked
}

// CoverageRunStart is the position in Fragments of the oldest fragment of the run of fragments
// ending at end-1 that the same indices cover: a compaction may merge fragments only within
// such a run (indexCoverage), so a size-tiered policy that counts fragments across the
// boundary of an index's coverage has its merges cut in two there, each part short of the
// next tier and rewritten again later. 0 when every fragment before end has the same coverage
// (no index, or one that covers them all), and when end is 0.
func (m *Manifest) CoverageRunStart(end int) int {
	if end <= 0 || len(m.Indices) == 0 {
		return 0
	}
	// The planner's own key (indexCoverage), so that a run this returns is never cut there.
	cover, _ := m.indexCoverage()
	last := cover(m.Fragments[end-1].ID)
	for i := end - 2; i >= 0; i-- {
		if cover(m.Fragments[i].ID) != last {
			return i + 1
		}
	}
	return 0
}

// StageCreateIndex returns a CreateIndex transaction that lists xs in the index section,
// replacing the indices of the same names, and drops the indices of removed (by uuid). The
// index files must already be under each index's directory: the commit only names them.
func (d *Dataset) StageCreateIndex(xs, removed []Index, o StageOptions) (*Staged, error) {
	for i := range xs {
		if err := d.checkNewIndex(&xs[i]); err != nil {
			return nil, err
		}
	}
	return d.newStaged(o, Operation{Kind: OpCreateIndex, NewIndices: cloneIndices(xs), RemovedIndices: cloneIndices(removed)}, nil), nil
}

// checkNewIndex refuses an index a CreateIndex would list wrongly: no name, a field the schema
// lacks, or no fragment bitmap (every index this package lists says what it covers).
func (d *Dataset) checkNewIndex(x *Index) error {
	bad := func(reason string) error {
		return &IndexError{Dataset: d.dir.URI(), Index: x.Name, UUID: x.UUIDString(), Op: OpCreateIndex, Reason: reason}
	}
	if x.Name == "" {
		return bad("the index has no name")
	}
	if !x.HasFragments {
		return bad("the index records no fragment bitmap")
	}
	ids := d.Schema().FieldIDs()
	for _, f := range x.Fields {
		if !slices.Contains(ids, f) {
			return bad(fmt.Sprintf("field id %d is not in the schema", f))
		}
	}
	return nil
}

// ErrorKind is "data_version": the table holds an index this build cannot carry through the
// operation, which no retry changes; an operator compacts or re-indexes it with Lance.
func (e *IndexError) ErrorKind() string { return "data_version" }

// Uncovered is what index x does not cover in this version: the live rows and the number of
// the fragments holding them (the rows a query answers by scanning beside the index).
func (d *Dataset) Uncovered(x *Index) (rows uint64, fragments int) {
	for i := range d.manifest.Fragments {
		f := &d.manifest.Fragments[i]
		if n := f.NumRows(); n > 0 && !x.Covers(f.ID) {
			rows += n
			fragments++
		}
	}
	return rows, fragments
}

// UnindexedRows is the most live rows any one of the version's indices does not cover (0 for a
// table without indices): how far the indices lag the data.
func (d *Dataset) UnindexedRows() uint64 {
	var most uint64
	for i := range d.manifest.Indices {
		if x := &d.manifest.Indices[i]; !x.IsSystem() {
			rows, _ := d.Uncovered(x)
			most = max(most, rows)
		}
	}
	return most
}
