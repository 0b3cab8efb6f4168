package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/omnigraph/omnigraph-worker/integration/lancecompat/canon"
	"github.com/omnigraph/omnigraph-worker/lance"
)

type mutateStep struct {
	Name   string            `json:"name"`
	Table  string            `json:"table"`
	Branch *string           `json:"branch"`
	Op     string            `json:"op"`
	Rows   []canon.Row       `json:"rows,omitempty"`
	Where  string            `json:"where,omitempty"`
	Values map[string]string `json:"values,omitempty"`
}

// mutateAndCheck has the official engine append, delete and update on the Go-written tables,
// then reads the results back with the Go package.
func mutateAndCheck(ctx context.Context, s *suite, dir string, m *goModel) {
	feat := "feat"
	steps := []mutateStep{
		{Name: "gtypes-append", Table: "gtypes", Op: "append", Rows: rowsRange(allTypesRow, 300, 303)},
		{Name: "gtypes-delete", Table: "gtypes", Op: "delete", Where: "id = 201"},
		{Name: "gtypes-update", Table: "gtypes", Op: "update", Where: "id = 200", Values: map[string]string{"s": "'updated'"}},
		{Name: "gplain-delete", Table: "gplain", Op: "delete", Where: "id = 8"},
		{Name: "gplain-append", Table: "gplain", Op: "append", Rows: rowsRange(plainRow, 5000, 5004)},
		{Name: "gbranched-feat-append", Table: "gbranched", Branch: &feat, Op: "append", Rows: rowsRange(plainRow, 80, 82)},
		{Name: "gbranched-main-delete", Table: "gbranched", Op: "delete", Where: "id = 0"},
		// Versions with inline-only transactions (no _transactions/ files): the official
		// writer must take them as its read version.
		{Name: "ginline-delete", Table: "ginline", Op: "delete", Where: "id = 4"},
		{Name: "ginline-append", Table: "ginline", Op: "append", Rows: rowsRange(plainRow, 6000, 6003)},
	}
	steps = append(steps, stableMutations(m)...)
	if err := writeJSON(filepath.Join(dir, "mutate.json"), map[string]any{"steps": steps}); err != nil {
		s.add("go-mutate-plan", err)
		return
	}
	if err := s.runNode(ctx, "node-mutates-go/", "mutate", dir); err != nil {
		return
	}
	updated := allTypesRow(200)
	updated["s"] = "updated"
	expect := []struct {
		table, branch string
		rows          []canon.Row
	}{
		{"gtypes", "", concat([]canon.Row{updated, allTypesRow(202)}, rowsRange(allTypesRow, 300, 303))},
		{"gplain", "", concat(without(m.rows[key("gplain", "")], 8), rowsRange(plainRow, 5000, 5004))},
		{"gbranched", "feat", concat(m.rows[key("gbranched", "feat")], rowsRange(plainRow, 80, 82))},
		{"gbranched", "", without(m.rows[key("gbranched", "")], 0)},
		{"ginline", "", concat(without(m.rows[key("ginline", "")], 4), rowsRange(plainRow, 6000, 6003))},
	}
	for _, e := range expect {
		name := "go-reads-node-mutated/" + e.table + branchSuffix(e.branch)
		s.add(name, checkTable(ctx, dir, e.table, e.branch, 0, e.rows, nil))
	}
	// Stable-row-id tables: the official engine's writes and compaction on top of Go's.
	s.add("go-reads-node-mutated/gstable", checkStableAfterNode(ctx, dir, m))
	s.add("go-reads-node-compacted/gofficial", checkOfficialCompaction(ctx, s, dir, m))
	// Go writes on top of what the official engine wrote, and the official engine reads it.
	s.add("go-appends-after-node", goAppendAfterNode(ctx, s, dir, m))
}

