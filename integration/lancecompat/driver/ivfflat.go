package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// IVF_FLAT interop: the Go package builds the vector index the reference OmniGraph builds on a
// vector property (IVF_FLAT, one partition, L2) and the official engine must list it as
// IvfFlat, count its rows as indexed, answer nearest queries from it (its plan names the index)
// and return exactly the rows and distances of a brute-force scan, with and without a filter,
// after rows were deleted before and after the build and with rows appended that the index
// does not cover.

// idxANN is a nearest query the engine must answer through the named vector index (no refine
// step: the distances come from the index's stored vectors), equal to a brute-force scan.
type idxANN struct {
	Column  string `json:"column"`
	QueryID int    `json:"query_id"`
	K       int    `json:"k"`
	Where   string `json:"where,omitempty"`
	Index   string `json:"index"`
}

// idxStats is what the engine's indexStats must say of an index.
type idxStats struct {
	Name            string `json:"name"`
	IndexType       string `json:"index_type"`
	ListType        string `json:"list_type"`
	DistanceType    string `json:"distance_type,omitempty"`
	NumIndexedRows  uint64 `json:"num_indexed_rows"`
	NumUnindexedRow uint64 `json:"num_unindexed_rows"`
}

// ivfQueries are the nearest queries of the Go-built IVF_FLAT cases: rows inside the index,
// the vector of a deleted row, a row only the appended fragment holds, with k 5 and 10, with
// and without filters (one of them reaching into the unindexed rows).
func ivfQueries() []idxANN {
	var out []idxANN
	for _, q := range []struct {
		id    int
		k     int
		where string
	}{
		{10, 5, ""}, {10, 10, ""}, {123, 5, ""}, {7, 10, ""}, {299, 10, ""}, {420, 5, ""}, {420, 10, ""},
		{10, 5, "id < 200"}, {123, 10, "tag = 'b'"}, {55, 10, "id >= 390"}, {350, 5, "id >= 440"},
	} {
		out = append(out, idxANN{Column: "v1", QueryID: q.id, K: q.k, Where: q.where, Index: "v1_idx"})
	}
	return out
}

// goBuildsIVFFlat creates table (two fragments, two rows deleted; with stable row ids or
// without, when the index holds row addresses), builds an IVF_FLAT index on v1 in Go, then
// deletes a covered row and appends rows no index covers, and on the stable table compacts the
// covered fragments into one; it records a case after the build and after each step.
func goBuildsIVFFlat(ctx context.Context, dir, table string, stable bool, cases *[]idxCase) (*lance.Dataset, error) {
	d, sch, err := createIdxTable(ctx, dir, table, 300, stable)
	if err != nil {
		return nil, err
	}
	commit := func(s *lance.Staged, err error) error {
		if err != nil {
			return err
		}
		d, err = d.Commit(ctx, s)
		return err
	}
	if err := commit(d.StageAppend(ctx, rec(sch, idxRows(idxRange(300, 400)...)), lance.StageOptions{})); err != nil {
		return nil, err
	}
	if err := commit(d.StageDelete(ctx, lance.In("id", 7, 333), lance.StageOptions{})); err != nil {
		return nil, err
	}
	if err := commit(d.StageIVFFlatIndex(ctx, "v1", lance.IndexOptions{})); err != nil {
		return nil, err
	}
	x := d.VectorIndex("v1")
	if x == nil || x.Name != "v1_idx" || x.Details.TypeURL != lance.VectorDetailsType || len(x.Fragments) != 2 {
		return nil, fmt.Errorf("after the build Go lists vector index %+v", x)
	}
	want := []string{"v1_idx"}
	add := func(name string) error {
		if err := addIdxCase(cases, table+"-go-"+name, table, "", d, want); err != nil {
			return err
		}
		idx := d.VectorIndex("v1")
		unindexed, _ := d.Uncovered(idx)
		c := &(*cases)[len(*cases)-1]
		c.Scalar, c.FTS = []string{"id < 50", "tag = 'b'"}, nil
		c.Nearest = idxQueries[:1]
		c.ANN = ivfQueries()
		c.Stats = []idxStats{{Name: "v1_idx", IndexType: "IVF_FLAT", ListType: "IvfFlat", DistanceType: "l2",
			NumIndexedRows: d.CountRows() - unindexed, NumUnindexedRow: unindexed}}
		return nil
	}
	if err := add("built"); err != nil {
		return nil, err
	}
	// A covered row deleted after the build (the engine masks it at query time), and rows the
	// index does not cover, which the engine searches beside it.
	if err := commit(d.StageDelete(ctx, lance.In("id", 11), lance.StageOptions{})); err != nil {
		return nil, err
	}
	if err := commit(d.StageAppend(ctx, rec(sch, idxRows(idxRange(400, 450)...)), lance.StageOptions{})); err != nil {
		return nil, err
	}
	if err := add("built-then-written"); err != nil || !stable {
		return d, err
	}
	// Compaction merges the two covered fragments (one with deletions), which the index then
	// covers instead: with stable row ids its stored ids stay valid.
	s, c, err := d.StageCompaction(ctx, lance.CompactionOptions{TargetRowsPerFragment: 1000}, lance.StageOptions{})
	if err == nil && (s == nil || c.FragmentsRemoved() != 2) {
		err = fmt.Errorf("compaction plan %v removes %d fragments, want the two covered ones", s != nil, c.FragmentsRemoved())
	}
	if err := commit(s, err); err != nil {
		return nil, err
	}
	if x := d.VectorIndex("v1"); x == nil || len(x.Fragments) != 1 {
		return nil, fmt.Errorf("after compaction the vector index is %+v", x)
	}
	return d, add("built-then-compacted")
}

