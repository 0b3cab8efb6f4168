package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/integration/lancecompat/canon"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

type goFilter struct {
	where string
	pred  func(canon.Row) bool
}

func num(r canon.Row, k string) (float64, bool) { v, ok := r[k].(float64); return v, ok }

var allTypesFilters = []goFilter{
	{"i32 > 10", func(r canon.Row) bool { v, ok := num(r, "i32"); return ok && v > 10 }},
	{"s IS NULL", func(r canon.Row) bool { return r["s"] == nil }},
	{"flag_nn = true AND f64_nn >= 6", func(r canon.Row) bool { v, _ := num(r, "f64_nn"); return r["flag_nn"] == true && v >= 6 }},
}

var plainFilters = []goFilter{
	{"age > 80", func(r canon.Row) bool { a, _ := strconv.Atoi(r["age"].(string)); return a > 80 }},
	{"name IS NULL", func(r canon.Row) bool { return r["name"] == nil }},
}

// goModel remembers what the Go side wrote, per table and branch, so mutations by the official
// engine can be checked against the expected result.
type goModel struct {
	sch   map[string]*arrow.Schema
	rows  map[string][]canon.Row // "table@branch" -> latest rows
	cases []verifyCase
	// stable-row-id tables: the latest recorded version, its row ids and versions (scan order)
	version map[string]uint64
	meta    map[string][]canon.Row
	// fileVersion: every table is created at the round's data file version.
	fileVersion file.Version
}

func (m *goModel) createOptions(o lance.CreateOptions) lance.CreateOptions {
	o.FileVersion = m.fileVersion
	return o
}

func key(table, branch string) string { return table + "@" + branch }

func (m *goModel) record(table, branch string, version uint64, rows []canon.Row, filters []goFilter, cols []string) {
	v := version
	c := verifyCase{Name: fmt.Sprintf("%s%s-v%d", table, branchSuffix(branch), version), Table: table, Version: &v,
		Count: len(rows), Rows: append([]canon.Row(nil), rows...), Columns: cols}
	if branch != "" {
		b := branch
		c.Branch = &b
	}
	for _, f := range filters {
		ids := []any{}
		for _, r := range rows {
			if f.pred(r) {
				ids = append(ids, r["id"])
			}
		}
		c.Filters = append(c.Filters, caseFilter{Where: f.where, IDs: ids})
	}
	m.cases = append(m.cases, c)
	m.rows[key(table, branch)] = rows
}

func branchSuffix(b string) string {
	if b == "" {
		return ""
	}
	return "@" + b
}

func without(rows []canon.Row, ids ...int) []canon.Row {
	drop := map[string]bool{}
	for _, id := range ids {
		drop[strconv.Itoa(id)] = true
	}
	var out []canon.Row
	for _, r := range rows {
		if !drop[r["id"].(string)] {
			out = append(out, r)
		}
	}
	return out
}

func concat(parts ...[]canon.Row) []canon.Row {
	var out []canon.Row
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// writeGoTables writes the Go side's tables with the Go lance package and records cases.json.
func writeGoTables(ctx context.Context, s *suite, dir string) (*goModel, error) {
	m := &goModel{sch: map[string]*arrow.Schema{}, rows: map[string][]canon.Row{}, version: map[string]uint64{}, meta: map[string][]canon.Row{}, fileVersion: s.version}
	err := func() error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := writeAllTypes(ctx, m, dir); err != nil {
			return fmt.Errorf("alltypes: %w", err)
		}
		if err := writePlainV1(ctx, m, dir); err != nil {
			return fmt.Errorf("plain: %w", err)
		}
		if err := writeBranched(ctx, m, dir); err != nil {
			return fmt.Errorf("branched: %w", err)
		}
		if err := writeCompacted(ctx, m, dir); err != nil {
			return fmt.Errorf("compacted: %w", err)
		}
		if err := writeInlineOnly(ctx, m, dir); err != nil {
			return fmt.Errorf("inline: %w", err)
		}
		if err := writeGoStable(ctx, m, dir); err != nil {
			return fmt.Errorf("stable: %w", err)
		}
		if err := writeGoForOfficial(ctx, m, dir); err != nil {
			return fmt.Errorf("for official compaction: %w", err)
		}
		if err := writeGoCopied(ctx, m, dir); err != nil {
			return fmt.Errorf("copied: %w", err)
		}
		return writeJSON(filepath.Join(dir, "cases.json"), map[string]any{"cases": m.cases})
	}()
	s.add("go-writes", err)
	return m, err
}