func goAppendAfterNode(ctx context.Context, s *suite, dir string, m *goModel) error {
	_, d, err := openDataset(ctx, dir, "gtypes", "", 0)
	if err != nil {
		return err
	}
	staged, err := d.StageDelete(ctx, lance.In("id", 300), lance.StageOptions{})
	if err != nil {
		return err
	}
	if d, err = d.Commit(ctx, staged); err != nil {
		return err
	}
	staged, err = d.StageAppend(ctx, rec(m.sch["gtypes"], rowsRange(allTypesRow, 400, 402)), lance.StageOptions{})
	if err != nil {
		return err
	}
	if d, err = d.Commit(ctx, staged); err != nil {
		return err
	}
	updated := allTypesRow(200)
	updated["s"] = "updated"
	rows := concat([]canon.Row{updated, allTypesRow(202)}, rowsRange(allTypesRow, 301, 303), rowsRange(allTypesRow, 400, 402))
	sub := filepath.Join(dir, "after")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, "gtypes.lance"), filepath.Join(sub, "gtypes.lance")); err != nil {
		return err
	}
	v := d.Version()
	c := verifyCase{Name: "gtypes-after-node", Table: "gtypes", Version: &v, Count: len(rows), Rows: rows}
	if err := writeJSON(filepath.Join(sub, "cases.json"), map[string]any{"cases": []verifyCase{c}}); err != nil {
		return err
	}
	return s.runNode(ctx, "node-reads-go-after-node/", "verify", sub)
}

// checkTable opens a table (version 0: latest) and compares its rows with want.
func checkTable(ctx context.Context, dir, table, branch string, version uint64, want []canon.Row, cols []string) error {
	_, d, err := openDataset(ctx, dir, table, branch, version)
	if err != nil {
		return err
	}
	if int(d.CountRows()) != len(want) {
		return fmt.Errorf("count %d, want %d", d.CountRows(), len(want))
	}
	recs, err := d.ReadAll(ctx, lance.ScanOptions{Columns: cols})
	if err != nil {
		return err
	}
	got, err := canon.Rows(recs)
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		return err
	}
	if cols != nil {
		want = project(want, cols)
	}
	if diff := canon.Diff(want, got); diff != "" {
		return fmt.Errorf("%s", diff)
	}
	return nil
}

// checkMeta compares the row ids and versions Go reads (version 0: latest) with want.
func checkMeta(ctx context.Context, dir, table, branch string, version uint64, want []canon.Row, ordered bool) error {
	_, d, err := openDataset(ctx, dir, table, branch, version)
	if err != nil {
		return err
	}
	_, got, err := readWithMeta(ctx, d)
	if err != nil {
		return err
	}
	if !ordered {
		want, got = append([]canon.Row(nil), want...), append([]canon.Row(nil), got...)
		canon.SortByID(want)
		canon.SortByID(got)
	}
	return sameMeta(want, got)
}

func project(rows []canon.Row, cols []string) []canon.Row {
	out := make([]canon.Row, len(rows))
	for i, r := range rows {
		p := canon.Row{}
		for _, c := range cols {
			p[c] = r[c]
		}
		out[i] = p
	}
	return out
}

// readNodeTables reads every case the official engine recorded, at its version and branch.
func readNodeTables(ctx context.Context, s *suite, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		s.add("go-reads-node/cases", err)
		return
	}
	var cs struct {
		Cases []verifyCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &cs); err != nil {
		s.add("go-reads-node/cases", err)
		return
	}
	for _, c := range cs.Cases {
		var v uint64
		if c.Version != nil {
			v = *c.Version
		}
		branch := ""
		if c.Branch != nil {
			branch = *c.Branch
		}
		err := checkTable(ctx, dir, c.Table, branch, v, c.Rows, nil)
		if err == nil && c.Columns != nil {
			err = checkTable(ctx, dir, c.Table, branch, v, c.Rows, c.Columns)
		}
		if err == nil && c.Meta != nil {
			err = checkMeta(ctx, dir, c.Table, branch, v, c.Meta, c.Ordered)
		}
		s.add("go-reads-node/"+c.Name, err)
	}
}
