package lance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// VersionDiff is how one version of a table differs from an older version it descends from
// (the same branch later on, or a branch forked from it): which rows are new, and which rows
// that were live in the older version are no longer live. A fragment both versions share holds
// the same rows.
//
// On a dataset with stable row ids a rewrite (compaction) moves rows without changing them: a
// row of the newer version whose last-updated-at version is not after the older version and
// whose row id was live in the older version at an address now gone is the same row carried
// over, and is neither new nor removed. Rows rewritten by an update (same row id, newer
// last-updated-at version) are removed and new.
type VersionDiff struct {
	// NewFragments are fragment ids of the newer version the older one lacks and whose every
	// live row was written since the older version.
	NewFragments []uint64
	// NewRows are rows written since the older version that live in fragments which also hold
	// rows carried unchanged by a rewrite (newer addresses, fragment by fragment in manifest
	// order); wholly new fragments are in NewFragments instead.
	NewRows []RowAddress
	// Removed are rows live in the older version and gone from the newer, as older addresses.
	Removed []RowAddress
}

// sameFragment says two manifests' fragments are the same physical fragment: same id, same
// row count and the same data files (file names are random, so equal names are equal files).
func sameFragment(a, b *Fragment) bool {
	if a.ID != b.ID || a.PhysicalRows != b.PhysicalRows || len(a.Files) != len(b.Files) {
		return false
	}
	for i := range a.Files {
		if a.Files[i].Path != b.Files[i].Path {
			return false
		}
	}
	return true
}

func sameDeletion(a, b *DeletionFile) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.ReadVersion == b.ReadVersion && a.FileType == b.FileType && a.NumDeletedRows == b.NumDeletedRows
}