func openTable(ctx context.Context, dir, table string) (storage.Store, error) {
	return storage.Open(ctx, filepath.Join(dir, table+".lance"))
}

// openDataset opens a table of dir on branch ("" for main) at version (0: the latest), and
// returns its store beside it.
func openDataset(ctx context.Context, dir, table, branch string, version uint64) (storage.Store, *lance.Dataset, error) {
	st, err := openTable(ctx, dir, table)
	if err != nil {
		return nil, nil, err
	}
	opts := []lance.OpenOption{lance.WithBranch(branch)}
	if version != 0 {
		opts = append(opts, lance.AtVersion(version))
	}
	d, err := lance.Open(ctx, st, opts...)
	return st, d, err
}

func rec(sch *arrow.Schema, rows []canon.Row) []arrow.Record {
	r, err := canon.Record(sch, rows)
	if err != nil {
		panic(err)
	}
	return []arrow.Record{r}
}

// smallPages cuts the all-types tables' pages at 6 rows, so that 20 rows span several.
var smallPages = lance.StageOptions{FileOptions: file.Options{MaxPageRows: 6}}

// createAllTypes creates table t of the all-types schema with its first 20 rows, in pages of
// 6 rows.
func createAllTypes(ctx context.Context, m *goModel, dir, t string) (*lance.Dataset, []canon.Row, error) {
	as := allTypesSchema()
	m.sch[t] = as
	ls, err := schema.FromArrow(as)
	if err != nil {
		return nil, nil, err
	}
	st, err := openTable(ctx, dir, t)
	if err != nil {
		return nil, nil, err
	}
	rows := rowsRange(allTypesRow, 0, 20)
	d, err := lance.Create(ctx, st, ls, rec(as, rows), m.createOptions(lance.CreateOptions{Stage: smallPages}))
	return d, rows, err
}

func writeAllTypes(ctx context.Context, m *goModel, dir string) error {
	const t = "gtypes"
	as, small := allTypesSchema(), smallPages
	cols := []string{"id", "ls", "vec", "ls_i64", "ts"}
	d, rows, err := createAllTypes(ctx, m, dir, t)
	if err != nil {
		return err
	}
	m.record(t, "", d.Version(), rows, allTypesFilters, cols)
	steps := []struct {
		stage func(d *lance.Dataset) (*lance.Staged, error)
		rows  func(prev []canon.Row) []canon.Row
	}{
		{func(d *lance.Dataset) (*lance.Staged, error) {
			return d.StageAppend(ctx, rec(as, rowsRange(allTypesRow, 20, 27)), small)
		}, func(p []canon.Row) []canon.Row { return concat(p, rowsRange(allTypesRow, 20, 27)) }},
		{func(d *lance.Dataset) (*lance.Staged, error) {
			return d.StageDelete(ctx, lance.In("id", 3, 5, 21, 26), small)
		},
			func(p []canon.Row) []canon.Row { return without(p, 3, 5, 21, 26) }},
		{func(d *lance.Dataset) (*lance.Staged, error) {
			o := small
			o.Properties = map[string]string{lance.InsertAbsenceProperty: "v1"}
			return d.StageInsertOnlyUpdate(ctx, rec(as, rowsRange(allTypesRow, 27, 30)), o)
		}, func(p []canon.Row) []canon.Row { return concat(p, rowsRange(allTypesRow, 27, 30)) }},
		{func(d *lance.Dataset) (*lance.Staged, error) {
			changed := allTypesRow(4)
			changed["s"] = "upserted"
			return d.StageUpsert(ctx, "id", rec(as, []canon.Row{changed, allTypesRow(30)}), small)
		}, func(p []canon.Row) []canon.Row {
			changed := allTypesRow(4)
			changed["s"] = "upserted"
			return concat(without(p, 4), []canon.Row{changed, allTypesRow(30)})
		}},
		{func(d *lance.Dataset) (*lance.Staged, error) { return d.StageRestore(ctx, 2, small) },
			func([]canon.Row) []canon.Row { return rowsRange(allTypesRow, 0, 27) }},
		{func(d *lance.Dataset) (*lance.Staged, error) {
			return d.StageOverwrite(ctx, nil, rec(as, rowsRange(allTypesRow, 100, 105)), small)
		}, func([]canon.Row) []canon.Row { return rowsRange(allTypesRow, 100, 105) }},
		{func(d *lance.Dataset) (*lance.Staged, error) { return d.StageOverwrite(ctx, nil, nil, small) },
			func([]canon.Row) []canon.Row { return nil }},
		{func(d *lance.Dataset) (*lance.Staged, error) {
			return d.StageAppend(ctx, rec(as, rowsRange(allTypesRow, 200, 203)), small)
		}, func([]canon.Row) []canon.Row { return rowsRange(allTypesRow, 200, 203) }},
	}
	for _, step := range steps {
		staged, err := step.stage(d)
		if err != nil {
			return err
		}
		if d, err = d.Commit(ctx, staged); err != nil {
			return err
		}
		rows = step.rows(rows)
		m.record(t, "", d.Version(), rows, allTypesFilters, cols)
	}
	return nil
}

