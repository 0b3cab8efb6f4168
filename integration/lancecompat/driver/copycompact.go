package main

import (
	"context"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/integration/lancecompat/canon"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// Compaction by page copy: tables of small fragments appended without deletions, compacted
// by Go, which at 2.1 and 2.2 copies the files' encoded pages into the new files instead of
// decoding the rows (and decodes at 2.0). The official engine must read the copied files:
// every type of the all-types table, and a stable-row-id table's rows, row ids and versions.

// checkCopied refuses a compaction that did not take the way the round's version implies.
func checkCopied(m *goModel, c *lance.Compaction) error {
	copies := m.fileVersion != file.V2_0
	if copies && (c.FragmentsCopied() == 0 || c.FragmentsCopied() != c.FragmentsAdded()) || !copies && c.FragmentsCopied() != 0 {
		return fmt.Errorf("version %s: %d of %d new fragments copied", m.fileVersion, c.FragmentsCopied(), c.FragmentsAdded())
	}
	return nil
}

// writeGoCopied writes gcopied (plain schema, lists; rows, row ids and versions checked) and
// gtypescopied (every type the official engines write).
func writeGoCopied(ctx context.Context, m *goModel, dir string) error {
	if err := writeCopiedPlain(ctx, m, dir); err != nil {
		return fmt.Errorf("gcopied: %w", err)
	}
	if err := writeCopiedTypes(ctx, m, dir); err != nil {
		return fmt.Errorf("gtypescopied: %w", err)
	}
	return nil
}

func writeCopiedPlain(ctx context.Context, m *goModel, dir string) error {
	const t = "gcopied"
	st, as, ls, err := plainTable(ctx, m, dir, t)
	if err != nil {
		return err
	}
	// Pages of 7 rows: the copied pages' priorities are moved by the rows before them.
	fo := lance.StageOptions{FileOptions: file.Options{MaxPageRows: 7}}
	rows := rowsRange(plainRow, 0, 40)
	d, err := lance.Create(ctx, st, ls, rec(as, rows), m.createOptions(lance.CreateOptions{Stage: fo}))
	if err != nil {
		return err
	}
	for i := 0; i < 9; i++ {
		add := rowsRange(plainRow, 40+13*i, 53+13*i)
		s, err := d.StageAppend(ctx, rec(as, add), fo)
		if err != nil {
			return err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return err
		}
		rows = concat(rows, add)
	}
	if err := m.recordMeta(ctx, t, d, rows); err != nil {
		return err
	}
	pre, preMeta := d, m.meta[t]
	s, c, err := d.StageCompaction(ctx, lance.CompactionOptions{TargetRowsPerFragment: 100}, fo)
	if err != nil || s == nil {
		return fmt.Errorf("stage compaction: %v (staged %v)", err, s != nil)
	}
	if d, err = d.Commit(ctx, s); err != nil {
		return err
	}
	if err := checkCopied(m, c); err != nil {
		return err
	}
	if d.NumFragments() >= pre.NumFragments() {
		return fmt.Errorf("compaction left %d fragments of %d", d.NumFragments(), pre.NumFragments())
	}
	if err := m.recordMeta(ctx, t, d, rows); err != nil {
		return err
	}
	if err := sameMeta(preMeta, m.meta[t]); err != nil {
		return fmt.Errorf("compaction changed row ids or versions: %w", err)
	}
	return checkDiff(ctx, d, pre, nil, nil)
}

func writeCopiedTypes(ctx context.Context, m *goModel, dir string) error {
	const t = "gtypescopied"
	as, small := allTypesSchema(), smallPages
	d, rows, err := createAllTypes(ctx, m, dir, t)
	if err != nil {
		return err
	}
	for _, r := range [][2]int{{20, 27}, {27, 41}, {41, 44}} {
		add := rowsRange(allTypesRow, r[0], r[1])
		s, err := d.StageAppend(ctx, rec(as, add), small)
		if err != nil {
			return err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return err
		}
		rows = concat(rows, add)
	}
	ids := make([]uint64, 0, d.NumFragments())
	for _, f := range d.Manifest().Fragments {
		ids = append(ids, f.ID)
	}
	s, c, err := d.StageCompaction(ctx, lance.CompactionOptions{Fragments: ids}, small)
	if err != nil || s == nil {
		return fmt.Errorf("stage compaction: %v (staged %v)", err, s != nil)
	}
	if d, err = d.Commit(ctx, s); err != nil {
		return err
	}
	if err := checkCopied(m, c); err != nil {
		return err
	}
	if d.NumFragments() != 1 {
		return fmt.Errorf("compaction left %d fragments", d.NumFragments())
	}
	m.record(t, "", d.Version(), append([]canon.Row(nil), rows...), allTypesFilters, []string{"id", "ls", "vec", "ls_i64", "ts"})
	return nil
}
