package lance

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A dataset that grows by one small fragment per commit (OmniGraph's __manifest) keeps a
// bounded fragment count, and so a bounded manifest, by merging its newest fragments: they
// are grouped into size tiers (powers of fanout live rows), and once the newest tier holds
// fanout fragments their live rows are rewritten as one fragment by an Update that removes
// them. Row ids of the moved rows are not preserved (they are new rows as far as Lance is
// concerned).

// tierOf is the size tier of a fragment of n live rows.
func tierOf(n uint64, fanout int) int {
	t := 0
	for n >= uint64(fanout) {
		n /= uint64(fanout)
		t++
	}
	return t
}

// tierStart is where the newest run of fragments of tier t begins in frags (len(frags) when
// the newest is of another tier).
func tierStart(frags []Fragment, fanout, t int) int {
	start := len(frags)
	for start > 0 && tierOf(frags[start-1].NumRows(), fanout) == t {
		start--
	}
	return start
}

// idsOf is the ids of frags, in order.
func idsOf(frags []Fragment) []uint64 {
	ids := make([]uint64, len(frags))
	for i := range frags {
		ids[i] = frags[i].ID
	}
	return ids
}

// tailRun is the ids of the newest fragments of frags whose tier is that of a fragment of
// last live rows, when with one such fragment more they are at least fanout; nil otherwise.
func tailRun(frags []Fragment, fanout int, last uint64) []uint64 {
	start := tierStart(frags, fanout, tierOf(last, fanout))
	if len(frags)-start+1 < fanout {
		return nil
	}
	return idsOf(frags[start:])
}

// CompactTail stages the merge of the newest tier when it holds fanout fragments; nil when
// nothing needs merging. merged is what the merge read, the rows of the new fragments in their
// order, for a caller that keeps row addresses; the caller releases it.
func (d *Dataset) CompactTail(ctx context.Context, fanout int, o StageOptions) (s *Staged, merged []arrow.Record, err error) {
	frags := d.manifest.Fragments
	if len(frags) < fanout {
		return nil, nil, nil
	}
	ids := tailRun(frags[:len(frags)-1], fanout, frags[len(frags)-1].NumRows())
	if ids == nil {
		return nil, nil, nil
	}
	ids = append(ids, frags[len(frags)-1].ID)
	recs, err := d.ReadAll(ctx, ScanOptions{Fragments: ids})
	if err != nil {
		return nil, nil, err
	}
	w := &fileWrites{}
	written, err := d.writeFragments(d.Schema(), recs, o.FileOptions, w)
	if err != nil {
		releaseAll(recs)
		return nil, nil, err
	}
	return d.newStaged(o, Operation{Kind: OpUpdate, RemovedFragmentIDs: ids, Fragments: written, UpdateMode: UpdateRewriteRows}, w), recs, nil
}

// TailRun is the newest fragments a commit appending one fragment of rows new rows would
// complete into a tier of fanout (CompactTail's merge right after it): the fragments
// StageRewriteRowsMerging can merge in the same commit. nil when that commit completes none.
func (d *Dataset) TailRun(fanout int, rows uint64) []uint64 {
	return tailRun(d.manifest.Fragments, fanout, rows)
}

// SmallTailHolding is the shortest run of the newest fragments, all of the smallest tier (fewer
// than fanout live rows), that holds every row of remove; nil when remove is empty or one of
// its rows lies elsewhere. A commit that replaces those rows can rewrite the run's few live
// rows with its own (StageRewriteRowsMerging) instead of writing a deletion file per fragment:
// one object fewer per commit where every commit replaces rows the last ones wrote (a graph
// head, the versions of the tables it writes).
func (d *Dataset) SmallTailHolding(remove []RowAddress, fanout int) []uint64 {
	if len(remove) == 0 {
		return nil
	}
	frags := d.manifest.Fragments
	start := tierStart(frags, fanout, 0)
	at := make(map[uint64]int, len(frags)-start)
	for i := start; i < len(frags); i++ {
		at[frags[i].ID] = i
	}
	first := len(frags)
	for _, a := range remove {
		i, ok := at[a.Fragment()]
		if !ok {
			return nil
		}
		first = min(first, i)
	}
	return idsOf(frags[first:])
}

// StageRewriteRowsMerging is StageRewriteRows that writes its new rows into one fragment after
// the live rows of the fragments merge (the newest ones, as TailRun names them), which the
// Update removes: the commit and the tail merge CompactTail would make after it, in one. The
// rows of merge that remove names are left out, as StageRewriteRows would delete them. tail is
// what the new fragment holds before the new rows, in order (the caller releases it), for a
// caller that keeps row addresses.
func (d *Dataset) StageRewriteRowsMerging(ctx context.Context, remove []RowAddress, recs []arrow.Record, merge []uint64, o StageOptions) (s *Staged, tail []arrow.Record, err error) {
	merging := make(map[uint64]*Fragment, len(merge))
	for _, id := range merge {
		merging[id] = nil
	}
	for i := range d.manifest.Fragments {
		fr := &d.manifest.Fragments[i]
		if _, ok := merging[fr.ID]; ok {
			merging[fr.ID] = fr
		}
	}
	dropped := map[RowAddress]bool{}
	var outside []RowAddress
	for _, a := range remove {
		fr, ok := merging[a.Fragment()]
		switch {
		case !ok:
			outside = append(outside, a)
		case fr == nil:
			return nil, nil, fmt.Errorf("lance: merge fragment %d, which version %d does not have", a.Fragment(), d.Version())
		case uint64(a.Offset()) >= fr.PhysicalRows:
			return nil, nil, fmt.Errorf("lance: row address %d:%d is past fragment %d's %d rows", fr.ID, a.Offset(), fr.ID, fr.PhysicalRows)
		default:
			dropped[a] = true
		}
	}
	for id, fr := range merging {
		if fr == nil {
			return nil, nil, fmt.Errorf("lance: merge fragment %d, which version %d does not have", id, d.Version())
		}
	}
	w := &fileWrites{}
	updated, removed, err := d.deleteAddresses(ctx, outside, w)
	if err != nil {
		return nil, nil, err
	}
	read, err := d.ReadAll(ctx, ScanOptions{Fragments: merge, WithRowAddress: true})
	if err != nil {
		return nil, nil, err
	}
	defer releaseAll(read)
	as, err := d.Schema().ToArrow()
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			releaseAll(tail)
			tail = nil
		}
	}()
	for _, rec := range read {
		addrs := rec.Column(int(rec.NumCols()) - 1).(*array.Uint64)
		keep := make([]bool, rec.NumRows())
		all := true
		for i := range keep {
			keep[i] = !dropped[RowAddress(addrs.Value(i))]
			all = all && keep[i]
		}
		kept := rec
		if !all {
			if kept, err = filterRecord(rec, keep, memory.DefaultAllocator); err != nil {
				return nil, nil, err
			}
		}
		cols := kept.Columns()
		tail = append(tail, array.NewRecord(as, cols[:len(cols)-1], kept.NumRows()))
		if kept != rec {
			kept.Release()
		}
	}
	frags, err := d.writeFragments(d.Schema(), append(append([]arrow.Record(nil), tail...), recs...), o.FileOptions, w)
	if err != nil {
		return nil, nil, err
	}
	return d.newStaged(o, d.rewriteRowsOp(updated, append(removed, merge...), frags), w), tail, nil
}
