package lance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowInfo is what a test knows of one live row: its key (the id column), address, stable row
// id and versions, and its position in scan order.
type rowInfo struct {
	key              int64
	name             string
	addr             RowAddress
	rowID            uint64
	created, updated uint64
}

// liveRows lists the live rows of d in scan order with their row ids and versions, taken from
// the fragments' sequences (decoded independently of the compaction code: every sequence is
// expanded and indexed by offset).
func liveRows(t *testing.T, d *Dataset) []rowInfo {
	t.Helper()
	meta := map[uint64][3][]uint64{}
	for i := range d.Manifest().Fragments {
		f := &d.Manifest().Fragments[i]
		ids, err := decodeRowIDSequence(f.RowIDs, f.PhysicalRows)
		if err != nil || uint64(len(ids)) != f.PhysicalRows {
			t.Fatalf("fragment %d row ids: %d for %d rows, %v", f.ID, len(ids), f.PhysicalRows, err)
		}
		created, err := decodeVersionSequence(f.CreatedAt, f.PhysicalRows)
		if err != nil || uint64(len(created)) != f.PhysicalRows {
			t.Fatalf("fragment %d created: %v", f.ID, err)
		}
		updated, err := decodeVersionSequence(f.LastUpdatedAt, f.PhysicalRows)
		if err != nil || uint64(len(updated)) != f.PhysicalRows {
			t.Fatalf("fragment %d updated: %v", f.ID, err)
		}
		meta[f.ID] = [3][]uint64{ids, created, updated}
	}
	var out []rowInfo
	err := d.Each(context.Background(), ScanOptions{WithRowAddress: true}, func(r arrow.Record) error {
		keys, names := r.Column(0).(*array.Int64), r.Column(1).(*array.String)
		addrs := r.Column(2).(*array.Uint64)
		for i := 0; i < int(r.NumRows()); i++ {
			a := RowAddress(addrs.Value(i))
			m := meta[a.Fragment()]
			name := ""
			if names.IsValid(i) {
				name = names.Value(i)
			}
			out = append(out, rowInfo{key: keys.Value(i), name: name, addr: a, rowID: m[0][a.Offset()], created: m[1][a.Offset()], updated: m[2][a.Offset()]})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(out)) != d.CountRows() {
		t.Fatalf("scan found %d rows, metadata says %d", len(out), d.CountRows())
	}
	return out
}

// checkScanMeta checks that a scan's _rowaddr, _rowid and version columns agree with rs.
func checkScanMeta(t *testing.T, d *Dataset, rs []rowInfo) {
	t.Helper()
	i := 0
	err := d.Each(context.Background(), ScanOptions{Columns: []string{"id"}, WithRowAddress: true, WithRowID: true, WithRowVersions: true, BatchRows: 7},
		func(r arrow.Record) error {
			names := []string{"id", RowAddressColumn, RowIDColumn, RowCreatedAtColumn, RowLastUpdatedAtColumn}
			for c, n := range names {
				if r.Schema().Field(c).Name != n {
					t.Fatalf("column %d is %s, want %s", c, r.Schema().Field(c).Name, n)
				}
			}
			col := func(c int) *array.Uint64 { return r.Column(c).(*array.Uint64) }
			for k := 0; k < int(r.NumRows()); k, i = k+1, i+1 {
				got := rowInfo{key: r.Column(0).(*array.Int64).Value(k), addr: RowAddress(col(1).Value(k)), rowID: col(2).Value(k),
					created: col(3).Value(k), updated: col(4).Value(k)}
				want := rs[i]
				want.name = ""
				if got != want {
					t.Fatalf("scanned row %d: %+v, want %+v", i, got, want)
				}
			}
			return nil
		})
	if err != nil || i != len(rs) {
		t.Fatalf("scanned %d rows of %d: %v", i, len(rs), err)
	}
}

// sameRows compares two row lists in order, addresses aside.
func sameRows(t *testing.T, what string, got, want []rowInfo) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		g.addr, w.addr = 0, 0
		if g != w {
			t.Fatalf("%s: row %d is %+v, want %+v", what, i, g, w)
		}
	}
}

