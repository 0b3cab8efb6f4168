package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/integration/lancecompat/canon"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// Index interop: the official engine builds every index kind on tables (compat.mjs idxwrite:
// BTREE, BITMAP, LABEL_LIST, INVERTED, IVF_FLAT, IVF_PQ, IVF_HNSW_SQ on a stable-row-id table,
// a BTREE on one without stable row ids), the Go package writes on them through every write
// path, and the engine then lists the same indices at every version Go made and answers every
// scalar, full-text and nearest query exactly as a full scan does (compat.mjs idxverify), also
// for the rows no index covers and after a Go cleanup.

// idxCase is one entry of idxcases.json.
type idxCase struct {
	Name    string       `json:"name"`
	Table   string       `json:"table"`
	Branch  *string      `json:"branch"`
	Version *uint64      `json:"version"`
	Indices []string     `json:"indices"`
	Count   uint64       `json:"count"`
	Scalar  []string     `json:"scalar"`
	FTS     []string     `json:"fts"`
	Nearest []idxNearest `json:"nearest"`
	Uses    []idxUse     `json:"uses_index,omitempty"`
	ANN     []idxANN     `json:"ann,omitempty"`         // ivfflat.go
	Stats   []idxStats   `json:"index_stats,omitempty"` // ivfflat.go
}

// idxUse is a filter the engine must answer from the named index.
type idxUse struct {
	Where string `json:"where"`
	Index string `json:"index"`
}

type idxNearest struct {
	Column  string `json:"column"`
	QueryID int    `json:"query_id"`
	K       int    `json:"k"`
}

type indexedJSON struct {
	Tables map[string]struct {
		Version uint64 `json:"version"`
		Indices []struct {
			Name      string   `json:"name"`
			IndexType string   `json:"indexType"`
			Columns   []string `json:"columns"`
		} `json:"indices"`
	} `json:"tables"`
}

var idxWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// idxRow is row i of the index tables, exactly as indices.mjs's rowOf makes it.
func idxRow(i int) canon.Row {
	vec := func(k int) []any {
		out := make([]any, 16)
		for j := range out {
			x := float64((i*31+j*17+k*7)%97)/97 - 0.5
			if j == 0 {
				x += float64(i) * 1e-4
			}
			out[j] = float64(float32(x))
		}
		return out
	}
	last := "yankee"
	if i%5 == 0 {
		last = "zulu"
	}
	return canon.Row{
		"id":   strconv.Itoa(i),
		"s":    fmt.Sprintf("%s %s %s", idxWords[i%8], idxWords[(3*i+1)%8], last),
		"tag":  []string{"a", "b", "c", "d"}[i%4],
		"tags": []any{fmt.Sprintf("t%d", i%3), fmt.Sprintf("u%d", i%7)},
		"v1":   vec(1), "v2": vec(2), "v3": vec(3),
	}
}

func idxRows(ids ...int) []canon.Row {
	out := make([]canon.Row, len(ids))
	for n, i := range ids {
		out[n] = idxRow(i)
	}
	return out
}

