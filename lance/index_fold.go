package lance

import (
	"slices"

	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// What the folds of every index kind share (btree_fold.go, inverted_fold.go).

// lagOf is what index old on column lacks in this version: the column's field, the ids of the
// fragments old does not cover, and the live rows of those it does. uncovered is empty when
// old is not an index of exactly that column.
func (d *Dataset) lagOf(old *Index, column string) (f *schema.Field, uncovered []uint64, coveredRows uint64) {
	f = d.Schema().Field(column)
	if f == nil || len(old.Fields) != 1 || old.Fields[0] != f.ID {
		return nil, nil, 0
	}
	for i := range d.manifest.Fragments {
		fr := &d.manifest.Fragments[i]
		if old.Covers(fr.ID) {
			coveredRows += fr.NumRows()
		} else {
			uncovered = append(uncovered, fr.ID)
		}
	}
	return f, uncovered, coveredRows
}

// successorMeta is the metadata of the index a fold of old makes: a new uuid, old's name and
// field, details and index_version version, covering every fragment of this version and old's
// fragments that are gone since (as Lance's optimize_indices keeps them).
func (d *Dataset) successorMeta(old *Index, details *IndexDetails, version int32) (Index, error) {
	x, err := d.newIndexMeta(old.Fields[0], old.Name, details, version)
	if err != nil {
		return Index{}, err
	}
	x.Fragments = append(x.Fragments, old.Fragments...)
	slices.Sort(x.Fragments)
	x.Fragments = slices.Compact(x.Fragments)
	return x, nil
}
