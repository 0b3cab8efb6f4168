package publisher

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// The exact lookups below read __manifest itself: the slow path behind the key filters, taken
// for a key the filter cannot rule out (a real old receipt or commit, or a false positive, one
// in about a thousand new keys) and for lineage walks past the commit cache. Each reads the
// object_id column of every fragment of the state's version once, then only the rows found.

var manifestColumns = []string{"object_id", "object_type", "location", "metadata", "table_key", "stable_table_id",
	"table_incarnation_id", "table_version", "table_branch", "row_count"}

var errStopScan = errors.New("publisher: scan stopped")

// lookupRow finds the address of an object id's live row, if there is one.
func lookupRow(ctx context.Context, ds *lance.Dataset, objectID string) (lance.RowAddress, bool, error) {
	if err := failpoint.Inject("publisher.lookup"); err != nil {
		return 0, false, err
	}
	var at lance.RowAddress
	found := false
	err := ds.Each(ctx, lance.ScanOptions{Columns: []string{"object_id"}, WithRowAddress: true}, func(rec arrow.Record) error {
		oid := rec.Column(0).(*array.String)
		addr := rec.Column(1).(*array.Uint64)
		for i := 0; i < oid.Len(); i++ {
			if oid.Value(i) == objectID {
				at, found = lance.RowAddress(addr.Value(i)), true
				return errStopScan // an object id has at most one live row
			}
		}
		return nil
	})
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return at, found, err
}

// readRows reads the whole rows at addrs.
func readRows(ctx context.Context, ds *lance.Dataset, addrs []lance.RowAddress) ([]Row, error) {
	if len(addrs) == 0 {
		return nil, nil
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	var out []Row
	err := ds.Each(ctx, lance.ScanOptions{Columns: manifestColumns, WithRowAddress: true, Rows: addrs}, func(rec arrow.Record) error {
		rows, _, err := recordRows(rec)
		out = append(out, rows...)
		return err
	})
	return out, err
}

// lookupObject reads the live row of an object id.
func lookupObject(ctx context.Context, ds *lance.Dataset, objectID string) (*Row, bool, error) {
	at, ok, err := lookupRow(ctx, ds, objectID)
	if err != nil || !ok {
		return nil, false, err
	}
	rows, err := readRows(ctx, ds, []lance.RowAddress{at})
	if err != nil {
		return nil, false, err
	}
	if len(rows) != 1 || rows[0].ObjectID != objectID {
		return nil, false, fmt.Errorf("publisher: __manifest row %s at %d read back as %d rows", objectID, at, len(rows))
	}
	return &rows[0], true, nil
}

// commitRef is a graph_commit row's id, version and address, as the first pass of a commit
// load reads them.
type commitRef struct {
	id      string
	version uint64
	addr    lance.RowAddress
}

type refHeap []commitRef // min-heap by version: the oldest of the kept is dropped first

func (h refHeap) Len() int           { return len(h) }
func (h refHeap) Less(i, j int) bool { return h[i].version < h[j].version }
func (h refHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refHeap) Push(x any)        { *h = append(*h, x.(commitRef)) }
func (h *refHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// loadCommits reads the commit want and, around it, up to n of the newest commits written at
// or below manifest version below (0: no bound): a lineage walk goes from newer to older
// commits, so one scan serves the steps after the miss too. It returns whether want exists.
func loadCommits(ctx context.Context, ds *lance.Dataset, want string, below uint64, n int) ([]Commit, bool, error) {
	if err := failpoint.Inject("publisher.lookup"); err != nil {
		return nil, false, err
	}
	var wantRef *commitRef
	kept := &refHeap{}
	cols := []string{"object_id", "object_type", "table_version"}
	err := ds.Each(ctx, lance.ScanOptions{Columns: cols, WithRowAddress: true}, func(rec arrow.Record) error {
		oid := rec.Column(0).(*array.String)
		typ := rec.Column(1).(*array.String)
		ver := rec.Column(2).(*array.Uint64)
		addr := rec.Column(3).(*array.Uint64)
		for i := 0; i < oid.Len(); i++ {
			if typ.Value(i) != TypeGraphCommit {
				continue
			}
			r := commitRef{id: oid.Value(i), addr: lance.RowAddress(addr.Value(i))}
			if ver.IsValid(i) {
				r.version = ver.Value(i)
			}
			if r.id == want {
				wantRef = &r
				continue
			}
			if below != 0 && r.version > below {
				continue
			}
			if kept.Len() < n {
				heap.Push(kept, r)
			} else if n > 0 && (*kept)[0].version < r.version {
				(*kept)[0] = r
				heap.Fix(kept, 0)
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	addrs := make([]lance.RowAddress, 0, kept.Len()+1)
	for _, r := range *kept {
		addrs = append(addrs, r.addr)
	}
	if wantRef != nil {
		addrs = append(addrs, wantRef.addr)
	}
	rows, err := readRows(ctx, ds, addrs)
	if err != nil {
		return nil, false, err
	}
	out := make([]Commit, 0, len(rows))
	for i := range rows {
		c, err := commitOf(&rows[i])
		if err != nil {
			return nil, false, fmt.Errorf("publisher: __manifest row %q: %w", rows[i].ObjectID, err)
		}
		out = append(out, c)
	}
	return out, wantRef != nil, nil
}

// allCommits reads every graph_commit row of ds.
func allCommits(ctx context.Context, ds *lance.Dataset) ([]Commit, error) {
	var out []Commit
	err := eachRowOf(ctx, ds, TypeGraphCommit, func(r *Row) error {
		c, err := commitOf(r)
		if err != nil {
			return fmt.Errorf("publisher: __manifest row %q: %w", r.ObjectID, err)
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// eachRowOf calls fn with every row of ds of objectType: its id, metadata, table version and
// table branch.
func eachRowOf(ctx context.Context, ds *lance.Dataset, objectType string, fn func(*Row) error) error {
	cols := []string{"object_id", "metadata", "table_version", "table_branch"}
	f := lance.In("object_type", objectType)
	return ds.Each(ctx, lance.ScanOptions{Columns: cols, Filter: &f}, func(rec arrow.Record) error {
		oid := rec.Column(0).(*array.String)
		meta := rec.Column(1).(*array.String)
		ver := rec.Column(2).(*array.Uint64)
		br := rec.Column(3).(*array.String)
		for i := 0; i < oid.Len(); i++ {
			r := Row{ObjectID: oid.Value(i), ObjectType: objectType}
			if meta.IsValid(i) {
				m := meta.Value(i)
				r.Metadata = &m
			}
			if ver.IsValid(i) {
				v := ver.Value(i)
				r.TableVersion = &v
			}
			if br.IsValid(i) {
				b := br.Value(i)
				r.TableBranch = &b
			}
			if err := fn(&r); err != nil {
				return err
			}
		}
		return nil
	})
}