// plainTable opens the Go-written table t, with the plain schema recorded in the model.
func plainTable(ctx context.Context, m *goModel, dir, t string) (storage.Store, *arrow.Schema, *schema.Schema, error) {
	as := plainSchema()
	m.sch[t] = as
	ls, _ := schema.FromArrow(as)
	st, err := openTable(ctx, dir, t)
	return st, as, ls, err
}

// writePlainV1 uses the legacy V1 manifest names, no stable row ids and many small pages.
func writePlainV1(ctx context.Context, m *goModel, dir string) error {
	const t = "gplain"
	st, as, ls, err := plainTable(ctx, m, dir, t)
	if err != nil {
		return err
	}
	fo := lance.StageOptions{FileOptions: file.Options{MaxPageRows: 333}}
	rows := rowsRange(plainRow, 0, 2500)
	d, err := lance.Create(ctx, st, ls, rec(as, rows), m.createOptions(lance.CreateOptions{V1Naming: true, DisableStableRowIDs: true, Stage: fo}))
	if err != nil {
		return err
	}
	m.record(t, "", d.Version(), rows, plainFilters, []string{"id", "score"})
	var ids []any
	var idInts []int
	for i := 0; i < 2500; i += 7 {
		ids, idInts = append(ids, i), append(idInts, i)
	}
	staged, err := d.StageDelete(ctx, lance.In("id", ids...), fo)
	if err != nil {
		return err
	}
	if d, err = d.Commit(ctx, staged); err != nil {
		return err
	}
	rows = without(rows, idInts...)
	m.record(t, "", d.Version(), rows, plainFilters, []string{"id", "score"})
	return nil
}

// writeInlineOnly commits an append and a delete whose transactions are recorded inline only
// (no _transactions/ files, writer flag 32), as the graph engine commits its tables.
func writeInlineOnly(ctx context.Context, m *goModel, dir string) error {
	const t = "ginline"
	st, as, ls, err := plainTable(ctx, m, dir, t)
	if err != nil {
		return err
	}
	fo := lance.StageOptions{InlineTransactionOnly: true}
	rows := rowsRange(plainRow, 0, 300)
	d, err := lance.Create(ctx, st, ls, rec(as, rows), m.createOptions(lance.CreateOptions{Stage: fo}))
	if err != nil {
		return err
	}
	m.record(t, "", d.Version(), rows, plainFilters, []string{"id", "score"})
	more := rowsRange(plainRow, 300, 500)
	staged, err := d.StageAppend(ctx, rec(as, more), fo)
	if err != nil {
		return err
	}
	if d, err = d.Commit(ctx, staged); err != nil {
		return err
	}
	rows = concat(rows, more)
	m.record(t, "", d.Version(), rows, plainFilters, []string{"id", "score"})
	if staged, err = d.StageDelete(ctx, lance.In("id", 3, 301), fo); err != nil {
		return err
	}
	if d, err = d.Commit(ctx, staged); err != nil {
		return err
	}
	rows = without(rows, 3, 301)
	m.record(t, "", d.Version(), rows, plainFilters, []string{"id", "score"})
	if files, err := st.List(ctx, "_transactions"); err != nil || len(files) != 0 {
		return fmt.Errorf("inline-only commits wrote transaction files %v (%v)", files, err)
	}
	return nil
}