// upsertKeepingIDs stages what lance's Update does: the rows at the given addresses are
// rewritten into a new fragment that keeps their stable row ids and created-at versions, with
// last-updated-at the version being committed.
func upsertKeepingIDs(t *testing.T, d *Dataset, rs []rowInfo) *Staged {
	t.Helper()
	var addrs []RowAddress
	var keys []int64
	var ids, created, updated []uint64
	for _, r := range rs {
		addrs = append(addrs, r.addr)
		keys = append(keys, r.key)
		ids = append(ids, r.rowID)
		created = append(created, r.created)
		updated = append(updated, d.Version()+1)
	}
	s, err := d.StageRewriteRows(context.Background(), addrs, rows(keys...), StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &s.Txn.Op.Fragments[0]
	f.RowIDs, f.CreatedAt, f.LastUpdatedAt = encodeRowIDSequence(ids), encodeVersionRuns(created), encodeVersionRuns(updated)
	return s
}

// buildSmallAppends grows a stable-row-id table one small fragment per commit, with deletes,
// upserts (new row ids), lance-style updates (kept row ids) and row rewrites in between.
func buildSmallAppends(t *testing.T, d *Dataset, rng *rand.Rand, steps int, next *int64) *Dataset {
	t.Helper()
	ctx := context.Background()
	for step := 0; step < steps; step++ {
		n := int64(1 + rng.IntN(3))
		s, err := d.StageAppend(ctx, rows(seq(*next, *next+n)...), StageOptions{})
		d = commit(t, d, s, err)
		*next += n
		live := liveRows(t, d)
		switch step % 6 {
		case 1:
			s, err = d.StageDelete(ctx, In("id", live[rng.IntN(len(live))].key, live[rng.IntN(len(live))].key), StageOptions{})
			d = commit(t, d, s, err)
		case 2:
			s, err = d.StageUpsert(ctx, "id", rows(live[rng.IntN(len(live))].key), StageOptions{})
			d = commit(t, d, s, err)
		case 3:
			d = commit(t, d, upsertKeepingIDs(t, d, []rowInfo{live[rng.IntN(len(live))]}), nil)
		case 4:
			s, err = d.StageRewriteRows(ctx, []RowAddress{live[rng.IntN(len(live))].addr}, nil, StageOptions{})
			d = commit(t, d, s, err)
		}
	}
	return d
}

func addresses(rs []rowInfo) map[int64]RowAddress {
	out := map[int64]RowAddress{}
	for _, r := range rs {
		out[r.key] = r.addr
	}
	return out
}

func TestStageCompactionPreservesRows(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 4)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(4)
	d = buildSmallAppends(t, d, rand.New(rand.NewPCG(1, 2)), 60, &next)
	before := liveRows(t, d)
	oldM := d.Manifest()
	hadDeletions := false
	for _, f := range oldM.Fragments {
		hadDeletions = hadDeletions || f.Deletion != nil
	}
	if !hadDeletions || len(oldM.Fragments) < 40 {
		t.Fatalf("test table too simple: %d fragments, deletions %v", len(oldM.Fragments), hadDeletions)
	}

	s, c, err := d.StageCompaction(ctx, CompactionOptions{TargetRowsPerFragment: 16}, StageOptions{})
	if err != nil || s == nil {
		t.Fatalf("stage: %v %v", s, err)
	}
	if c.FragmentsRemoved() < 30 || c.FragmentsAdded() >= c.FragmentsRemoved() || c.RowsRewritten() == 0 {
		t.Fatalf("compaction removes %d, adds %d, moves %d rows", c.FragmentsRemoved(), c.FragmentsAdded(), c.RowsRewritten())
	}
	nd, err := d.Commit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	after := liveRows(t, nd)
	sameRows(t, "after compaction", after, before)
	checkScanMeta(t, nd, after)
	checkScanMeta(t, d, before)
	m := nd.Manifest()
	if got, want := len(m.Fragments), len(oldM.Fragments)-c.FragmentsRemoved()+c.FragmentsAdded(); got != want || got >= len(oldM.Fragments) {
		t.Fatalf("%d fragments after, %d before, want %d", got, len(oldM.Fragments), want)
	}
	if m.NextRowID != oldM.NextRowID {
		t.Fatalf("next_row_id %d, was %d", m.NextRowID, oldM.NextRowID)
	}
	if *m.MaxFragmentID != *oldM.MaxFragmentID+uint32(c.FragmentsAdded()) {
		t.Fatalf("max_fragment_id %d, was %d, %d added", *m.MaxFragmentID, *oldM.MaxFragmentID, c.FragmentsAdded())
	}
	oldIDs := map[uint64]bool{}
	for _, f := range oldM.Fragments {
		oldIDs[f.ID] = true
	}
	var rewritten uint64
	for _, f := range m.Fragments {
		if !oldIDs[f.ID] {
			if f.Deletion != nil || f.PhysicalRows > 16 {
				t.Fatalf("new fragment %d: %d rows, deletion %v", f.ID, f.PhysicalRows, f.Deletion)
			}
			rewritten += f.PhysicalRows
		}
	}
	if rewritten != c.RowsRewritten() {
		t.Fatalf("new fragments hold %d rows, compaction says %d", rewritten, c.RowsRewritten())
	}
	if m.ReaderFlags&FlagStableRowIDs == 0 {
		t.Fatal("stable row id flag lost")
	}

	// The transaction reads back as a Rewrite of the same groups.
	tx, err := nd.ReadTransaction(ctx, nd.Version())
	if err != nil || tx.Op.Kind != OpRewrite {
		t.Fatalf("transaction %+v, %v", tx, err)
	}
	var olds, news int
	for _, g := range tx.Op.Groups {
		olds += len(g.OldFragments)
		news += len(g.NewFragments)
		for _, f := range g.NewFragments {
			if f.ID != 0 || f.RowIDs == nil || f.CreatedAt == nil || f.LastUpdatedAt == nil {
				t.Fatalf("transaction's new fragment %+v", f)
			}
		}
	}
	if olds != c.FragmentsRemoved() || news != c.FragmentsAdded() {
		t.Fatalf("transaction groups: %d old, %d new", olds, news)
	}

	// A fresh handle reads the same.
	reopened, err := Open(ctx, st)
	if err != nil || reopened.Version() != nd.Version() {
		t.Fatalf("reopen: %v", err)
	}
	sameRows(t, "reopened", liveRows(t, reopened), before)

	// Remap sends every live old address to where its row now is.
	remap, err := c.Remap(nd)
	if err != nil {
		t.Fatal(err)
	}
	now := addresses(after)
	moved := 0
	lo, hi := c.Span()
	for _, r := range before {
		got, ok := remap(r.addr)
		inGroup := !slices.ContainsFunc(m.Fragments, func(f Fragment) bool { return f.ID == r.addr.Fragment() })
		if f := r.addr.Fragment(); ok && (f < lo || f > hi) {
			t.Fatalf("key %d: moved from fragment %d, outside the compaction's span %d-%d", r.key, f, lo, hi)
		}
		switch {
		case ok != inGroup:
			t.Fatalf("key %d at %d:%d: moved=%v, its fragment rewritten %v", r.key, r.addr.Fragment(), r.addr.Offset(), ok, inGroup)
		case ok && got != now[r.key]:
			t.Fatalf("key %d: remapped to %d:%d, lives at %d:%d", r.key, got.Fragment(), got.Offset(), now[r.key].Fragment(), now[r.key].Offset())
		case !ok && got != r.addr:
			t.Fatalf("key %d: unmoved address changed", r.key)
		}
		if ok {
			moved++
		}
	}
	if uint64(moved) != c.RowsRewritten() {
		t.Fatalf("%d rows moved, compaction says %d", moved, c.RowsRewritten())
	}
	// A deleted row of a rewritten fragment has no new address.
	for _, f := range oldM.Fragments {
		if f.Deletion == nil || slices.ContainsFunc(m.Fragments, func(g Fragment) bool { return g.ID == f.ID }) {
			continue
		}
		offs, err := d.deletedOffsets(ctx, &f)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := remap(RowAddress(f.ID<<32 | uint64(offs[0]))); ok {
			t.Fatal("a deleted row was remapped")
		}
		break
	}
	if _, err := c.Remap(d); err == nil {
		t.Fatal("remap against the read version accepted")
	}

	// Nothing changed logically.
	diff, err := nd.DiffFrom(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.NewFragments)+len(diff.NewRows)+len(diff.Removed) != 0 {
		t.Fatalf("diff across a compaction: %+v", diff)
	}

	// Appends continue with fresh ids after the compaction.
	s2, err := nd.StageAppend(ctx, rows(9000), StageOptions{})
	nd = commit(t, nd, s2, err)
	last := nd.Manifest().Fragments[len(nd.Manifest().Fragments)-1]
	if last.ID != uint64(*m.MaxFragmentID)+1 {
		t.Fatalf("appended fragment id %d after max %d", last.ID, *m.MaxFragmentID)
	}
	all := liveRows(t, nd)
	if r := all[len(all)-1]; r.key != 9000 || r.rowID != oldM.NextRowID || r.created != nd.Version() {
		t.Fatalf("appended row %+v", r)
	}
}

