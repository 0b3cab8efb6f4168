package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// Engine maintenance of Go-built scalar indices (#28 item 5): on gbtree (Go's BTREE indices
// on id and tag, rows Go wrote after them) and gfts (Go's INVERTED index on s, rows Go appended
// after it) the engine runs optimize() (compaction, and the new rows folded into the indices),
// then createIndex(..., {replace: true}) re-indexes; Go then appends, deletes and compacts on
// top of what the engine wrote. After every step the engine lists the indices, counts their
// rows as the manifest says, and answers equality filters (BTREE) as a full scan does, and
// full-text queries (INVERTED) as its own index does on efts, a table every step was done to
// alike.

// engineStep runs one compat.mjs mutate step (op optimize or reindex) on table.
func engineStep(ctx context.Context, s *suite, dir, prefix string, step map[string]any) error {
	if err := writeJSON(filepath.Join(dir, "mutate.json"), map[string]any{"steps": []map[string]any{step}}); err != nil {
		s.add(prefix+"mutate.json", err)
		return err
	}
	n := len(s.results)
	if err := s.runNode(ctx, prefix, "mutate", dir); err != nil {
		return err
	}
	for _, r := range s.results[n:] {
		if !r.OK {
			return fmt.Errorf("%s: %s", r.Case, r.Error)
		}
	}
	return nil
}

// indexedCounts is what the engine counts of the index named name on d: the rows in the
// fragments any of its segments covers, and the rest.
func indexedCounts(d *lance.Dataset, name string) (indexed, unindexed uint64, segments int) {
	union := lance.Index{HasFragments: true}
	for _, x := range d.Indices() {
		if x.Name == name {
			union.Fragments = append(union.Fragments, x.Fragments...)
			segments++
		}
	}
	slices.Sort(union.Fragments)
	union.Fragments = slices.Compact(union.Fragments)
	unindexed, _ = d.Uncovered(&union)
	return d.CountRows() - unindexed, unindexed, segments
}

// btreeEngineMaintains has the engine optimize gbtree and re-index it, then Go writes on it;
// idxverify checks every version.
func btreeEngineMaintains(ctx context.Context, s *suite, dir string) {
	const t = "gbtree"
	var cases []idxCase
	want := []string{"id_idx", "tag_idx"}
	record := func(name string, d *lance.Dataset) error {
		if err := addIdxCase(&cases, "gbtree-"+name, t, "", d, want); err != nil {
			return err
		}
		c := &cases[len(cases)-1]
		c.Scalar = append([]string{"id = 4095", "id = 4096", "id = 5049", "id = 5060", "id < 4100", "id >= 5040"}, idxScalar...)
		c.FTS, c.Nearest = nil, nil
		c.Uses = []idxUse{{"id = 10", "id_idx"}, {"id >= 4990", "id_idx"}, {"tag = 'b'", "tag_idx"}}
		for _, n := range want {
			in, un, segs := indexedCounts(d, n)
			if segs != 1 {
				return fmt.Errorf("%s: %d segments of %s", name, segs, n)
			}
			c.Stats = append(c.Stats, idxStats{Name: n, IndexType: "BTREE", ListType: "BTree", NumIndexedRows: in, NumUnindexedRow: un})
		}
		return nil
	}
	latest := func() (*lance.Dataset, error) {
		_, d, err := openDataset(ctx, dir, t, "", 0)
		return d, err
	}
	step := func(name string, st map[string]any) (*lance.Dataset, error) {
		if err := engineStep(ctx, s, dir, "indices/btree-maintain/", st); err != nil {
			return nil, err
		}
		d, err := latest()
		if err == nil {
			err = record(name, d)
		}
		return d, err
	}
	d, err := step("engine-optimized", map[string]any{"name": "gbtree-engine-optimize", "table": t, "op": "optimize"})
	if err == nil {
		if in, un, _ := indexedCounts(d, "id_idx"); un != 0 || in != d.CountRows() {
			err = fmt.Errorf("after the engine's optimize id_idx covers %d rows and not %d", in, un)
		}
	}
	s.add("indices/btree-engine-optimize", err)
	if err != nil {
		return
	}
	_, err = step("engine-reindexed-id", map[string]any{"name": "gbtree-engine-reindex-id", "table": t, "op": "reindex", "column": "id", "kind": "btree"})
	if err == nil {
		d, err = step("engine-reindexed", map[string]any{"name": "gbtree-engine-reindex-tag", "table": t, "op": "reindex", "column": "tag", "kind": "btree"})
	}
	s.add("indices/btree-engine-reindex", err)
	if err != nil {
		return
	}
	err = goWritesAfterEngine(ctx, d, record, idxAppend, "id", []any{20, 4500, 5062})
	s.add("indices/btree-go-writes-after-engine", err)
	if err != nil {
		return
	}
	if err := writeJSON(filepath.Join(dir, "idxcases.json"), map[string]any{"cases": cases}); err != nil {
		s.add("indices/cases", err)
		return
	}
	_ = s.runNode(ctx, "indices/node-queries-btree-maintained/", "idxverify", dir)
}