// writeBranched forks a branch and a nested branch and writes on all three.
func writeBranched(ctx context.Context, m *goModel, dir string) error {
	const t = "gbranched"
	st, as, ls, err := plainTable(ctx, m, dir, t)
	if err != nil {
		return err
	}
	main := rowsRange(plainRow, 0, 10)
	d, err := lance.Create(ctx, st, ls, rec(as, main), m.createOptions(lance.CreateOptions{}))
	if err != nil {
		return err
	}
	m.record(t, "", 1, main, plainFilters, nil)
	feat, err := d.CreateBranch(ctx, "feat")
	if err != nil {
		return err
	}
	featRows := main
	m.record(t, "feat", feat.Version(), featRows, plainFilters, nil)
	commit := func(ds *lance.Dataset, s *lance.Staged, err error) (*lance.Dataset, error) {
		if err != nil {
			return nil, err
		}
		return ds.Commit(ctx, s)
	}
	s1, err := feat.StageAppend(ctx, rec(as, rowsRange(plainRow, 50, 55)), lance.StageOptions{})
	if feat, err = commit(feat, s1, err); err != nil {
		return err
	}
	featRows = concat(featRows, rowsRange(plainRow, 50, 55))
	m.record(t, "feat", feat.Version(), featRows, plainFilters, nil)
	s2, err := feat.StageDelete(ctx, lance.In("id", 1, 2, 52), lance.StageOptions{})
	if feat, err = commit(feat, s2, err); err != nil {
		return err
	}
	featRows = without(featRows, 1, 2, 52)
	m.record(t, "feat", feat.Version(), featRows, plainFilters, nil)
	s3, err := d.StageAppend(ctx, rec(as, rowsRange(plainRow, 90, 93)), lance.StageOptions{})
	if d, err = commit(d, s3, err); err != nil {
		return err
	}
	main = concat(main, rowsRange(plainRow, 90, 93))
	m.record(t, "", d.Version(), main, plainFilters, nil)
	sub, err := feat.CreateBranch(ctx, "feat/sub")
	if err != nil {
		return err
	}
	s4, err := sub.StageAppend(ctx, rec(as, rowsRange(plainRow, 70, 72)), lance.StageOptions{})
	if sub, err = commit(sub, s4, err); err != nil {
		return err
	}
	m.record(t, "feat/sub", sub.Version(), concat(featRows, rowsRange(plainRow, 70, 72)), plainFilters, nil)
	return nil
}

// writeCompacted appends one small fragment at a time and merges the tail as the publisher
// does for __manifest (an Update that removes fragments and adds their live rows as one).
func writeCompacted(ctx context.Context, m *goModel, dir string) error {
	const t = "gcompact"
	st, as, ls, err := plainTable(ctx, m, dir, t)
	if err != nil {
		return err
	}
	rows := rowsRange(plainRow, 0, 1)
	d, err := lance.Create(ctx, st, ls, rec(as, rows), m.createOptions(lance.CreateOptions{}))
	if err != nil {
		return err
	}
	for i := 1; i < 40; i++ {
		s, err := d.StageAppend(ctx, rec(as, rowsRange(plainRow, i, i+1)), lance.StageOptions{})
		if err != nil {
			return err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return err
		}
		rows = concat(rows, rowsRange(plainRow, i, i+1))
		if i%5 == 0 {
			s, err := d.StageDelete(ctx, lance.In("id", i-1), lance.StageOptions{})
			if err != nil {
				return err
			}
			if d, err = d.Commit(ctx, s); err != nil {
				return err
			}
			rows = without(rows, i-1)
		}
		for {
			s, _, err := d.CompactTail(ctx, 4, lance.StageOptions{})
			if err != nil {
				return err
			}
			if s == nil {
				break
			}
			if d, err = d.Commit(ctx, s); err != nil {
				return err
			}
		}
	}
	if len(d.Manifest().Fragments) >= 12 {
		return fmt.Errorf("compaction left %d fragments", len(d.Manifest().Fragments))
	}
	m.record(t, "", d.Version(), rows, plainFilters, nil)
	return nil
}
