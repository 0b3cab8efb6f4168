package lance

import (
	"context"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// IndexKind is a kind of index this package builds.
type IndexKind int

const (
	// IndexBTree is a BTREE scalar index (btree.go).
	IndexBTree IndexKind = iota
	// IndexInverted is an INVERTED full-text index with Lance's default analyzer (inverted.go).
	IndexInverted
	// IndexIVFFlat is an IVF_FLAT vector index: one partition, L2 (ivfflat.go).
	IndexIVFFlat
)

func (k IndexKind) String() string {
	switch k {
	case IndexBTree:
		return "BTREE"
	case IndexInverted:
		return "INVERTED"
	case IndexIVFFlat:
		return "IVF_FLAT"
	}
	return fmt.Sprintf("IndexKind(%d)", int(k))
}

// IndexSpec is one index to build: its kind on one top-level column, under the default name
// "<column>_idx".
type IndexSpec struct {
	Column string
	Kind   IndexKind
}

func (s IndexSpec) String() string { return s.Kind.String() + "(" + s.Column + ")" }

// Find is this version's index of the spec's kind on exactly its column, or nil. For a vector
// spec any vector index on the column counts (one built as IVF_PQ by another writer serves
// the same queries).
func (d *Dataset) Find(s IndexSpec) *Index {
	switch s.Kind {
	case IndexBTree:
		return d.BTree(s.Column)
	case IndexInverted:
		return d.Inverted(s.Column)
	case IndexIVFFlat:
		return d.VectorIndex(s.Column)
	}
	return nil
}

// StageIndices builds every spec over every live row of this version and returns one
// CreateIndex transaction listing them all (each replacing an index of its name), as the
// reference OmniGraph batches the indices a table lacks into one commit. A BTREE or
// INVERTED index the column already has is folded (foldBTree, foldInverted): brought up to
// date with the rows it does not cover, under its name. A spec that cannot
// be built (a column of the wrong type, no token or no usable vector to index) fails the
// whole staging with an *IndexError naming that index; nothing is written before Commit.
func (d *Dataset) StageIndices(ctx context.Context, specs []IndexSpec, o StageOptions) (*Staged, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("lance: an index build names no index")
	}
	fo, err := d.fileOptions(o.FileOptions)
	if err != nil {
		return nil, err
	}
	// Each index is staged into files of its own, gathered in the order of specs, so the
	// transaction is the same however the builds interleave.
	xs := make([]Index, len(specs))
	ws := make([]fileWrites, len(specs))
	at := parallel.Indices(len(specs))
	reads := d.newFoldReads(specs)
	err = parallel.EachSlot(ctx, at, o.Slots, func(i int) error {
		var err error
		switch s := specs[i]; s.Kind {
		case IndexBTree:
			xs[i], err = d.stageBTree(ctx, reads, s.Column, fo, &ws[i])
		case IndexInverted:
			xs[i], err = d.stageInverted(ctx, reads, s.Column, fo, &ws[i])
		case IndexIVFFlat:
			xs[i], err = d.buildIVFFlat(ctx, s.Column, "", fo, &ws[i])
		default:
			err = fmt.Errorf("lance: unknown index kind %v", s.Kind)
		}
		return err
	})
	reads.release()
	if err != nil {
		return nil, err
	}
	w := &fileWrites{}
	for i := range ws {
		w.files = append(w.files, ws[i].files...)
	}
	return d.newStaged(o, Operation{Kind: OpCreateIndex, NewIndices: xs}, w), nil
}

// stageBTree encodes the BTREE on column into w: the existing one folded when it can be
// (foldBTree), else one built over every row, under the existing one's name or the default.
// An existing index whose files are missing or unreadable is built anew, which repairs it.
func (d *Dataset) stageBTree(ctx context.Context, reads *foldReads, column string, fo file.Options, w *fileWrites) (Index, error) {
	return d.stageFolded(ctx, reads, d.BTree(column), column, fo, w, d.foldBTree, d.buildBTree)
}

// stageInverted is stageBTree for an INVERTED index (foldInverted).
func (d *Dataset) stageInverted(ctx context.Context, reads *foldReads, column string, fo file.Options, w *fileWrites) (Index, error) {
	return d.stageFolded(ctx, reads, d.Inverted(column), column, fo, w, d.foldInverted, d.buildInverted)
}

// stageFolded folds old (fold, reading the new rows through reads) into w, or builds the index
// anew (build) when there is none or the fold cannot be done.
func (d *Dataset) stageFolded(ctx context.Context, reads *foldReads, old *Index, column string, fo file.Options, w *fileWrites,
	fold func(context.Context, *foldReads, *Index, string, file.Options, *fileWrites) (Index, bool, error),
	build func(ctx context.Context, column, name string, fo file.Options, w *fileWrites) (Index, error)) (Index, error) {
	if old == nil {
		return build(ctx, column, "", fo, w)
	}
	// The fold's files go to w only when it succeeds: one that gives up midway leaves none
	// for the commit to write.
	folded := &fileWrites{}
	x, ok, err := fold(ctx, reads, old, column, fo, folded)
	if err != nil && rebuildInstead(err) {
		ok, err = false, nil
	}
	if ok {
		w.files = append(w.files, folded.files...)
	}
	if err != nil || ok {
		return x, err
	}
	// Replaced, as a fold's predecessor is: out of the caches before its successor enters
	// them, so that the two never crowd other indices' entries out of the budget together.
	forgetCached(old.UUID)
	return build(ctx, column, old.Name, fo, w)
}
