package lance

import (
	"context"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// foldReads shares the read-back of the rows the folds of one StageIndices call index. The
// indices of a table are folded together, so they lack the same fragments: reading their
// columns in one scan opens each data file and reads its deletions once, where a scan per
// index did so once per index (three times for an edge table's id, src and dst).
type foldReads struct {
	shared []*foldRead
}

// foldRead is one scan of several columns of the same fragments, made by the first fold that
// asks for one of them.
type foldRead struct {
	fragments []uint64
	columns   []string
	once      sync.Once
	recs      []arrow.Record // the columns, then _rowid
	err       error
}

// newFoldReads plans the shared scans of the folds of specs: every set of at least two specs
// whose columns' indices lack the same fragments gets one.
func (d *Dataset) newFoldReads(specs []IndexSpec) *foldReads {
	r := &foldReads{}
	for _, s := range specs {
		if s.Kind == IndexIVFFlat {
			continue // built anew from every row, never folded
		}
		old := d.Find(s)
		if old == nil {
			continue
		}
		_, uncovered, _ := d.lagOf(old, s.Column)
		if len(uncovered) == 0 {
			continue
		}
		if fr := r.find(uncovered); fr != nil {
			if !slices.Contains(fr.columns, s.Column) {
				fr.columns = append(fr.columns, s.Column)
			}
			continue
		}
		r.shared = append(r.shared, &foldRead{fragments: uncovered, columns: []string{s.Column}})
	}
	r.shared = slices.DeleteFunc(r.shared, func(fr *foldRead) bool { return len(fr.columns) < 2 })
	return r
}

func (r *foldReads) find(fragments []uint64) *foldRead {
	for _, fr := range r.shared {
		if slices.Equal(fr.fragments, fragments) {
			return fr
		}
	}
	return nil
}

// readIndexed is ReadAll of column and _rowid over fragments (nil: every fragment): from a
// scan shared reads plans when one holds them (shared may be nil), else a scan of its own. The
// caller releases the records.
func (d *Dataset) readIndexed(ctx context.Context, shared *foldReads, column string, fragments []uint64) ([]arrow.Record, error) {
	var fr *foldRead
	if shared != nil && fragments != nil {
		if fr = shared.find(fragments); fr != nil && !slices.Contains(fr.columns, column) {
			fr = nil
		}
	}
	if fr == nil {
		return d.ReadAll(ctx, ScanOptions{Columns: []string{column}, WithRowID: true, Fragments: fragments})
	}
	fr.once.Do(func() {
		fr.recs, fr.err = d.ReadAll(ctx, ScanOptions{Columns: fr.columns, WithRowID: true, Fragments: fr.fragments})
	})
	if fr.err != nil {
		return nil, fr.err
	}
	col := slices.Index(fr.columns, column)
	out := make([]arrow.Record, len(fr.recs))
	for i, rec := range fr.recs {
		sc := arrow.NewSchema([]arrow.Field{rec.Schema().Field(col), rec.Schema().Field(len(fr.columns))}, nil)
		out[i] = array.NewRecord(sc, []arrow.Array{rec.Column(col), rec.Column(len(fr.columns))}, rec.NumRows())
	}
	return out, nil
}

// release drops the shared scans' records, once every fold is done with them.
func (r *foldReads) release() {
	for _, fr := range r.shared {
		releaseAll(fr.recs)
		fr.recs = nil
	}
}
