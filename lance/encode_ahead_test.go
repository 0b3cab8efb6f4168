package lance

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
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

// dataFiles lists the data files in st.
func dataFiles(t *testing.T, st storage.Store) []string {
	t.Helper()
	objs, err := st.List(context.Background(), "data/")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, strings.TrimPrefix(o.Key, "data/"))
	}
	slices.Sort(out)
	return out
}

// Files written ahead are in storage before any commit, the commit that stages them writes no
// data file of its own and names them, and a second staging, or a Discard after the commit,
// leaves them alone.
func TestEncodedWrittenAheadStagesWithoutWriting(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.EncodeAhead(rows(100, 101), StageOptions{}.FileOptions)
	if err != nil {
		t.Fatal(err)
	}
	before := dataFiles(t, st)
	if err := e.WriteAhead(ctx); err != nil {
		t.Fatal(err)
	}
	if e.WrittenAt().IsZero() {
		t.Fatal("WrittenAt is zero after WriteAhead")
	}
	written := dataFiles(t, st)
	if len(written) != len(before)+1 || !slices.Contains(written, e.DataFiles()[0]) {
		t.Fatalf("data files %v after writing %v ahead (before: %v)", written, e.DataFiles(), before)
	}
	s, err := d.StageAppend(ctx, rows(10), StageOptions{})
	d = commit(t, d, s, err)
	staged, ok := d.StageInsertOnlyUpdateEncoded(e, StageOptions{Properties: map[string]string{InsertAbsenceProperty: "v1"}})
	if !ok {
		t.Fatal("rows written ahead were refused")
	}
	if len(staged.files) != 0 {
		t.Fatalf("the staging of files written ahead would write %d files again", len(staged.files))
	}
	if again, ok := d.StageInsertOnlyUpdateEncoded(e, StageOptions{}); ok || again != nil {
		t.Fatal("files written ahead were staged twice")
	}
	d = commit(t, d, staged, nil)
	e.Discard(ctx) // claimed by the commit: nothing to remove
	eqIDs(t, scanIDs(t, d), append(seq(0, 11), 100, 101))
	if got := dataFiles(t, st); len(got) != len(written)+1 {
		t.Fatalf("data files %v: want the %d written ahead and the append's", got, len(written))
	}
}

// Discard removes files written ahead that no staging claimed; files written into one
// directory are refused by a table in another.
func TestEncodedWrittenAheadDiscardedAndRefusedElsewhere(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	other, err := storage.Open(ctx, "mem://"+t.Name()+"-other")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 3)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := Create(ctx, other, d.Schema(), rows(seq(0, 3)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.DeletePrefix(ctx, ""); other.Close() })
	before := dataFiles(t, st)
	e, err := d.EncodeAhead(rows(7), StageOptions{}.FileOptions)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.WriteAhead(ctx); err != nil {
		t.Fatal(err)
	}
	// Same schema pointer, other directory: the files are not there.
	elsewhere.manifest.Schema = d.manifest.Schema
	if s, ok := elsewhere.StageInsertOnlyUpdateEncoded(e, StageOptions{}); ok || s != nil {
		t.Fatal("files written into one table's directory were staged on another's")
	}
	e.Discard(ctx)
	if got := dataFiles(t, st); !slices.Equal(got, before) {
		t.Fatalf("data files %v after Discard, want %v", got, before)
	}
	if s, ok := d.StageInsertOnlyUpdateEncoded(e, StageOptions{}); ok || s != nil {
		t.Fatal("discarded files were staged")
	}
}

// A write ahead that fails leaves nothing in storage and the rows unwritten, so that the
// commit that stages them writes them itself.
func TestEncodedWriteAheadFailureLeavesItToTheCommit(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 3)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := dataFiles(t, st)
	e, err := d.EncodeAhead(rows(7), StageOptions{}.FileOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(FailpointWriteAhead, "1*error"); err != nil {
		t.Fatal(err)
	}
	if err := e.WriteAhead(ctx); !failpoint.IsInjected(err) {
		t.Fatalf("WriteAhead: %v, want the injected error", err)
	}
	if !e.WrittenAt().IsZero() || !slices.Equal(dataFiles(t, st), before) {
		t.Fatalf("a failed write ahead left written=%v, data files %v", e.WrittenAt(), dataFiles(t, st))
	}
	s, ok := d.StageInsertOnlyUpdateEncoded(e, StageOptions{Properties: map[string]string{InsertAbsenceProperty: "v1"}})
	if !ok || len(s.files) != 1 {
		t.Fatalf("staged %v with %d files to write, want the one encoded", ok, len(s.files))
	}
	d = commit(t, d, s, nil)
	eqIDs(t, scanIDs(t, d), append(seq(0, 3), 7))
}

