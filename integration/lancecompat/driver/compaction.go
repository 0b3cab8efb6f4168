package main

// Compaction of stable-row-id tables across the two engines: a Rewrite written by the Go
// package must keep every row, its stable row id (_rowid) and its versions
// (_row_created_at_version, _row_last_updated_at_version) for the official engine, which then
// writes on top; the official engine's compaction (lancedb optimize) must read back the same
// way in Go; and DiffFrom across either must report exactly the logical changes.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/integration/lancecompat/canon"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
)

var metaCols = []string{lance.RowIDColumn, lance.RowCreatedAtColumn, lance.RowLastUpdatedAtColumn}

// readWithMeta scans d in order and splits each row into its data and its meta row
// ({id, _rowid, _row_created_at_version, _row_last_updated_at_version}).
func readWithMeta(ctx context.Context, d *lance.Dataset) (rows, meta []canon.Row, err error) {
	recs, err := d.ReadAll(ctx, lance.ScanOptions{WithRowID: true, WithRowVersions: true})
	if err != nil {
		return nil, nil, err
	}
	all, err := canon.Rows(recs)
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		return nil, nil, err
	}
	for _, r := range all {
		mr := canon.Row{"id": r["id"]}
		for _, c := range metaCols {
			mr[c] = r[c]
			delete(r, c)
		}
		rows, meta = append(rows, r), append(meta, mr)
	}
	return rows, meta, nil
}

// sameMeta compares row ids and versions row by row, in scan order.
func sameMeta(want, got []canon.Row) error {
	if len(want) != len(got) {
		return fmt.Errorf("meta: %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		for _, c := range append([]string{"id"}, metaCols...) {
			if fmt.Sprint(want[i][c]) != fmt.Sprint(got[i][c]) {
				return fmt.Errorf("meta: row %d (id %v) %s = %v, want %v", i, got[i]["id"], c, got[i][c], want[i][c])
			}
		}
	}
	return nil
}

// sameRowsInOrder compares rows (values and order of ids).
func sameRowsInOrder(want, got []canon.Row) error {
	if diff := canon.Diff(want, got); diff != "" {
		return fmt.Errorf("%s", diff)
	}
	for i := range want {
		if want[i]["id"] != got[i]["id"] {
			return fmt.Errorf("scan order: row %d is id %v, want %v", i, got[i]["id"], want[i]["id"])
		}
	}
	return nil
}

func metaRow(id string, rowID, created, updated uint64) canon.Row {
	return canon.Row{"id": id, lance.RowIDColumn: strconv.FormatUint(rowID, 10),
		lance.RowCreatedAtColumn: strconv.FormatUint(created, 10), lance.RowLastUpdatedAtColumn: strconv.FormatUint(updated, 10)}
}

// keysAt lists the ids of d's rows at the given addresses or in the given fragments, sorted.
func keysAt(ctx context.Context, d *lance.Dataset, addrs []lance.RowAddress, frags []uint64) ([]int64, error) {
	want := map[lance.RowAddress]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	var out []int64
	err := d.Each(ctx, lance.ScanOptions{Columns: []string{"id"}, WithRowAddress: true}, func(r arrow.Record) error {
		ids, as := r.Column(0).(*array.Int64), r.Column(1).(*array.Uint64)
		for i := 0; i < int(r.NumRows()); i++ {
			a := lance.RowAddress(as.Value(i))
			if want[a] || slices.Contains(frags, a.Fragment()) {
				out = append(out, ids.Value(i))
				delete(want, a)
			}
		}
		return nil
	})
	if err == nil && len(want) > 0 {
		err = fmt.Errorf("%d diff addresses are not live rows of version %d", len(want), d.Version())
	}
	slices.Sort(out)
	return out, err
}