// DiffFrom compares this version with older. It reads only the deletion files of fragments
// whose deletion vector changed, and the row id and version sequences of fragments that
// changed, and those only when a rewrite may have carried rows: the cost follows the change,
// not the table.
func (d *Dataset) DiffFrom(ctx context.Context, older *Dataset) (*VersionDiff, error) {
	mine := map[uint64]*Fragment{}
	for i := range d.manifest.Fragments {
		mine[d.manifest.Fragments[i].ID] = &d.manifest.Fragments[i]
	}
	theirs := map[uint64]bool{}
	// removed lists, per older fragment, the offsets of its rows live then and not now.
	type lost struct {
		frag *Fragment
		offs []uint32
	}
	var removed []lost
	for i := range older.manifest.Fragments {
		of := &older.manifest.Fragments[i]
		nf, kept := mine[of.ID]
		if kept && !sameFragment(of, nf) {
			kept = false
		}
		if kept {
			theirs[of.ID] = true
			if sameDeletion(of.Deletion, nf.Deletion) {
				continue
			}
		}
		was, err := older.deletedOffsets(ctx, of)
		if err != nil {
			return nil, err
		}
		var now []uint32
		if kept {
			if now, err = d.deletedOffsets(ctx, nf); err != nil {
				return nil, err
			}
		}
		g := lost{frag: of}
		for off := uint32(0); uint64(off) < of.PhysicalRows; off++ {
			_, deadBefore := slices.BinarySearch(was, off)
			if deadBefore {
				continue
			}
			if _, deadNow := slices.BinarySearch(now, off); deadNow || !kept {
				g.offs = append(g.offs, off)
			}
		}
		if len(g.offs) > 0 {
			removed = append(removed, g)
		}
	}
	var fresh []*Fragment
	for i := range d.manifest.Fragments {
		if f := &d.manifest.Fragments[i]; !theirs[f.ID] {
			fresh = append(fresh, f)
		}
	}
	out := &VersionDiff{}
	plain := func() (*VersionDiff, error) {
		for _, g := range removed {
			for _, off := range g.offs {
				out.Removed = append(out.Removed, RowAddress(g.frag.ID<<32|uint64(off)))
			}
		}
		for _, f := range fresh {
			out.NewFragments = append(out.NewFragments, f.ID)
		}
		return out, nil
	}
	if len(removed) == 0 || len(fresh) == 0 || !d.manifest.StableRowIDs() || !older.manifest.StableRowIDs() {
		return plain()
	}
	// Rows of new fragments that may have been carried by a rewrite: live, and last written no
	// later than the older version.
	runsOf := make([][]versionRun, len(fresh)) // set for fragments holding such rows
	anyOld := false
	for fi, f := range fresh {
		runs, err := f.lastUpdatedRuns()
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			if r.version <= older.Version() {
				runsOf[fi], anyOld = runs, true
				break
			}
		}
	}
	if !anyOld {
		return plain()
	}
	// Row ids and version numbers only compare along one lineage: two branches number their
	// versions and assign row ids independently after they fork.
	if ok, err := d.descendsFrom(ctx, older); err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return plain()
	}
	type row struct {
		addr RowAddress
		id   uint64
	}
	var carried []row
	var carriedFrom []int // index in fresh of each carried candidate
	dead := make([][]uint32, len(fresh))
	for fi, f := range fresh {
		runs := runsOf[fi]
		if runs == nil {
			continue
		}
		ids, err := f.stableRowIDs()
		if err != nil {
			return nil, err
		}
		if dead[fi], err = d.deletedOffsets(ctx, f); err != nil {
			return nil, err
		}
		off, del := uint64(0), dead[fi]
		for _, r := range runs {
			for k := uint64(0); k < r.n; k, off = k+1, off+1 {
				if len(del) > 0 && uint64(del[0]) == off {
					del = del[1:]
					continue
				}
				if r.version <= older.Version() {
					carried = append(carried, row{RowAddress(f.ID<<32 | off), ids[off]})
					carriedFrom = append(carriedFrom, fi)
				}
			}
		}
	}
	if len(carried) == 0 {
		return plain()
	}
	var gone []row
	for _, g := range removed {
		ids, err := g.frag.stableRowIDs()
		if err != nil {
			return nil, err
		}
		for _, off := range g.offs {
			gone = append(gone, row{RowAddress(g.frag.ID<<32 | uint64(off)), ids[off]})
		}
	}
	// Match the two sets by row id (sorted index lists, one pass).
	byID := func(rs []row) []int {
		idx := make([]int, len(rs))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(rs[a].id, rs[b].id) })
		return idx
	}
	ci, gi := byID(carried), byID(gone)
	matchedC, matchedG := make([]bool, len(carried)), make([]bool, len(gone))
	for a, b := 0, 0; a < len(ci) && b < len(gi); {
		x, y := carried[ci[a]].id, gone[gi[b]].id
		switch {
		case x < y:
			a++
		case x > y:
			b++
		default:
			matchedC[ci[a]], matchedG[gi[b]] = true, true
			a, b = a+1, b+1
		}
	}
	for i, r := range gone {
		if !matchedG[i] {
			out.Removed = append(out.Removed, r.addr)
		}
	}
	// A new fragment holding a carried row contributes its other live rows to NewRows; the
	// rest are wholly new.
	keptRows := make([][]bool, len(fresh))
	for i, r := range carried {
		if matchedC[i] {
			fi := carriedFrom[i]
			if keptRows[fi] == nil {
				keptRows[fi] = make([]bool, fresh[fi].PhysicalRows)
			}
			keptRows[fi][r.addr.Offset()] = true
		}
	}
	for fi, f := range fresh {
		if keptRows[fi] == nil {
			out.NewFragments = append(out.NewFragments, f.ID)
			continue
		}
		del := dead[fi]
		for off := uint32(0); uint64(off) < f.PhysicalRows; off++ {
			if len(del) > 0 && del[0] == off {
				del = del[1:]
				continue
			}
			if !keptRows[fi][off] {
				out.NewRows = append(out.NewRows, RowAddress(f.ID<<32|uint64(off)))
			}
		}
	}
	return out, nil
}

// descendsFrom reports whether older is in this version's history: the same branch at this or
// an earlier version, or a branch this one was forked from (directly or through others) at or
// after older's version. Branch identifiers name the chain of forks incarnation by incarnation,
// so older's must be a prefix of this one's.
func (d *Dataset) descendsFrom(ctx context.Context, older *Dataset) (bool, error) {
	if d.root.URI() != older.root.URI() {
		return false, nil
	}
	if d.branch == older.branch {
		return older.Version() <= d.Version(), nil
	}
	mine, err := d.Identifier(ctx)
	if err == nil {
		var theirs BranchIdentifier
		if theirs, err = older.Identifier(ctx); err == nil {
			if len(theirs) >= len(mine) || !mine[:len(theirs)].Equal(theirs) {
				return false, nil
			}
			return older.Version() <= mine[len(theirs)].ParentVersion, nil
		}
	}
	var be *BranchError
	if errors.As(err, &be) {
		return false, nil // a branch without a ref: no known lineage
	}
	return false, err
}