// Rows encoded and written ahead replace rows of a later version: the staging masks the rows
// at the addresses with a deletion file, writes only that, and names the files written ahead
// as the new fragment. A staging whose deletion files cannot be made leaves the files
// unclaimed for Discard, and one on another schema stages nothing.
func TestEncodedWrittenAheadRewritesRows(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// One fragment, its rows at their ids' offsets.
	at := func(id int) RowAddress { return RowAddress(uint64(id)) }
	e, err := d.EncodeAhead(rows(3, 6, 50), StageOptions{}.FileOptions)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.WriteAhead(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(10), StageOptions{})
	d = commit(t, d, s, err)

	again, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok, err := again.StageRewriteRowsEncoded(ctx, []RowAddress{at(3)}, e, StageOptions{}); ok || s != nil || err != nil {
		t.Fatalf("rows encoded for another schema: staged %v, ok %v, err %v", s != nil, ok, err)
	}
	if s, ok, err := d.StageRewriteRowsEncoded(ctx, []RowAddress{RowAddress(9 << 32)}, e, StageOptions{}); err == nil || !ok || s != nil {
		t.Fatalf("an address in a missing fragment: staged %v, ok %v, err %v", s != nil, ok, err)
	}

	staged, ok, err := d.StageRewriteRowsEncoded(ctx, []RowAddress{at(3), at(6)}, e, StageOptions{})
	if err != nil || !ok {
		t.Fatalf("rows written ahead: ok %v, err %v", ok, err)
	}
	if len(staged.files) != 1 || !strings.HasSuffix(staged.files[0].key, ".arrow") {
		t.Fatalf("the staging would write %d files, want only its deletion file", len(staged.files))
	}
	if s, ok, err := d.StageRewriteRowsEncoded(ctx, nil, e, StageOptions{}); ok || s != nil || err != nil {
		t.Fatal("files written ahead were staged twice")
	}
	old := d.Manifest()
	d = commit(t, d, staged, nil)
	e.Discard(ctx) // claimed by the commit: nothing to remove
	eqIDs(t, scanIDs(t, d), append(seq(0, 11), 50))
	added := d.AddedFragments(old)
	if len(added) != 1 || !slices.Equal([]string{added[0].Files[0].Path}, e.DataFiles()) {
		t.Fatalf("added fragments %+v, want the one written ahead %v", added, e.DataFiles())
	}
}

// A staging that took the files written ahead but was never committed (its load refused after
// the tables staged) does not keep them: Discard removes them, and no staging takes them
// afterwards. Once a commit of such a staging has begun, Discard leaves them.
func TestEncodedWrittenAheadStagedButNotCommittedIsDiscarded(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 3)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, commitToo := range []bool{false, true} {
		e, err := d.EncodeAhead(rows(int64(7+i)), StageOptions{}.FileOptions)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.WriteAhead(ctx); err != nil {
			t.Fatal(err)
		}
		staged, ok := d.StageInsertOnlyUpdateEncoded(e, StageOptions{})
		if !ok {
			t.Fatal("rows written ahead were refused")
		}
		if commitToo {
			d = commit(t, d, staged, nil)
		}
		e.Discard(ctx)
		have, err := st.Exists(ctx, "data/"+e.DataFiles()[0])
		if err != nil || have != commitToo {
			t.Fatalf("committed %v: the file written ahead is in storage: %v (%v)", commitToo, have, err)
		}
		if s, ok := d.StageInsertOnlyUpdateEncoded(e, StageOptions{}); ok || s != nil {
			t.Fatal("files written ahead were staged after Discard")
		}
	}
}