func TestStageCompactionDefaultTargetAndNothingToDo(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 3)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// One fragment: nothing to compact.
	if s, c, err := d.StageCompaction(ctx, CompactionOptions{}, StageOptions{}); s != nil || c != nil || err != nil {
		t.Fatalf("one fragment: %v %v %v", s, c, err)
	}
	next := int64(3)
	d = buildSmallAppends(t, d, rand.New(rand.NewPCG(3, 4)), 30, &next)
	before := liveRows(t, d)
	// Fragments at or above the target, without deletions over the threshold: nothing to do.
	if s, c, err := d.StageCompaction(ctx, CompactionOptions{TargetRowsPerFragment: 1, MaterializeDeletionsThreshold: -1}, StageOptions{}); s != nil || c != nil || err != nil {
		t.Fatalf("target 1: %v %v %v", s, c, err)
	}
	s, c, err := d.StageCompaction(ctx, CompactionOptions{}, StageOptions{})
	if err != nil || s == nil {
		t.Fatal(err)
	}
	d = commit(t, d, s, nil)
	if len(d.Manifest().Fragments) != 1 || c.FragmentsAdded() != 1 || c.FragmentsRemoved() != len(s.Txn.Op.Groups[0].OldFragments) {
		t.Fatalf("default target: %d fragments", len(d.Manifest().Fragments))
	}
	if d.NumFragments() != 1 || d.Manifest().ReaderFlags&FlagDeletionFiles != 0 {
		t.Fatalf("NumFragments %d, flags %d", d.NumFragments(), d.Manifest().ReaderFlags)
	}
	sameRows(t, "one fragment", liveRows(t, d), before)
	if s, c, err := d.StageCompaction(ctx, CompactionOptions{}, StageOptions{}); s != nil || c != nil || err != nil {
		t.Fatalf("compacted table: %v %v %v", s, c, err)
	}
	// A lone fragment with too many deletions is rewritten on its own; below the threshold not.
	keys := []any{}
	for _, r := range before[:len(before)/20+1] {
		keys = append(keys, r.key)
	}
	s, err = d.StageDelete(ctx, In("id", keys...), StageOptions{})
	d = commit(t, d, s, err)
	if s, _, err := d.StageCompaction(ctx, CompactionOptions{MaterializeDeletionsThreshold: 0.5}, StageOptions{}); s != nil || err != nil {
		t.Fatalf("below the threshold: %v %v", s, err)
	}
	s, c, err = d.StageCompaction(ctx, CompactionOptions{MaterializeDeletionsThreshold: 0.01}, StageOptions{})
	if err != nil || s == nil || c.FragmentsRemoved() != 1 || c.FragmentsAdded() != 1 {
		t.Fatalf("over the threshold: %v %v", s, err)
	}
	d = commit(t, d, s, nil)
	if d.Manifest().Fragments[0].Deletion != nil || d.Manifest().ReaderFlags&FlagDeletionFiles != 0 {
		t.Fatal("deletions not materialized")
	}
	sameRows(t, "materialized", liveRows(t, d), before[len(keys):])
}