// InsertOnlyCertified checks that version v's transaction is a certified insertion: the
// omnigraph.insert_absence = "v1" property on an insert-only Update (RewriteRows, new fragments
// only, no removed, updated or modified fields, every field id preserved) read from v-1. It
// A non-nil error says why not; callers treat it
// as "unfamiliar history" and fall back to an ordinary diff.
func (d *Dataset) InsertOnlyCertified(ctx context.Context, v uint64) error {
	t, err := d.ReadTransaction(ctx, v)
	if err != nil {
		return err
	}
	op := &t.Op
	switch {
	case t.Properties[InsertAbsenceProperty] != "v1":
		return fmt.Errorf("version %d carries no insertion-absence certificate", v)
	case op.Kind != OpUpdate || t.ReadVersion+1 != v:
		return fmt.Errorf("version %d is a %s read from %d, not an insert-only update of %d", v, op.Kind, t.ReadVersion, v-1)
	case len(op.RemovedFragmentIDs) > 0 || len(op.UpdatedFragments) > 0 || len(op.FieldsModified) > 0 || len(op.Fragments) == 0:
		return fmt.Errorf("version %d is not insert-only", v)
	case op.UpdateMode != UpdateRewriteRows || !slices.Equal(op.FieldsForPreservingFragBitmap, d.fieldIDs()):
		return fmt.Errorf("version %d does not preserve the full field preorder", v)
	}
	return nil
}

// ForkedAt says whether this branch was created (a shallow clone) from parent at exactly
// version v: the branch's version v is the clone.
func (d *Dataset) ForkedAt(ctx context.Context, parent string, v uint64) bool {
	if d.branch == "" {
		return false
	}
	t, err := d.ReadTransaction(ctx, v)
	if err != nil || t.Op.Kind != OpClone || t.Op.Clone == nil {
		return false
	}
	c := t.Op.Clone
	from := ""
	if c.RefName != nil {
		from = *c.RefName
	}
	return c.RefVersion == v && from == parent
}

// CopyFragments copies fragments of another version of the same table (for example a
// branch's) into this dataset's own data files, byte for byte (no decode, no encode), and
// returns them as new fragments for StageInsertFragments. The fragments must have no
// deletions, and both versions the same schema field ids.
func (d *Dataset) CopyFragments(ctx context.Context, src *Dataset, ids []uint64) ([]Fragment, error) {
	if !slices.Equal(src.fieldIDs(), d.fieldIDs()) {
		return nil, fmt.Errorf("lance: copy fragments: the source schema differs")
	}
	byID := map[uint64]*Fragment{}
	for i := range src.manifest.Fragments {
		byID[src.manifest.Fragments[i].ID] = &src.manifest.Fragments[i]
	}
	var frags []Fragment
	for _, id := range ids {
		sf := byID[id]
		if sf == nil || sf.Deletion != nil {
			return nil, fmt.Errorf("lance: copy fragments: fragment %d is missing or has deletions", id)
		}
		if err := checkAddedFiles(d.dir.URI(), d.manifest, []Fragment{*sf}); err != nil {
			return nil, err
		}
		f := Fragment{PhysicalRows: sf.PhysicalRows}
		for _, df := range sf.Files {
			st, key, err := src.dataFileKey(&df)
			if err != nil {
				return nil, err
			}
			b, err := st.Get(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("lance: copy fragments: read %s: %w", key, err)
			}
			name := newDataFileName()
			if err := inject("lance.write_data_file"); err != nil {
				return nil, err
			}
			if err := d.dir.Put(ctx, "data/"+name, b); err != nil {
				return nil, fmt.Errorf("lance: write data file: %w", err)
			}
			nf := df
			nf.Path, nf.BaseID = name, nil
			nf.Fields, nf.ColumnIndices = slices.Clone(df.Fields), slices.Clone(df.ColumnIndices)
			f.Files = append(f.Files, nf)
		}
		frags = append(frags, f)
	}
	return frags, nil
}

// StageInsertFragments returns the insert-only Update (RewriteRows, every field preserved)
// that adds fragments whose files are already written (CopyFragments).
func (d *Dataset) StageInsertFragments(frags []Fragment, o StageOptions) *Staged {
	own := make([]Fragment, len(frags))
	for i := range frags {
		own[i] = frags[i].clone()
	}
	return d.newStaged(o, Operation{Kind: OpUpdate, Fragments: own, UpdateMode: UpdateRewriteRows, FieldsForPreservingFragBitmap: d.fieldIDs()}, nil)
}