func idxRange(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

var (
	idxScalar = []string{"id = 10", "id = 620", "id = 700", "id < 50", "id >= 590", "tag = 'b'",
		"array_has_any(tags, ['u3'])", "array_has_all(tags, ['t1', 'u2'])"}
	idxFTS     = []string{"zulu", "charlie", "hotel"}
	idxQueries = []idxNearest{{"v1", 10, 5}, {"v2", 300, 5}, {"v3", 620, 5}, {"v1", 700, 3}}
)

// indexCompat runs the index interop in dir: the engine indexes, Go writes, the engine checks.
func indexCompat(ctx context.Context, s *suite, dir string) {
	invertedCompat(ctx, s, filepath.Join(filepath.Dir(dir), "fts"))
	if err := s.runNode(ctx, "indices/", "idxwrite", dir); err != nil {
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, "indexed.json"))
	if err != nil {
		s.add("indices/go-reads", err)
		return
	}
	var made indexedJSON
	if err := json.Unmarshal(b, &made); err != nil {
		s.add("indices/go-reads", err)
		return
	}
	var cases []idxCase
	stable, err := goWritesIndexedStable(ctx, dir, made, &cases)
	s.add("indices/go-writes-istable", err)
	plain, err := goWritesIndexedPlain(ctx, dir, made, &cases)
	s.add("indices/go-writes-iplain", err)
	built, err := goBuildsBTree(ctx, dir, &cases)
	s.add("indices/go-builds-btree", err)
	folded, err := goFoldsIndices(ctx, dir, &cases)
	s.add("indices/go-folds-indices", err)
	appended, err := goAppendsBTree(ctx, dir, &cases)
	s.add("indices/go-appends-btree", err)
	ivf, err := goBuildsIVFFlat(ctx, dir, "givf", true, &cases)
	s.add("indices/go-builds-ivfflat", err)
	ivfPlain, err := goBuildsIVFFlat(ctx, dir, "givfplain", false, &cases)
	s.add("indices/go-builds-ivfflat-plain", err)
	if stable == nil || plain == nil || built == nil || folded == nil || appended == nil || ivf == nil || ivfPlain == nil {
		return
	}
	if err := writeJSON(filepath.Join(dir, "idxcases.json"), map[string]any{"cases": cases}); err != nil {
		s.add("indices/cases", err)
		return
	}
	if err := s.runNode(ctx, "indices/node-queries-go/", "idxverify", dir); err != nil {
		return
	}
	// Cleanup keeps every index file the kept versions name: the engine still answers from
	// them, on main and on the branch that reads main's index files.
	after, err := goCleansIndexed(ctx, dir, stable)
	s.add("indices/go-cleanup", err)
	if err != nil {
		return
	}
	if err := writeJSON(filepath.Join(dir, "idxcases.json"), map[string]any{"cases": after}); err != nil {
		s.add("indices/cases", err)
		return
	}
	_ = s.runNode(ctx, "indices/node-queries-go-after-cleanup/", "idxverify", dir)
	ivfEngineMaintains(ctx, s, dir)
	btreeEngineMaintains(ctx, s, dir)
}

func indexNames(d *lance.Dataset) []string {
	var out []string
	for _, x := range d.Indices() {
		out = append(out, x.Name)
	}
	sort.Strings(out)
	return out
}

// addIdxCase records the engine's checks of d (table at its version, on branch).
func addIdxCase(cases *[]idxCase, name, table, branch string, d *lance.Dataset, want []string) error {
	if got := indexNames(d); !slices.Equal(got, want) {
		return fmt.Errorf("%s: Go lists indices %v, want %v", name, got, want)
	}
	v := d.Version()
	c := idxCase{Name: name, Table: table, Version: &v, Indices: want, Count: d.CountRows(),
		Scalar: idxScalar, FTS: idxFTS, Nearest: idxQueries}
	if want == nil {
		c.Indices = []string{}
	}
	if branch != "" {
		c.Branch = &branch
	}
	*cases = append(*cases, c)
	return nil
}

// commitIdxCase commits s, staged on *d (or its staging's err), moves *d to the version it
// made and records the engine's checks of that version as case "<table>-go-<name>".
func commitIdxCase(ctx context.Context, d **lance.Dataset, cases *[]idxCase, table, name string, want []string, s *lance.Staged, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	next, err := (*d).Commit(ctx, s)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	*d = next
	return addIdxCase(cases, table+"-go-"+name, table, "", next, want)
}