// CompactionOptions.Fragments rewrites exactly the chosen run of fragments as one group.
func TestStageCompactionChosenFragments(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 3)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(3)
	d = buildSmallAppends(t, d, rand.New(rand.NewPCG(5, 6)), 12, &next)
	before := liveRows(t, d)
	frags := d.Manifest().Fragments
	var run []uint64
	for _, f := range frags[len(frags)-5:] {
		run = append(run, f.ID)
	}
	for _, bad := range [][]uint64{{frags[0].ID, frags[2].ID}, {run[1], run[0]}, {12345}} {
		if _, _, err := d.StageCompaction(ctx, CompactionOptions{Fragments: bad}, StageOptions{}); err == nil {
			t.Fatalf("fragments %v accepted", bad)
		}
	}
	var clean uint64 = 1 << 62
	for _, f := range frags {
		if f.Deletion == nil {
			clean = f.ID
		}
	}
	if s, c, err := d.StageCompaction(ctx, CompactionOptions{Fragments: []uint64{clean}}, StageOptions{}); s != nil || c != nil || err != nil {
		t.Fatalf("one fragment without deletions: %v %v %v", s, c, err)
	}
	// Large fragments (above the target) and none deleted: the planner would skip them.
	s, c, err := d.StageCompaction(ctx, CompactionOptions{Fragments: run, TargetRowsPerFragment: 1}, StageOptions{})
	if err != nil || s == nil || len(s.Txn.Op.Groups) != 1 || c.FragmentsRemoved() != 5 {
		t.Fatalf("chosen run: %v %v", s, err)
	}
	d = commit(t, d, s, nil)
	sameRows(t, "chosen run", liveRows(t, d), before)
	if d.NumFragments() != len(frags)-5+c.FragmentsAdded() || uint64(c.FragmentsAdded()) != c.RowsRewritten() {
		t.Fatalf("%d fragments, %d added for %d rows", d.NumFragments(), c.FragmentsAdded(), c.RowsRewritten())
	}
}