// checkDiff checks that d.DiffFrom(older) removes and adds exactly the given ids.
func checkDiff(ctx context.Context, d, older *lance.Dataset, removed, added []int64) error {
	diff, err := d.DiffFrom(ctx, older)
	if err != nil {
		return err
	}
	gotRemoved, err := keysAt(ctx, older, diff.Removed, nil)
	if err != nil {
		return err
	}
	gotAdded, err := keysAt(ctx, d, diff.NewRows, diff.NewFragments)
	if err != nil {
		return err
	}
	slices.Sort(removed)
	slices.Sort(added)
	if !slices.Equal(gotRemoved, removed) || !slices.Equal(gotAdded, added) {
		return fmt.Errorf("diff v%d..v%d: removed %v, added %v; want removed %v, added %v", older.Version(), d.Version(), gotRemoved, gotAdded, removed, added)
	}
	return nil
}

// recordMeta records the latest version of a stable-row-id table with its rows and meta.
func (m *goModel) recordMeta(ctx context.Context, t string, d *lance.Dataset, want []canon.Row) error {
	rows, meta, err := readWithMeta(ctx, d)
	if err != nil {
		return err
	}
	if err := sameRowsInOrder(want, rows); err != nil {
		return fmt.Errorf("v%d: %w", d.Version(), err)
	}
	m.record(t, "", d.Version(), rows, plainFilters, nil)
	c := &m.cases[len(m.cases)-1]
	c.Meta, c.Ordered = meta, true
	m.version[t], m.meta[t] = d.Version(), meta
	return nil
}

// growStable appends small fragments to a stable-row-id table, with deletes and upserts in
// between, tracking the expected rows in scan order.
func growStable(ctx context.Context, m *goModel, t string, d *lance.Dataset, rows []canon.Row, next, steps int, fo lance.StageOptions) (*lance.Dataset, []canon.Row, error) {
	as := m.sch[t]
	commit := func(s *lance.Staged, err error) error {
		if err != nil {
			return err
		}
		d, err = d.Commit(ctx, s)
		return err
	}
	for i := 0; i < steps; i++ {
		n := 1 + i%3
		if err := commit(d.StageAppend(ctx, rec(as, rowsRange(plainRow, next, next+n)), fo)); err != nil {
			return nil, nil, err
		}
		rows = concat(rows, rowsRange(plainRow, next, next+n))
		next += n
		switch i % 5 {
		case 1: // the row just appended and an early one
			early, _ := strconv.Atoi(rows[i%len(rows)]["id"].(string))
			if err := commit(d.StageDelete(ctx, lance.In("id", next-1, early), fo)); err != nil {
				return nil, nil, err
			}
			rows = without(rows, next-1, early)
		case 3: // an upsert moves the row to a new fragment at the end, with a new row id
			id, _ := strconv.Atoi(rows[len(rows)/3]["id"].(string))
			changed := plainRow(id)
			changed["name"] = fmt.Sprintf("upserted-%d", id)
			if err := commit(d.StageUpsert(ctx, "id", rec(as, []canon.Row{changed}), fo)); err != nil {
				return nil, nil, err
			}
			rows = concat(without(rows, id), []canon.Row{changed})
		}
	}
	return d, rows, nil
}