// goWritesIndexedStable appends, deletes, upserts, compacts and branches istable, the table
// the engine gave every index kind, recording a case after each commit.
func goWritesIndexedStable(ctx context.Context, dir string, made indexedJSON, cases *[]idxCase) (*lance.Dataset, error) {
	const t = "istable"
	_, d, err := openDataset(ctx, dir, t, "", 0)
	if err != nil {
		return nil, err
	}
	var all []string
	for _, x := range made.Tables[t].Indices {
		all = append(all, x.Name)
	}
	sort.Strings(all)
	if len(all) != 7 {
		return nil, fmt.Errorf("the engine made %d indices on %s, want 7: %v", len(all), t, all)
	}
	for _, x := range d.Indices() {
		if !x.HasFragments || len(x.Fragments) != 3 {
			return nil, fmt.Errorf("index %s (%s) covers fragments %v, want the three the engine wrote", x.Name, x.Kind(), x.Fragments)
		}
	}
	if err := addIdxCase(cases, "istable-engine-made", t, "", d, all); err != nil {
		return nil, err
	}
	sch, err := d.Schema().ToArrow()
	if err != nil {
		return nil, err
	}
	step := func(name string, s *lance.Staged, err error) error {
		return commitIdxCase(ctx, &d, cases, t, name, all, s, err)
	}
	// Rows no index covers: an append, then an upsert that masks row 10 in fragment 0 (which
	// every index goes on covering: no column changed there) and writes it anew with row 700.
	s, err := d.StageAppend(ctx, rec(sch, idxRows(idxRange(600, 650)...)), lance.StageOptions{})
	if err := step("append", s, err); err != nil {
		return nil, err
	}
	s, err = d.StageDelete(ctx, lance.In("id", 5, 250), lance.StageOptions{})
	if err := step("delete", s, err); err != nil {
		return nil, err
	}
	s, err = d.StageUpsert(ctx, "id", rec(sch, idxRows(10, 700)), lance.StageOptions{})
	if err := step("upsert", s, err); err != nil {
		return nil, err
	}
	// Compaction merges the indexed fragments 0-2 into one the indices then cover, and the
	// unindexed new ones apart from them.
	s, c, err := d.StageCompaction(ctx, lance.CompactionOptions{TargetRowsPerFragment: 1000}, lance.StageOptions{})
	if err == nil && (s == nil || c.FragmentsRemoved() != 5 || len(s.Txn.Op.Groups) != 2) {
		err = fmt.Errorf("compaction plan %v removes %d fragments, want 0-2 and 3-4", s != nil, c.FragmentsRemoved())
	}
	if err := step("compact", s, err); err != nil {
		return nil, err
	}
	for _, x := range d.Indices() {
		if len(x.Fragments) != 1 {
			return nil, fmt.Errorf("after compaction index %s covers %v, want the one merged fragment", x.Name, x.Fragments)
		}
	}
	b, err := d.CreateBranch(ctx, "feat")
	if err != nil {
		return nil, err
	}
	s, err = b.StageAppend(ctx, rec(sch, idxRows(idxRange(800, 810)...)), lance.StageOptions{})
	if err != nil {
		return nil, err
	}
	if b, err = b.Commit(ctx, s); err != nil {
		return nil, err
	}
	if err := addIdxCase(cases, "istable-go-branch-append", t, "feat", b, all); err != nil {
		return nil, err
	}
	s, err = d.StageAppend(ctx, rec(sch, idxRows(idxRange(650, 660)...)), lance.StageOptions{})
	if err := step("append-after-compact", s, err); err != nil {
		return nil, err
	}
	// The engine's BTREE and INVERTED index, lagging the rows written since, folded in Go
	// (an engine's INVERTED index of another layout than Go writes is built anew instead).
	if err := foldIndices(ctx, &d, cases, t, "fold", all, lance.IndexSpec{Column: "id", Kind: lance.IndexBTree},
		lance.IndexSpec{Column: "s", Kind: lance.IndexInverted}); err != nil {
		return nil, err
	}
	return d, nil
}