func TestStageCompactionNeedsStableRowIDs(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(1, 2), CreateOptions{DisableStableRowIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(3), StageOptions{})
	d = commit(t, d, s, err)
	if _, _, err := d.StageCompaction(ctx, CompactionOptions{}, StageOptions{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("non-stable dataset: %v", err)
	}
	// Without stable row ids a scan's _rowid is the row address, and every version reads 1.
	recs, err := d.ReadAll(ctx, ScanOptions{Columns: []string{"id"}, WithRowID: true, WithRowVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		for k := 0; k < int(r.NumRows()); k++ {
			got = append(got, fmt.Sprintf("%d/%d%d", r.Column(1).(*array.Uint64).Value(k), r.Column(2).(*array.Uint64).Value(k), r.Column(3).(*array.Uint64).Value(k)))
		}
		r.Release()
	}
	if fmt.Sprint(got) != fmt.Sprint([]string{"0/11", "1/11", fmt.Sprintf("%d/11", uint64(1)<<32)}) {
		t.Fatalf("non-stable meta columns %v", got)
	}
}

// keySet maps rows of a version at the given addresses to their keys.
func keysAt(t *testing.T, d *Dataset, addrs []RowAddress, frags []uint64) []int64 {
	t.Helper()
	want := map[RowAddress]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	whole := map[uint64]bool{}
	for _, f := range frags {
		whole[f] = true
	}
	var out []int64
	for _, r := range liveRows(t, d) {
		if want[r.addr] || whole[r.addr.Fragment()] {
			out = append(out, r.key)
			delete(want, r.addr)
		}
	}
	if len(want) != 0 {
		t.Fatalf("%d diff addresses are not live rows of version %d", len(want), d.Version())
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestDiffFromAcrossCompaction checks DiffFrom against a model of the logical changes (keys
// appended, deleted, updated) made around one or more compactions.
func TestDiffFromAcrossCompaction(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(0); seed < 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 5)...), CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			next := int64(5)
			d = buildSmallAppends(t, d, rng, 20+rng.IntN(20), &next)
			older := d
			removed, added := map[int64]bool{}, map[int64]bool{}
			live := func() []rowInfo { return liveRows(t, d) }
			for step := 0; step < 30; step++ {
				ls := live()
				r := ls[rng.IntN(len(ls))]
				switch op := rng.IntN(6); op {
				case 0: // append
					s, err := d.StageAppend(ctx, rows(next, next+1), StageOptions{})
					d = commit(t, d, s, err)
					added[next], added[next+1] = true, true
					next += 2
				case 1: // delete
					s, err := d.StageDelete(ctx, In("id", r.key), StageOptions{})
					d = commit(t, d, s, err)
					if added[r.key] {
						delete(added, r.key)
					} else {
						removed[r.key] = true
					}
				case 2: // lance-style update: same row id, new last-updated-at
					d = commit(t, d, upsertKeepingIDs(t, d, []rowInfo{r}), nil)
					if !added[r.key] {
						removed[r.key], added[r.key] = true, true
					}
				case 3: // upsert: new row id
					s, err := d.StageUpsert(ctx, "id", rows(r.key), StageOptions{})
					d = commit(t, d, s, err)
					if !added[r.key] {
						removed[r.key], added[r.key] = true, true
					}
				default: // compaction
					target := []uint64{8, 32, 0}[rng.IntN(3)]
					s, _, err := d.StageCompaction(ctx, CompactionOptions{TargetRowsPerFragment: target, MaterializeDeletionsThreshold: 0.05}, StageOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if s != nil {
						d = commit(t, d, s, nil)
					}
				}
			}
			diff, err := d.DiffFrom(ctx, older)
			if err != nil {
				t.Fatal(err)
			}
			gotRemoved := keysAt(t, older, diff.Removed, nil)
			gotNew := keysAt(t, d, diff.NewRows, diff.NewFragments)
			eqIDs(t, gotRemoved, sortedKeys(removed))
			eqIDs(t, gotNew, sortedKeys(added))
			// NewFragments are wholly new; NewRows lie in fragments that are not.
			for _, a := range diff.NewRows {
				if slices.Contains(diff.NewFragments, a.Fragment()) {
					t.Fatalf("row %d:%d of a wholly new fragment listed in NewRows", a.Fragment(), a.Offset())
				}
			}
		})
	}
}

func sortedKeys(m map[int64]bool) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A compacted fragment mixing carried rows with rows written since the older version: the new
// ones are listed in NewRows, the carried ones nowhere; a row updated in place of its id (same
// row id, newer last-updated-at) is removed and new.
func TestDiffFromMixedFragment(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(0, 1, 2, 3), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(4, 5), StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageAppend(ctx, rows(6), StageOptions{})
	d = commit(t, d, s, err)
	older := d
	at := addresses(liveRows(t, older))
	d = commit(t, d, upsertKeepingIDs(t, d, []rowInfo{liveRows(t, d)[1]}), nil)
	s, err = d.StageAppend(ctx, rows(7), StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageDelete(ctx, In("id", 6), StageOptions{})
	d = commit(t, d, s, err)
	s, _, err = d.StageCompaction(ctx, CompactionOptions{}, StageOptions{})
	d = commit(t, d, s, err)
	if d.NumFragments() != 1 {
		t.Fatalf("%d fragments", d.NumFragments())
	}
	now := liveRows(t, d)
	var keys []int64
	for _, r := range now {
		keys = append(keys, r.key)
	}
	eqIDs(t, keys, []int64{0, 2, 3, 4, 5, 1, 7})
	if now[5].rowID != 1 || now[5].updated != older.Version()+1 || now[5].created != 1 {
		t.Fatalf("updated row %+v", now[5])
	}
	diff, err := d.DiffFrom(ctx, older)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(diff.Removed) != fmt.Sprint([]RowAddress{at[1], at[6]}) || len(diff.NewFragments) != 0 ||
		fmt.Sprint(diff.NewRows) != fmt.Sprint([]RowAddress{now[5].addr, now[6].addr}) {
		t.Fatalf("diff %+v", diff)
	}
	// Seen from before the update, only the append and the delete remain.
	mid, err := d.Checkout(ctx, older.Version()+1)
	if err != nil {
		t.Fatal(err)
	}
	diff, err = d.DiffFrom(ctx, mid)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.Removed) != 1 || len(diff.NewRows) != 1 || diff.NewRows[0] != now[6].addr || len(diff.NewFragments) != 0 {
		t.Fatalf("diff from v%d: %+v", mid.Version(), diff)
	}
}

// Row ids and versions only compare along one lineage: a diff between two branches that
// diverged stays fragment-based (rows that happen to share a row id are not matched), and a
// branch forked after a compaction diffs against its parent's earlier versions by row.
func TestDiffFromAcrossBranches(t *testing.T) {
	ctx := context.Background()
	main, err := Create(ctx, memStore(t), testSchema(t), rows(0, 1, 2, 3), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := main.CreateBranch(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int64{100, 101} {
		st, err := s.StageAppend(ctx, rows(k), StageOptions{})
		s = commit(t, s, st, err)
	}
	for _, k := range []int64{10, 11} {
		st, err := main.StageAppend(ctx, rows(k), StageOptions{})
		main = commit(t, main, st, err)
	}
	beforeDelete := main
	st, err := main.StageDelete(ctx, In("id", 0), StageOptions{})
	main = commit(t, main, st, err)
	st, _, err = main.StageCompaction(ctx, CompactionOptions{}, StageOptions{})
	main = commit(t, main, st, err)
	if main.NumFragments() != 1 || liveRows(t, main)[3].rowID != liveRows(t, s)[4].rowID {
		t.Fatal("the test needs a row id used on both branches")
	}
	diff, err := main.DiffFrom(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.Removed) != 6 || len(diff.NewRows) != 0 || len(diff.NewFragments) != 1 {
		t.Fatalf("diff from a diverged branch %+v", diff)
	}
	// A branch forked after the compaction descends from main's earlier versions.
	b, err := main.CreateBranch(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	st, err = b.StageAppend(ctx, rows(500), StageOptions{})
	b = commit(t, b, st, err)
	diff, err = b.DiffFrom(ctx, beforeDelete)
	if err != nil {
		t.Fatal(err)
	}
	eqIDs(t, keysAt(t, beforeDelete, diff.Removed, nil), []int64{0})
	eqIDs(t, keysAt(t, b, diff.NewRows, diff.NewFragments), []int64{500})
	// main after the fork is not in b's history.
	st, err = main.StageAppend(ctx, rows(600), StageOptions{})
	main = commit(t, main, st, err)
	st, _, err = main.StageCompaction(ctx, CompactionOptions{}, StageOptions{})
	main = commit(t, main, st, err)
	diff, err = b.DiffFrom(ctx, main)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.NewRows) != 0 || len(diff.Removed) != 6 {
		t.Fatalf("diff from main after the fork %+v", diff)
	}
}

// Fragments without version sequences (older writers): compaction takes created-at as version
// 1 and last-updated-at as the created-at version, as lance's compaction does.
func TestStageCompactionVersionDefaults(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(0, 1), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(2, 3), StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &s.Txn.Op.Fragments[0] // row ids given: the commit leaves the sequences as they are
	f.RowIDs, f.CreatedAt = encodeRowIDSequence([]uint64{2, 3}), encodeVersionRuns([]uint64{7, 7})
	d = commit(t, d, s, nil)
	s, err = d.StageAppend(ctx, rows(4), StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Txn.Op.Fragments[0].RowIDs = encodeRowIDSequence([]uint64{4})
	d = commit(t, d, s, nil)
	s, _, err = d.StageCompaction(ctx, CompactionOptions{}, StageOptions{})
	d = commit(t, d, s, err)
	var got []string
	for _, r := range liveRows(t, d) {
		got = append(got, fmt.Sprintf("%d:%d/%d/%d", r.key, r.rowID, r.created, r.updated))
	}
	if fmt.Sprint(got) != "[0:0/1/1 1:1/1/1 2:2/7/7 3:3/7/7 4:4/1/1]" {
		t.Fatalf("rows %v", got)
	}
}

// wideRows are rows whose names are size bytes of random letters: a table of wide rows.
func wideRows(rng *rand.Rand, size int, ids ...int64) []arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testArrow)
	defer b.Release()
	name := make([]byte, size)
	for _, id := range ids {
		for i := range name {
			name[i] = byte('a' + rng.IntN(26))
		}
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(string(name))
	}
	return []arrow.Record{b.NewRecord()}
}

// Compaction cuts its output files by size as well as by rows and writes each as soon as it is
// finished, and a fragment cut by size is no candidate afterwards: a table of wide rows neither
// holds its whole rewrite in memory nor rewrites the same fragments on every run.
func TestStageCompactionCutsFilesBySize(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const perFragment, width = 40, 2000 // about 80 KB a fragment
	d, err := Create(ctx, st, testSchema(t), wideRows(rng, width, seq(0, perFragment)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := int64(1); k < 30; k++ {
		s, err := d.StageAppend(ctx, wideRows(rng, width, seq(k*perFragment, (k+1)*perFragment)...), StageOptions{})
		d = commit(t, d, s, err)
	}
	s, err := d.StageDelete(ctx, In("id", int64(3), int64(500), int64(1100)), StageOptions{})
	d = commit(t, d, s, err)
	before := liveRows(t, d)
	var largestInput uint64
	for i := range d.Manifest().Fragments {
		n, ok := d.Manifest().Fragments[i].FileBytes()
		if !ok {
			t.Fatalf("fragment %d: file size not recorded", d.Manifest().Fragments[i].ID)
		}
		largestInput = max(largestInput, n)
	}
	const maxBytes = 512 << 10
	s, c, err := d.StageCompaction(ctx, CompactionOptions{MaxBytesPerFile: maxBytes}, StageOptions{})
	if err != nil || s == nil {
		t.Fatalf("stage: %v %v", s, err)
	}
	if len(s.Txn.Op.Groups) != 1 {
		t.Fatalf("%d groups, want 1", len(s.Txn.Op.Groups))
	}
	nf := s.Txn.Op.Groups[0].NewFragments
	if len(nf) < 3 || c.FragmentsAdded() != len(nf) {
		t.Fatalf("%d new fragments (compaction says %d), want the ~2.4 MB cut into several", len(nf), c.FragmentsAdded())
	}
	for i, f := range nf {
		// Written while staging, before the transaction: the sink held one file at a time.
		size, err := st.Size(ctx, "data/"+f.Files[0].Path)
		if err != nil {
			t.Fatalf("new fragment %d: its file is not in storage after staging: %v", i, err)
		}
		if uint64(size) != f.Files[0].FileSizeBytes {
			t.Fatalf("new fragment %d: %d bytes stored, %d recorded", i, size, f.Files[0].FileSizeBytes)
		}
		if i < len(nf)-1 && (size < maxBytes || uint64(size) >= maxBytes+largestInput) {
			t.Fatalf("new fragment %d holds %d bytes: cut outside [%d, %d)", i, size, maxBytes, maxBytes+largestInput)
		}
	}
	d = commit(t, d, s, nil)
	after := liveRows(t, d)
	sameRows(t, "cut by size", after, before)
	checkScanMeta(t, d, after)
	if s, c, err := d.StageCompaction(ctx, CompactionOptions{MaxBytesPerFile: maxBytes}, StageOptions{}); s != nil || c != nil || err != nil {
		t.Fatalf("compacted wide table rewritten again: %v %v %v", s, c, err)
	}
	// Without the size cut the same table is one fragment, as lance's row target makes it.
	if s, _, err := d.StageCompaction(ctx, CompactionOptions{}, StageOptions{}); err != nil || s == nil || len(s.Txn.Op.Groups[0].NewFragments) != 1 {
		t.Fatalf("default cut: %v %v", s, err)
	}
}

// Compaction reads about compactReadBytes at a time, by the fragment's size: recorded in the
// manifest, or asked of storage when a writer left it out (a fragment of wide rows read 64 Ki
// rows at a time would hold hundreds of megabytes).
func TestCompactionReadBatchBySize(t *testing.T) {
	for _, c := range []struct {
		rows, bytes uint64
		want        int
	}{
		{1000, 0, 1 << 16},                // size unknown: lance's batch
		{0, 100, 1 << 16},                 // no rows
		{1 << 20, 64 << 20, 1 << 16},      // 64-byte rows: capped at 64 Ki
		{10_000, 10_000 * 8192, 1024},     // 8 KB rows: 8 MiB a batch
		{10_000, 10_000 * (1 << 20), 256}, // 1 MiB rows: at least 256
		{100, 100 * (compactReadBytes / 3), 256},
	} {
		if got := readBatchRows(c.rows, c.bytes); got != c.want {
			t.Errorf("readBatchRows(%d, %d) = %d, want %d", c.rows, c.bytes, got, c.want)
		}
	}
	ctx := context.Background()
	st := memStore(t)
	rng := rand.New(rand.NewPCG(9, 10))
	d, err := Create(ctx, st, testSchema(t), wideRows(rng, 1000, seq(0, 50)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := d.Manifest().Fragments[0]
	recorded, ok := f.FileBytes()
	if !ok {
		t.Fatal("the writer did not record the file size")
	}
	f.Files = slices.Clone(f.Files)
	f.Files[0].FileSizeBytes = 0 // as a writer that leaves it out
	if got := d.fragmentBytes(ctx, &f); got != recorded {
		t.Fatalf("fragmentBytes of an unrecorded size = %d, storage holds %d", got, recorded)
	}
}

// Remap agrees with the rewrite's definition, row by row, for rewrites of every shape: old
// fragments with and without deletions, groups split across several new fragments at any
// row, fragment ids close together (Remap's dense table) and far apart (its map), and
// addresses past a fragment's rows or in fragments the rewrite left alone.
func TestCompactionRemapMatchesTheRewrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 300 {
		gap := uint64(1 + rng.IntN(3))
		if trial%3 == 0 {
			gap = 1 << 14 // ids spread over more than the dense table takes
		}
		var (
			c         = &Compaction{readVersion: 1}
			committed = &Dataset{manifest: &Manifest{Version: 2}}
			want      = map[RowAddress]RowAddress{}
			probes    []RowAddress
			next      = uint64(10)
			newID     = uint64(1 << 30)
		)
		for gi := range 1 + rng.IntN(3) {
			var g compactGroup
			var live []RowAddress // the group's live rows, in order
			for range 1 + rng.IntN(5) {
				o := compactOld{id: next, physical: uint64(rng.IntN(40)), base: uint64(len(live))}
				next += gap
				for off := range uint32(o.physical) {
					a := RowAddress(o.id<<32 | uint64(off))
					probes = append(probes, a)
					if rng.IntN(4) == 0 {
						o.deleted = append(o.deleted, off)
						continue
					}
					live = append(live, a)
				}
				probes = append(probes, RowAddress(o.id<<32|o.physical), RowAddress(o.id<<32|(o.physical+7)))
				g.old = append(g.old, o)
			}
			// Cut the live rows into new fragments at random points.
			for start := 0; start < len(live) || len(g.ends) == 0; {
				end := min(len(live), start+1+rng.IntN(30))
				if trial%2 == 0 {
					end = len(live) // one new fragment per group
				}
				path := fmt.Sprintf("g%d-%d.lance", gi, len(g.paths))
				g.paths, g.ends = append(g.paths, path), append(g.ends, uint64(end))
				committed.manifest.Fragments = append(committed.manifest.Fragments, Fragment{ID: newID, Files: []DataFile{{Path: path}}})
				for k, a := range live[start:end] {
					want[a] = RowAddress(newID<<32 | uint64(k))
				}
				newID++
				start = end
			}
			c.groups = append(c.groups, g)
		}
		probes = append(probes, RowAddress(3<<32), RowAddress((next+gap)<<32|1), RowAddress(math.MaxUint32<<32))
		remap, err := c.Remap(committed)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := c.Span()
		for _, a := range probes {
			got, moved := remap(a)
			w, live := want[a]
			inSpan := a.Fragment() >= lo && a.Fragment() <= hi && slices.ContainsFunc(c.groups, func(g compactGroup) bool {
				return slices.ContainsFunc(g.old, func(o compactOld) bool { return o.id == a.Fragment() })
			})
			switch {
			case live && (!moved || got != w):
				t.Fatalf("trial %d: %d:%d remapped to %d:%d (moved %v), the rewrite put it at %d:%d", trial, a.Fragment(), a.Offset(), got.Fragment(), got.Offset(), moved, w.Fragment(), w.Offset())
			case !live && inSpan && (moved || got != 0):
				t.Fatalf("trial %d: %d:%d is not a live row of a rewritten fragment, remapped to %d (moved %v)", trial, a.Fragment(), a.Offset(), got, moved)
			case !inSpan && (moved || got != a):
				t.Fatalf("trial %d: %d:%d lies outside the rewrite, remapped to %d (moved %v)", trial, a.Fragment(), a.Offset(), got, moved)
			}
		}
	}
}