// writeGoStable: the Go package builds a stable-row-id table of many small fragments with
// deletions and upserts, and compacts it. Both versions are recorded with their row ids and
// versions, which must be equal (the official engine checks both).
func writeGoStable(ctx context.Context, m *goModel, dir string) error {
	const t = "gstable"
	st, as, ls, err := plainTable(ctx, m, dir, t)
	if err != nil {
		return err
	}
	fo := lance.StageOptions{FileOptions: file.Options{MaxPageRows: 5}}
	rows := rowsRange(plainRow, 0, 200) // one large fragment that the deletes below thin out
	d, err := lance.Create(ctx, st, ls, rec(as, rows), m.createOptions(lance.CreateOptions{Stage: fo}))
	if err != nil {
		return err
	}
	if d, rows, err = growStable(ctx, m, t, d, rows, 200, 45, fo); err != nil {
		return err
	}
	if err := m.recordMeta(ctx, t, d, rows); err != nil {
		return err
	}
	pre, preMeta := d, m.meta[t]
	// A small target and threshold: the thinned-out large fragment is rewritten too, into
	// several fragments whose row id sequences mix ranges, ranges with holes and arrays.
	s, c, err := d.StageCompaction(ctx, lance.CompactionOptions{TargetRowsPerFragment: 64, MaterializeDeletionsThreshold: 0.02}, fo)
	if err != nil || s == nil {
		return fmt.Errorf("stage compaction: %v (staged %v)", err, s != nil)
	}
	if d, err = d.Commit(ctx, s); err != nil {
		return err
	}
	if d.NumFragments() >= pre.NumFragments() || c.FragmentsRemoved() < 20 {
		return fmt.Errorf("compaction: %d fragments from %d (%d removed, %d added)", d.NumFragments(), pre.NumFragments(), c.FragmentsRemoved(), c.FragmentsAdded())
	}
	if err := m.recordMeta(ctx, t, d, rows); err != nil {
		return err
	}
	if err := sameMeta(preMeta, m.meta[t]); err != nil {
		return fmt.Errorf("compaction changed row ids or versions: %w", err)
	}
	return checkDiff(ctx, d, pre, nil, nil)
}

// writeGoForOfficial: a stable-row-id table for the official engine to compact: one large
// fragment with a third of its rows deleted (so lance's rewritten row id sequences are not
// plain ranges), small appended fragments, an upsert.
func writeGoForOfficial(ctx context.Context, m *goModel, dir string) error {
	const t = "gofficial"
	st, as, ls, err := plainTable(ctx, m, dir, t)
	if err != nil {
		return err
	}
	rows := rowsRange(plainRow, 0, 300)
	d, err := lance.Create(ctx, st, ls, rec(as, rows), m.createOptions(lance.CreateOptions{}))
	if err != nil {
		return err
	}
	if d, rows, err = growStable(ctx, m, t, d, rows, 300, 12, lance.StageOptions{}); err != nil {
		return err
	}
	var gone []any
	var goneInts []int
	for i := 0; i < 300; i += 3 {
		gone, goneInts = append(gone, i), append(goneInts, i)
	}
	s, err := d.StageDelete(ctx, lance.In("id", gone...), lance.StageOptions{})
	if err != nil {
		return err
	}
	if d, err = d.Commit(ctx, s); err != nil {
		return err
	}
	return m.recordMeta(ctx, t, d, without(rows, goneInts...))
}

func idOf(r canon.Row) int {
	id, _ := strconv.Atoi(r["id"].(string))
	return id
}

// stableMutations are the official engine's steps on the Go-compacted table (append, delete,
// update, then its own compaction) and on the table left for it to compact.
func stableMutations(m *goModel) []mutateStep {
	rows := m.rows[key("gstable", "")]
	a, b, z := idOf(rows[1]), idOf(rows[len(rows)/2]), idOf(rows[3])
	return []mutateStep{
		{Name: "gstable-append", Table: "gstable", Op: "append", Rows: rowsRange(plainRow, 7000, 7002)},
		{Name: "gstable-delete", Table: "gstable", Op: "delete", Where: fmt.Sprintf("id = %d OR id = %d", a, b)},
		{Name: "gstable-update", Table: "gstable", Op: "update", Where: fmt.Sprintf("id = %d", z), Values: map[string]string{"name": "'node-updated'"}},
		{Name: "gstable-optimize", Table: "gstable", Op: "optimize"},
		{Name: "gofficial-optimize", Table: "gofficial", Op: "optimize"},
	}
}

