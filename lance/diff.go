package lance

import (
	"context"
	"fmt"
	"slices"
)

// VersionDiff is how one version of a table differs from an older version it descends from
// (the same branch later on, or a branch forked from it): which fragments are new, and which
// rows that were live in the older version are no longer live. Every live row of a new fragment
// was written since the older version; a fragment both versions share holds the same rows.
type VersionDiff struct {
	NewFragments []uint64     // fragment ids of the newer version the older one lacks
	Removed      []RowAddress // rows live in the older version and gone from the newer, as older addresses
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
// whose deletion vector changed: the cost follows the change, not the table.
func (d *Dataset) DiffFrom(ctx context.Context, older *Dataset) (*VersionDiff, error) {
	mine := map[uint64]*Fragment{}
	for i := range d.manifest.Fragments {
		mine[d.manifest.Fragments[i].ID] = &d.manifest.Fragments[i]
	}
	theirs := map[uint64]bool{}
	out := &VersionDiff{}
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
		for off := uint32(0); uint64(off) < of.PhysicalRows; off++ {
			_, deadBefore := slices.BinarySearch(was, off)
			if deadBefore {
				continue
			}
			if _, deadNow := slices.BinarySearch(now, off); deadNow || !kept {
				out.Removed = append(out.Removed, RowAddress(of.ID<<32|uint64(off)))
			}
		}
	}
	for i := range d.manifest.Fragments {
		if f := &d.manifest.Fragments[i]; !theirs[f.ID] {
			out.NewFragments = append(out.NewFragments, f.ID)
		}
	}
	return out, nil
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
