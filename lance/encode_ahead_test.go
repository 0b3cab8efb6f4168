package lance

import (
	"context"
	"slices"
	"testing"
)

// Rows encoded ahead on one version stage, as they are, on a later version of the same
// schema (here past a delete and a compaction-free append), and read back as the rows.
func TestEncodedAheadStagesOnALaterVersion(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.EncodeAhead(rows(100, 101, 102), StageOptions{}.FileOptions)
	if err != nil {
		t.Fatal(err)
	}
	if e.Bytes() == 0 || len(e.DataFiles()) != 1 {
		t.Fatalf("encoded %d bytes in %v", e.Bytes(), e.DataFiles())
	}
	s, err := d.StageAppend(ctx, rows(10, 11), StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageDelete(ctx, In("id", 3), StageOptions{})
	d = commit(t, d, s, err)

	st, ok := d.StageInsertOnlyUpdateEncoded(e, StageOptions{Properties: map[string]string{InsertAbsenceProperty: "v1"}})
	if !ok {
		t.Fatal("rows encoded for this schema were refused")
	}
	d = commit(t, d, st, nil)
	want := append(append(seq(0, 3), seq(4, 12)...), 100, 101, 102)
	eqIDs(t, scanIDs(t, d), want)
	last := d.Manifest().Fragments[len(d.Manifest().Fragments)-1]
	if !slices.Equal([]string{last.Files[0].Path}, e.DataFiles()) {
		t.Fatalf("the commit wrote %s, not the file encoded ahead %v", last.Files[0].Path, e.DataFiles())
	}
}

// A table with another schema (here: the same fields, read again from storage, which is not
// known to be the same) refuses rows encoded ahead, and nothing is staged.
func TestEncodedAheadRefusedForAnotherSchema(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 3)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.EncodeAhead(rows(7), StageOptions{}.FileOptions)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := again.StageInsertOnlyUpdateEncoded(e, StageOptions{}); ok || s != nil {
		t.Fatal("rows encoded for another schema were staged")
	}
	if s, ok := again.StageInsertOnlyUpdateEncoded(nil, StageOptions{}); ok || s != nil {
		t.Fatal("nothing encoded was staged")
	}
}

// The same schema under another declared data file version refuses them too.
func TestEncodedAheadRefusedForAnotherFileVersion(t *testing.T) {
	d, err := Create(context.Background(), memStore(t), testSchema(t), rows(seq(0, 3)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.EncodeAhead(rows(7), StageOptions{}.FileOptions)
	if err != nil {
		t.Fatal(err)
	}
	older := *d
	m := *d.manifest
	m.DataVersion = "2.1"
	older.manifest = &m
	if s, ok := older.StageInsertOnlyUpdateEncoded(e, StageOptions{}); ok || s != nil {
		t.Fatal("rows encoded as 2.2 files were staged on a 2.1 table")
	}
}