// checkStableAfterNode reads what the official engine made of the Go-compacted table: the
// rows, row ids and versions each of its steps implies, and the logical diff across its
// compaction.
func checkStableAfterNode(ctx context.Context, dir string, m *goModel) error {
	const t = "gstable"
	_, d, err := openDataset(ctx, dir, t, "", 0)
	if err != nil {
		return err
	}
	post := m.version[t]
	older, err := d.Checkout(ctx, post)
	if err != nil {
		return err
	}
	if d.Version() != post+5 { // append, delete, update, reserve fragments, rewrite
		return fmt.Errorf("version %d, want %d", d.Version(), post+5)
	}
	if tx, err := d.ReadTransaction(ctx, d.Version()); err != nil || tx.Op.Kind != lance.OpRewrite || len(tx.Op.Groups) == 0 {
		return fmt.Errorf("the official compaction's transaction: %v", err)
	}
	rows := m.rows[key(t, "")]
	a, b, z := idOf(rows[1]), idOf(rows[len(rows)/2]), idOf(rows[3])
	updated := rows[3]
	updated = canon.Row{"id": updated["id"], "name": "node-updated", "age": updated["age"], "score": updated["score"], "tags": updated["tags"]}
	wantRows := concat(without(rows, a, b, z), rowsRange(plainRow, 7000, 7002), []canon.Row{updated})
	next := older.Manifest().NextRowID
	var wantMeta []canon.Row
	var zMeta canon.Row
	for _, r := range m.meta[t] {
		switch idOf(r) {
		case a, b:
		case z:
			zMeta = canon.Row{"id": r["id"], lance.RowIDColumn: r[lance.RowIDColumn], lance.RowCreatedAtColumn: r[lance.RowCreatedAtColumn],
				lance.RowLastUpdatedAtColumn: strconv.FormatUint(post+3, 10)}
		default:
			wantMeta = append(wantMeta, r)
		}
	}
	wantMeta = append(wantMeta, metaRow("7000", next, post+1, post+1), metaRow("7001", next+1, post+1, post+1), zMeta)
	gotRows, gotMeta, err := readWithMeta(ctx, d)
	if err != nil {
		return err
	}
	if err := sameRowsInOrder(wantRows, gotRows); err != nil {
		return err
	}
	if err := sameMeta(wantMeta, gotMeta); err != nil {
		return err
	}
	return checkDiff(ctx, d, older, []int64{int64(a), int64(b), int64(z)}, []int64{7000, 7001, int64(z)})
}

// checkOfficialCompaction reads the Go-written table the official engine compacted (same rows,
// row ids and versions; an empty diff), then appends, deletes and compacts it again in Go,
// and has the official engine read that back.
func checkOfficialCompaction(ctx context.Context, s *suite, dir string, m *goModel) error {
	const t = "gofficial"
	_, d, err := openDataset(ctx, dir, t, "", 0)
	if err != nil {
		return err
	}
	pre := m.version[t]
	older, err := d.Checkout(ctx, pre)
	if err != nil {
		return err
	}
	if tx, err := d.ReadTransaction(ctx, d.Version()); err != nil || tx.Op.Kind != lance.OpRewrite || len(tx.Op.Groups) == 0 {
		return fmt.Errorf("the official compaction's transaction: %v", err)
	}
	if d.NumFragments() >= older.NumFragments() {
		return fmt.Errorf("official compaction left %d fragments of %d", d.NumFragments(), older.NumFragments())
	}
	rows, meta, err := readWithMeta(ctx, d)
	if err != nil {
		return err
	}
	if err := sameRowsInOrder(m.rows[key(t, "")], rows); err != nil {
		return err
	}
	if err := sameMeta(m.meta[t], meta); err != nil {
		return err
	}
	if err := checkDiff(ctx, d, older, nil, nil); err != nil {
		return err
	}

	// Go writes on top: appends, a delete, and its own compaction of the official fragments.
	compacted := d
	commit := func(s *lance.Staged, err error) error {
		if err != nil {
			return err
		}
		d, err = d.Commit(ctx, s)
		return err
	}
	as := m.sch[t]
	next := d.Manifest().NextRowID
	for i := 0; i < 3; i++ {
		if err := commit(d.StageAppend(ctx, rec(as, rowsRange(plainRow, 8000+i, 8001+i)), lance.StageOptions{})); err != nil {
			return err
		}
	}
	victim := idOf(rows[5])
	if err := commit(d.StageDelete(ctx, lance.In("id", victim, 8001), lance.StageOptions{})); err != nil {
		return err
	}
	staged, c, err := d.StageCompaction(ctx, lance.CompactionOptions{}, lance.StageOptions{})
	if err != nil || staged == nil {
		return fmt.Errorf("compaction after the official one: %v", err)
	}
	if err := commit(staged, nil); err != nil {
		return err
	}
	if d.NumFragments() != 1 || c.FragmentsRemoved() < 3 {
		return fmt.Errorf("go compaction left %d fragments (%d removed)", d.NumFragments(), c.FragmentsRemoved())
	}
	v0 := compacted.Version()
	wantRows := concat(without(rows, victim), rowsRange(plainRow, 8000, 8001), rowsRange(plainRow, 8002, 8003))
	var wantMeta []canon.Row
	for _, r := range meta {
		if idOf(r) != victim {
			wantMeta = append(wantMeta, r)
		}
	}
	wantMeta = append(wantMeta, metaRow("8000", next, v0+1, v0+1), metaRow("8002", next+2, v0+3, v0+3))
	gotRows, gotMeta, err := readWithMeta(ctx, d)
	if err != nil {
		return err
	}
	if err := sameRowsInOrder(wantRows, gotRows); err != nil {
		return err
	}
	if err := sameMeta(wantMeta, gotMeta); err != nil {
		return err
	}
	if err := checkDiff(ctx, d, compacted, []int64{int64(victim)}, []int64{8000, 8002}); err != nil {
		return err
	}
	v := d.Version()
	return verifyByNode(ctx, s, dir, "gofficial-recompacted", t, verifyCase{Name: "gofficial-recompacted", Table: t, Version: &v,
		Count: len(wantRows), Rows: wantRows, Meta: wantMeta, Ordered: true}, nil)
}