// foldIndices folds the indices specs name on *d in Go (lance.StageIndices of indices it has:
// a BTREE's entries merged with the rows it lacks, as Lance's optimize_indices does; an
// INVERTED index given a partition of those rows) and commits that as case
// "<table>-go-<name>". It checks every folded index keeps its name and covers every fragment,
// and that a BTREE was merged rather than built anew: its page data holds the entries of rows
// deleted or replaced since it was built, as only a merge keeps them. The engine must then list
// the same indices, answer from the BTREEs (uses_index) and answer every query as a scan does.
func foldIndices(ctx context.Context, d **lance.Dataset, cases *[]idxCase, table, name string, want []string, specs ...lance.IndexSpec) error {
	names := map[lance.IndexSpec]string{}
	for _, sp := range specs {
		x := (*d).Find(sp)
		if x == nil {
			return fmt.Errorf("%s has no %s to fold", table, sp)
		}
		if rows, _ := (*d).Uncovered(x); rows == 0 {
			return fmt.Errorf("%s: %s lags no row: nothing to fold", table, sp)
		}
		names[sp] = x.Name
	}
	s, err := (*d).StageIndices(ctx, specs, lance.StageOptions{})
	if err := commitIdxCase(ctx, d, cases, table, name, want, s, err); err != nil {
		return err
	}
	c := &(*cases)[len(*cases)-1]
	for _, sp := range specs {
		x := (*d).Find(sp)
		if x == nil || x.Name != names[sp] {
			return fmt.Errorf("%s: after the fold %s is %v, want %s", table, sp, x, names[sp])
		}
		if rows, _ := (*d).Uncovered(x); rows != 0 {
			return fmt.Errorf("%s: the folded %s leaves %d rows uncovered", table, sp, rows)
		}
		if sp.Kind != lance.IndexBTree {
			continue
		}
		r, err := indexFile(ctx, *d, x, "page_data.lance")
		if err != nil {
			return err
		}
		if r.NumRows() <= int64((*d).CountRows()) {
			return fmt.Errorf("%s: the folded %s holds %d entries for %d live rows: it was built anew, not folded", table, sp, r.NumRows(), (*d).CountRows())
		}
		where := "id = 10"
		if sp.Column != "id" {
			where = sp.Column + " = 'b'"
		}
		c.Uses = append(c.Uses, idxUse{Where: where, Index: x.Name})
	}
	return nil
}

// indexFile opens file name of index x of d.
func indexFile(ctx context.Context, d *lance.Dataset, x *lance.Index, name string) (*file.Reader, error) {
	b, err := d.Store().Get(ctx, x.Dir()+name)
	if err != nil {
		return nil, err
	}
	return file.Open(ctx, file.BytesSource(b), x.Dir()+name)
}

// invertedPartitions is the partition list of INVERTED index x of d (metadata.lance).
func invertedPartitions(ctx context.Context, d *lance.Dataset, x *lance.Index) ([]uint64, error) {
	r, err := indexFile(ctx, d, x, "metadata.lance")
	if err != nil {
		return nil, err
	}
	var parts []uint64
	if err := json.Unmarshal(r.Schema().Metadata["partitions"], &parts); err != nil {
		return nil, fmt.Errorf("%s: partitions %q: %w", x.Name, r.Schema().Metadata["partitions"], err)
	}
	return parts, nil
}