// idxAppend stages rows [lo, hi) of the index tables on d.
func idxAppend(ctx context.Context, d *lance.Dataset, lo, hi int) (*lance.Staged, error) {
	sch, err := d.Schema().ToArrow()
	if err != nil {
		return nil, err
	}
	return d.StageAppend(ctx, rec(sch, idxRows(idxRange(lo, hi)...)), lance.StageOptions{})
}

// goWritesAfterEngine appends rows 5060-5070, deletes the rows whose key is one of del (in
// the engine's fragments and in Go's), appends 5070-5080 and compacts (the two appended
// fragments merge, and the engine's if it left several; a group never mixes fragments an
// index covers with others), recording d after each.
func goWritesAfterEngine(ctx context.Context, d *lance.Dataset, record func(string, *lance.Dataset) error,
	appendRows func(context.Context, *lance.Dataset, int, int) (*lance.Staged, error), key string, del []any) error {
	commit := func(name string, s *lance.Staged, err error) error {
		if err == nil {
			d, err = d.Commit(ctx, s)
		}
		if err == nil {
			err = record(name, d)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	s, err := appendRows(ctx, d, 5060, 5070)
	if err := commit("go-append-after-engine", s, err); err != nil {
		return err
	}
	s, err = d.StageDelete(ctx, lance.In(key, del...), lance.StageOptions{})
	if err := commit("go-delete-after-engine", s, err); err != nil {
		return err
	}
	s, err = appendRows(ctx, d, 5070, 5080)
	if err := commit("go-append2-after-engine", s, err); err != nil {
		return err
	}
	frags := len(d.Manifest().Fragments)
	s, c, err := d.StageCompaction(ctx, lance.CompactionOptions{TargetRowsPerFragment: 100_000, MaterializeDeletionsThreshold: -1}, lance.StageOptions{})
	if err == nil && (s == nil || c.FragmentsRemoved() < 2) {
		err = fmt.Errorf("compaction plan %v removes %d of %d fragments, want at least the two Go appended", s != nil, c.FragmentsRemoved(), frags)
	}
	return commit("go-compact-after-engine", s, err)
}

// ftsEngineMaintains has the engine optimize gfts and efts alike, then re-index both, then Go
// appends, deletes and compacts on both alike; after each step ftsmaintain compares them. After
// an engine step every row is to be indexed (ftsmaintain checks the engine's counts, Go then
// its manifest); after Go's writes the counts are the ones Go's manifest says.
func ftsEngineMaintains(ctx context.Context, s *suite, dir string) {
	run := func(label, op string, counts []uint64) error {
		n := len(s.results)
		m := map[string]any{"label": label, "op": op}
		if counts != nil {
			m["indexed"], m["unindexed"] = counts[0], counts[1]
		}
		if err := writeJSON(filepath.Join(dir, "ftsmaintain.json"), m); err != nil {
			return err
		}
		if err := s.runNode(ctx, "fts/", "ftsmaintain", dir); err != nil {
			return err
		}
		for _, r := range s.results[n:] {
			if !r.OK {
				return fmt.Errorf("%s: %s", r.Case, r.Error)
			}
		}
		for _, t := range []string{"gfts", "efts"} {
			_, d, err := openDataset(ctx, dir, t, "", 0)
			if err != nil {
				return err
			}
			in, un, _ := indexedCounts(d, "s_idx")
			if counts == nil && (un != 0 || in != d.CountRows()) {
				return fmt.Errorf("after the engine's %s Go reads %s's s_idx as covering %d rows and not %d", op, t, in, un)
			}
		}
		return nil
	}
	if err := run("engine-optimize", "optimize", nil); err != nil {
		s.add("fts/engine-optimize", err)
		return
	}
	if err := run("engine-reindex", "reindex", nil); err != nil {
		s.add("fts/engine-reindex", err)
		return
	}
	// Go writes the same on both tables; ftsmaintain compares them after each write.
	tables := map[string]*lance.Dataset{}
	for _, t := range []string{"gfts", "efts"} {
		_, d, err := openDataset(ctx, dir, t, "", 0)
		if err != nil {
			s.add("fts/go-writes-after-engine", err)
			return
		}
		tables[t] = d
	}
	ftsAppend := func(ctx context.Context, d *lance.Dataset, lo, hi int) (*lance.Staged, error) {
		return d.StageAppend(ctx, ftsRecord(lo, hi), lance.StageOptions{})
	}
	var names []string
	var counts [][]uint64
	for _, t := range []string{"efts", "gfts"} {
		names, counts = nil, nil
		err := goWritesAfterEngine(ctx, tables[t], func(name string, d *lance.Dataset) error {
			in, un, _ := indexedCounts(d, "s_idx")
			names, counts = append(names, name), append(counts, []uint64{in, un})
			return nil
		}, ftsAppend, "id", []any{int64(20), int64(640), int64(5062)})
		if err != nil {
			s.add("fts/go-writes-after-engine", fmt.Errorf("%s: %w", t, err))
			return
		}
	}
	// The engine reads the newest version only: one comparison after all of Go's writes.
	s.add("fts/go-writes-after-engine", run(names[len(names)-1], "none", counts[len(counts)-1]))
}