// verifyByNode has the official engine verify one case (and then run steps, if any) on a table
// linked into a directory of its own.
func verifyByNode(ctx context.Context, s *suite, dir, sub, table string, c verifyCase, steps []mutateStep) error {
	subDir := filepath.Join(dir, sub)
	if err := os.MkdirAll(subDir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(filepath.Join(dir, table+".lance"))
	if err != nil {
		return err
	}
	if err := os.Symlink(abs, filepath.Join(subDir, table+".lance")); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(subDir, "cases.json"), map[string]any{"cases": []verifyCase{c}}); err != nil {
		return err
	}
	if err := s.runNode(ctx, "node-reads-"+sub+"/", "verify", subDir); err != nil {
		return err
	}
	if len(steps) == 0 {
		return nil
	}
	if err := writeJSON(filepath.Join(subDir, "mutate.json"), map[string]any{"steps": steps}); err != nil {
		return err
	}
	return s.runNode(ctx, "node-mutates-"+sub+"/", "mutate", subDir)
}

// goCompactsNode: the official engine wrote ocompact one small fragment at a time, with
// deletes and updates; the Go package compacts it (rows, row ids, versions and order kept, old
// addresses remapped, an empty diff), the official engine reads the result, appends and
// compacts it again, and Go reads that.
func goCompactsNode(ctx context.Context, s *suite, dir string) {
	s.add("go-compacts-node/ocompact", func() error {
		b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
		if err != nil {
			return err
		}
		var cs struct {
			Cases []verifyCase `json:"cases"`
		}
		if err := json.Unmarshal(b, &cs); err != nil {
			return err
		}
		var c *verifyCase
		for i := range cs.Cases {
			if cs.Cases[i].Table == "ocompact" {
				c = &cs.Cases[i]
			}
		}
		if c == nil || c.Meta == nil || c.Version == nil {
			return fmt.Errorf("no ocompact case with row meta in cases.json")
		}
		st, d, err := openDataset(ctx, dir, "ocompact", "", 0)
		if err != nil {
			return err
		}
		if d.Version() != *c.Version {
			return fmt.Errorf("latest version %d, case says %d", d.Version(), *c.Version)
		}
		before := map[string]lance.RowAddress{}
		if err := d.Each(ctx, lance.ScanOptions{Columns: []string{"id"}, WithRowAddress: true}, func(r arrow.Record) error {
			for i := 0; i < int(r.NumRows()); i++ {
				before[strconv.FormatInt(r.Column(0).(*array.Int64).Value(i), 10)] = lance.RowAddress(r.Column(1).(*array.Uint64).Value(i))
			}
			return nil
		}); err != nil {
			return err
		}
		staged, comp, err := d.StageCompaction(ctx, lance.CompactionOptions{TargetRowsPerFragment: 16}, lance.StageOptions{})
		if err != nil || staged == nil {
			return fmt.Errorf("stage compaction: %v", err)
		}
		nd, err := d.Commit(ctx, staged)
		if err != nil {
			return err
		}
		if nd.NumFragments() >= d.NumFragments() {
			return fmt.Errorf("compaction left %d fragments of %d", nd.NumFragments(), d.NumFragments())
		}
		rows, meta, err := readWithMeta(ctx, nd)
		if err != nil {
			return err
		}
		if err := sameRowsInOrder(c.Rows, rows); err != nil {
			return err
		}
		if err := sameMeta(c.Meta, meta); err != nil {
			return err
		}
		if err := checkDiff(ctx, nd, d, nil, nil); err != nil {
			return err
		}
		remap, err := comp.Remap(nd)
		if err != nil {
			return err
		}
		moved := 0
		err = nd.Each(ctx, lance.ScanOptions{Columns: []string{"id"}, WithRowAddress: true}, func(r arrow.Record) error {
			for i := 0; i < int(r.NumRows()); i++ {
				id := strconv.FormatInt(r.Column(0).(*array.Int64).Value(i), 10)
				now := lance.RowAddress(r.Column(1).(*array.Uint64).Value(i))
				got, ok := remap(before[id])
				if ok {
					moved++
				}
				if (ok && got != now) || (!ok && before[id] != now) {
					return fmt.Errorf("id %s: remapped to %v (moved %v), lives at %v", id, got, ok, now)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if uint64(moved) != comp.RowsRewritten() {
			return fmt.Errorf("%d rows moved, compaction says %d", moved, comp.RowsRewritten())
		}

		// The official engine reads the compacted version, appends and compacts on top.
		v := nd.Version()
		steps := []mutateStep{
			{Name: "ocompact-append-after-go", Table: "ocompact", Op: "append", Rows: []canon.Row{{"id": "9000", "name": "after-go", "val": 1.25}}},
			{Name: "ocompact-optimize-after-go", Table: "ocompact", Op: "optimize"},
		}
		if err := verifyByNode(ctx, s, dir, "go-compacted", "ocompact", verifyCase{Name: "ocompact-go-compacted", Table: "ocompact", Version: &v,
			Count: len(c.Rows), Rows: c.Rows, Meta: c.Meta, Ordered: true}, steps); err != nil {
			return err
		}
		last, err := lance.Open(ctx, st)
		if err != nil {
			return err
		}
		if last.Version() != v+3 || last.NumFragments() != 1 {
			return fmt.Errorf("after the official append and compaction: version %d (want %d), %d fragments", last.Version(), v+3, last.NumFragments())
		}
		rows, meta, err = readWithMeta(ctx, last)
		if err != nil {
			return err
		}
		wantRows := concat(c.Rows, []canon.Row{{"id": "9000", "name": "after-go", "val": 1.25}})
		wantMeta := concat(c.Meta, []canon.Row{metaRow("9000", nd.Manifest().NextRowID, v+1, v+1)})
		if err := sameRowsInOrder(wantRows, rows); err != nil {
			return err
		}
		if err := sameMeta(wantMeta, meta); err != nil {
			return err
		}
		return checkDiff(ctx, last, nd, nil, []int64{9000})
	}())
}