// ivfEngineMaintains has the engine optimize givf (its optimize compacts and adds the rows the
// Go-built index lacks as a delta segment of it), then Go appends and finally rebuilds the
// index, which replaces every segment of its name; the engine checks each version.
func ivfEngineMaintains(ctx context.Context, s *suite, dir string) {
	steps := []map[string]any{{"name": "givf-engine-optimize", "table": "givf", "op": "optimize"}}
	if err := writeJSON(filepath.Join(dir, "mutate.json"), map[string]any{"steps": steps}); err != nil {
		s.add("indices/ivfflat-engine-optimize", err)
		return
	}
	if err := s.runNode(ctx, "indices/", "mutate", dir); err != nil {
		return
	}
	cases, err := goAfterEngineOptimize(ctx, dir)
	s.add("indices/go-writes-after-engine-optimize", err)
	if err != nil {
		return
	}
	if err := writeJSON(filepath.Join(dir, "idxcases.json"), map[string]any{"cases": cases}); err != nil {
		s.add("indices/cases", err)
		return
	}
	_ = s.runNode(ctx, "indices/node-queries-ivf-maintained/", "idxverify", dir)
}

// goAfterEngineOptimize records givf as the engine's optimize left it, appends rows and
// rebuilds the index in Go, recording a case after each.
func goAfterEngineOptimize(ctx context.Context, dir string) ([]idxCase, error) {
	_, d, err := openDataset(ctx, dir, "givf", "", 0)
	if err != nil {
		return nil, err
	}
	sch, err := d.Schema().ToArrow()
	if err != nil {
		return nil, err
	}
	var cases []idxCase
	add := func(name string, segments int) error {
		// The engine lists the segments of one index as one; its counts are over all of them.
		union := lance.Index{HasFragments: true}
		for _, x := range d.Indices() {
			if x.Name != "v1_idx" || !x.IsVector() {
				return fmt.Errorf("%s: Go lists index %s (%s)", name, x.Name, x.Kind())
			}
			union.Fragments = append(union.Fragments, x.Fragments...)
		}
		if len(d.Indices()) != segments {
			return fmt.Errorf("%s: Go lists %d segments of v1_idx, want %d", name, len(d.Indices()), segments)
		}
		slices.Sort(union.Fragments)
		union.Fragments = slices.Compact(union.Fragments)
		unindexed, _ := d.Uncovered(&union)
		v := d.Version()
		cases = append(cases, idxCase{Name: "givf-" + name, Table: "givf", Version: &v, Indices: []string{"v1_idx"},
			Count: d.CountRows(), Scalar: []string{"id < 50"}, Nearest: idxQueries[:1], ANN: ivfQueries(),
			Stats: []idxStats{{Name: "v1_idx", IndexType: "IVF_FLAT", ListType: "IvfFlat", DistanceType: "l2",
				NumIndexedRows: d.CountRows() - unindexed, NumUnindexedRow: unindexed}}})
		return nil
	}
	if err := add("engine-optimized", 2); err != nil {
		return nil, err
	}
	s, err := d.StageAppend(ctx, rec(sch, idxRows(idxRange(450, 460)...)), lance.StageOptions{})
	if err == nil {
		d, err = d.Commit(ctx, s)
	}
	if err != nil {
		return nil, err
	}
	if err := add("go-append-after-engine-optimize", 2); err != nil {
		return nil, err
	}
	s, err = d.StageIVFFlatIndex(ctx, "v1", lance.IndexOptions{})
	if err == nil {
		d, err = d.Commit(ctx, s)
	}
	if err != nil {
		return nil, err
	}
	return cases, add("go-rebuilt", 1)
}