// goFoldsIndices creates gfold (3,000 rows) with the Go package, builds a BTREE on id and an
// INVERTED index on s in Go, then eight times appends, deletes and upserts rows and folds both
// indices in Go: the BTREE merged, the INVERTED index given one partition more each time (its
// old partitions kept as they were) until the eighth fold finds 8 and merges them into one,
// documents of deleted and replaced rows among them. After the first two folds and the
// merging one the engine must list both, answer from them and answer every equality and
// full-text query as a scan does.
func goFoldsIndices(ctx context.Context, dir string, cases *[]idxCase) (*lance.Dataset, error) {
	d, sch, err := createIdxTable(ctx, dir, "gfold", 3000, true)
	if err != nil {
		return nil, err
	}
	specs := []lance.IndexSpec{{Column: "id", Kind: lance.IndexBTree}, {Column: "s", Kind: lance.IndexInverted}}
	s, err := d.StageIndices(ctx, specs, lance.StageOptions{})
	if err != nil {
		return nil, err
	}
	if d, err = d.Commit(ctx, s); err != nil {
		return nil, err
	}
	want := []string{"id_idx", "s_idx"}
	// Rounds 3 to 7 fold without a case of their own; the eighth finds 8 partitions and merges
	// them, with its rows, into one.
	const merging = 7
	for round := range merging + 1 {
		lo := 3000 + 100*round
		s, err := d.StageAppend(ctx, rec(sch, idxRows(idxRange(lo, lo+100)...)), lance.StageOptions{})
		if err != nil {
			return nil, err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return nil, err
		}
		if s, err = d.StageDelete(ctx, lance.In("id", lo-2990, lo+5), lance.StageOptions{}); err != nil {
			return nil, err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return nil, err
		}
		if s, err = d.StageUpsert(ctx, "id", rec(sch, idxRows(10+round, lo+50)), lance.StageOptions{}); err != nil {
			return nil, err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return nil, err
		}
		if round >= 2 && round < merging {
			if s, err = d.StageIndices(ctx, specs, lance.StageOptions{}); err == nil {
				d, err = d.Commit(ctx, s)
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		name, wantParts := fmt.Sprintf("fold-%d", round+1), round+2
		if round == merging {
			name, wantParts = "fold-merged", 1
		}
		if err := foldIndices(ctx, &d, cases, "gfold", name, want, specs...); err != nil {
			return nil, err
		}
		parts, err := invertedPartitions(ctx, d, d.Inverted("s"))
		if err != nil {
			return nil, err
		}
		if len(parts) != wantParts {
			return nil, fmt.Errorf("gfold: after fold %d the INVERTED index has partitions %v, want %d", round+1, parts, wantParts)
		}
		c := &(*cases)[len(*cases)-1]
		c.Scalar = append([]string{"id = 3050", "id = 3150", "id = 3105", "id = 12"}, idxScalar...)
		c.Nearest = idxQueries[:1]
	}
	return d, nil
}

// goAppendsBTree creates gappend (3,000 rows) with the Go package and builds a BTREE on id in
// Go, then three times appends rows of greater ids, deletes an old row and a new one, and
// folds the BTREE: each fold appends the fresh entries to the old page data (its file's pages
// copied, the page lookup written whole) instead of merging them, which the Go package's fold
// counters must show (on 2.1 and later: 2.0 pages are not copied, and the fold merges). The
// folds' row counts put the joins inside BTREE pages (3,000, 3,100,
// 7,000 and 7,013 entries: pages of 4,096). After each the engine must list the index, answer
// from it and answer every equality and range query as a scan does.
func goAppendsBTree(ctx context.Context, dir string, cases *[]idxCase) (*lance.Dataset, error) {
	d, sch, err := createIdxTable(ctx, dir, "gappend", 3000, true)
	if err != nil {
		return nil, err
	}
	ver, _ := d.FileVersion()
	spec := lance.IndexSpec{Column: "id", Kind: lance.IndexBTree}
	s, err := d.StageIndices(ctx, []lance.IndexSpec{spec}, lance.StageOptions{})
	if err != nil {
		return nil, err
	}
	if d, err = d.Commit(ctx, s); err != nil {
		return nil, err
	}
	lo := 3000
	for round, n := range []int{100, 3900, 13} {
		s, err := d.StageAppend(ctx, rec(sch, idxRows(idxRange(lo, lo+n)...)), lance.StageOptions{})
		if err != nil {
			return nil, err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return nil, err
		}
		if s, err = d.StageDelete(ctx, lance.In("id", 10+round, lo+n-1), lance.StageOptions{}); err != nil {
			return nil, err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return nil, err
		}
		appended, _ := lance.BTreeFolds()
		if err := foldIndices(ctx, &d, cases, "gappend", fmt.Sprintf("append-%d", round+1), []string{"id_idx"}, spec); err != nil {
			return nil, err
		}
		// 2.0 pages are not copied: there the fold merges.
		if now, _ := lance.BTreeFolds(); (now == appended+1) != (ver != file.V2_0) {
			return nil, fmt.Errorf("gappend: fold %d of a %s table appended %d times", round+1, ver, now-appended)
		}
		c := &(*cases)[len(*cases)-1]
		c.Scalar = []string{"id = 10", "id = 11", "id = 2999", "id = 3000", fmt.Sprintf("id = %d", lo), fmt.Sprintf("id = %d", lo+n-2),
			fmt.Sprintf("id = %d", lo+n-1), "id >= 4090", "id >= 6990", "id < 3", "id < 3010", "id >= 2995"}
		lo += n
	}
	return d, nil
}

// goWritesIndexedPlain writes on iplain, a BTREE-indexed table without stable row ids, and
// finally overwrites it, which drops its index as Lance's overwrite does.
func goWritesIndexedPlain(ctx context.Context, dir string, made indexedJSON, cases *[]idxCase) (*lance.Dataset, error) {
	const t = "iplain"
	_, d, err := openDataset(ctx, dir, t, "", 0)
	if err != nil {
		return nil, err
	}
	want := []string{"id_idx"}
	if err := addIdxCase(cases, "iplain-engine-made", t, "", d, want); err != nil {
		return nil, err
	}
	sch, err := d.Schema().ToArrow()
	if err != nil {
		return nil, err
	}
	step := func(name string, s *lance.Staged, err error, want []string) error {
		return commitIdxCase(ctx, &d, cases, t, name, want, s, err)
	}
	s, err := d.StageAppend(ctx, rec(sch, idxRows(idxRange(600, 640)...)), lance.StageOptions{})
	if err := step("append", s, err, want); err != nil {
		return nil, err
	}
	s, err = d.StageDelete(ctx, lance.In("id", 7), lance.StageOptions{})
	if err := step("delete", s, err, want); err != nil {
		return nil, err
	}
	s, err = d.StageUpsert(ctx, "id", rec(sch, idxRows(620, 700)), lance.StageOptions{})
	if err := step("upsert", s, err, want); err != nil {
		return nil, err
	}
	// The engine's BTREE over row addresses (no stable row ids), folded in Go.
	if err := foldIndices(ctx, &d, cases, t, "fold", want, lance.IndexSpec{Column: "id", Kind: lance.IndexBTree}); err != nil {
		return nil, err
	}
	s, err = d.StageOverwrite(ctx, nil, rec(sch, idxRows(idxRange(0, 100)...)), lance.StageOptions{})
	if err := step("overwrite", s, err, nil); err != nil {
		return nil, err
	}
	return d, nil
}

// goCleansIndexed removes every istable version below its newest and returns the cases of
// what remains: main's newest version and the branch's.
func goCleansIndexed(ctx context.Context, dir string, d *lance.Dataset) ([]idxCase, error) {
	st, err := openTable(ctx, dir, "istable")
	if err != nil {
		return nil, err
	}
	p, err := lance.PlanCleanup(ctx, st, map[string]uint64{"": d.Version()}, time.Now().Add(time.Hour))
	if err != nil {
		return nil, err
	}
	if p.VersionsRemoved() == 0 {
		return nil, fmt.Errorf("cleanup removes no version")
	}
	if err := p.Apply(ctx); err != nil {
		return nil, err
	}
	var cases []idxCase
	names := indexNames(d)
	if err := addIdxCase(&cases, "istable-after-cleanup", "istable", "", d, names); err != nil {
		return nil, err
	}
	_, b, err := openDataset(ctx, dir, "istable", "feat", 0)
	if err != nil {
		return nil, err
	}
	if err := addIdxCase(&cases, "istable-branch-after-cleanup", "istable", "feat", b, names); err != nil {
		return nil, err
	}
	return cases, nil
}

// goBuildsBTree creates gbtree (5,000 rows: two BTREE pages) with the Go package, builds BTREE
// indices on its id and tag columns in Go, then appends rows no index covers; the engine must
// list both indices, answer from them (its plans name them) and answer as a scan does.
func goBuildsBTree(ctx context.Context, dir string, cases *[]idxCase) (*lance.Dataset, error) {
	d, sch, err := createIdxTable(ctx, dir, "gbtree", 3000, true)
	if err != nil {
		return nil, err
	}
	s, err := d.StageAppend(ctx, rec(sch, idxRows(idxRange(3000, 5000)...)), lance.StageOptions{})
	if err != nil {
		return nil, err
	}
	if d, err = d.Commit(ctx, s); err != nil {
		return nil, err
	}
	for _, col := range []string{"id", "tag"} {
		s, err := d.StageBTreeIndex(ctx, col, lance.IndexOptions{})
		if err != nil {
			return nil, err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return nil, err
		}
	}
	want := []string{"id_idx", "tag_idx"}
	uses := []idxUse{{"id = 10", "id_idx"}, {"id >= 4990", "id_idx"}, {"tag = 'b'", "tag_idx"}}
	add := func(name string) error {
		if err := addIdxCase(cases, name, "gbtree", "", d, want); err != nil {
			return err
		}
		c := &(*cases)[len(*cases)-1]
		c.Scalar = append([]string{"id = 4095", "id = 4096", "id < 4100"}, idxScalar...)
		c.FTS, c.Uses = nil, uses
		c.Nearest = idxQueries[:1]
		return nil
	}
	if err := add("gbtree-go-built"); err != nil {
		return nil, err
	}
	s, err = d.StageAppend(ctx, rec(sch, idxRows(idxRange(5000, 5050)...)), lance.StageOptions{})
	if err != nil {
		return nil, err
	}
	if d, err = d.Commit(ctx, s); err != nil {
		return nil, err
	}
	s, err = d.StageUpsert(ctx, "id", rec(sch, idxRows(10, 4096)), lance.StageOptions{})
	if err != nil {
		return nil, err
	}
	if d, err = d.Commit(ctx, s); err != nil {
		return nil, err
	}
	if err := add("gbtree-go-built-then-written"); err != nil {
		return nil, err
	}
	// Go's own BTREEs folded: the engine answers from them.
	if err := foldIndices(ctx, &d, cases, "gbtree", "fold", want, lance.IndexSpec{Column: "id", Kind: lance.IndexBTree},
		lance.IndexSpec{Column: "tag", Kind: lance.IndexBTree}); err != nil {
		return nil, err
	}
	c := &(*cases)[len(*cases)-1]
	c.Scalar = append([]string{"id = 4095", "id = 4096", "id < 4100", "id = 5049"}, idxScalar...)
	c.FTS, c.Nearest = nil, idxQueries[:1]
	return d, nil
}

// createIdxTable creates table in dir with the Go package, of istable's schema and data file
// version (what the engine made), holding rows [0, n) of the index tables, with stable row ids
// or without; it returns the table and its Arrow schema.
func createIdxTable(ctx context.Context, dir, table string, n int, stable bool) (*lance.Dataset, *arrow.Schema, error) {
	_, src, err := openDataset(ctx, dir, "istable", "", 0)
	if err != nil {
		return nil, nil, err
	}
	sch, err := src.Schema().ToArrow()
	if err != nil {
		return nil, nil, err
	}
	st, err := openTable(ctx, dir, table)
	if err != nil {
		return nil, nil, err
	}
	ver, _ := src.FileVersion()
	d, err := lance.Create(ctx, st, src.Schema(), rec(sch, idxRows(idxRange(0, n)...)),
		lance.CreateOptions{FileVersion: ver, DisableStableRowIDs: !stable})
	return d, sch, err
}
