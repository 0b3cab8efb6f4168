package lance

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/storage"
)

func testIndex(name string, uuid byte, fields []int32, frags ...uint32) Index {
	var x Index
	x.UUID[0], x.UUID[15] = uuid, 0x42
	x.Fields, x.Name, x.DatasetVersion = fields, name, 3
	x.Fragments, x.HasFragments = slices.Clone(frags), true
	if x.Fragments == nil {
		x.Fragments = []uint32{}
	}
	x.Details = &IndexDetails{TypeURL: "/lance.index.pb.BTreeIndexDetails"}
	v, at := int32(0), uint64(1_700_000_000_000)
	x.IndexVersion, x.CreatedAt = &v, &at
	return x
}

func vectorIndex(name string, uuid byte, fields []int32, frags ...uint32) Index {
	x := testIndex(name, uuid, fields, frags...)
	x.Details = &IndexDetails{TypeURL: "/lance.table.VectorIndexDetails", Value: []byte{8, 1}}
	return x
}

func TestPortableRoaringRoundTrip(t *testing.T) {
	sets := [][]uint32{
		{},
		{0},
		{0, 1, 5, 4095},
		seq32(0, 5000),                     // a bitmap container
		{3, 65535, 65536, 131075, 1 << 31}, // several containers
		append(seq32(70000, 75000), math.MaxUint32),
	}
	for _, set := range sets {
		b := encodePortableRoaring(set)
		got, err := decodePortableRoaring(b, math.MaxUint32+1)
		if err != nil {
			t.Fatalf("%d values: %v", len(set), err)
		}
		if len(got) == 0 && len(set) == 0 {
			continue
		}
		if !slices.Equal(got, set) {
			t.Fatalf("%d values: got %d back, first %v", len(set), len(got), got[:min(5, len(got))])
		}
	}
	if n := len(encodePortableRoaring(nil)); n != 8 {
		t.Fatalf("the empty bitmap is %d bytes, want 8 (zero bytes means no bitmap)", n)
	}
}

func seq32(lo, hi uint32) []uint32 {
	var out []uint32
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func TestIndexSectionRoundTrip(t *testing.T) {
	a := testIndex("id_idx", 1, []int32{0}, 0, 1, 2)
	// Fields this package does not know survive a commit as they were.
	a.unknown = protowire.AppendVarint(protowire.AppendTag(nil, 40, protowire.VarintType), 7)
	b := vectorIndex("vec_idx", 2, []int32{1})
	b.HasFragments, b.Fragments = false, nil
	base := uint32(3)
	b.BaseID = &base
	neg := int32(-1)
	b.IndexVersion, b.CreatedAt = &neg, nil
	c := testIndex("empty", 3, nil)
	c.Details = nil
	m := &Manifest{Schema: testSchema(t), Version: 4, Indices: []Index{a, b, c}, DataFormat: DataFormat, DataVersion: "2.2"}
	file := marshalManifestFile(m, []byte{1, 2, 3})
	got, txn, err := parseManifestFile("m", file)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(txn, []byte{1, 2, 3}) {
		t.Fatalf("transaction section %v", txn)
	}
	if !reflect.DeepEqual(got.Indices, m.Indices) {
		t.Fatalf("indices\n%+v\nwant\n%+v", got.Indices, m.Indices)
	}
	if got.Indices[0].Kind() != "BTree" || got.Indices[1].Kind() != "Vector" || !got.Indices[1].IsVector() || got.Indices[2].Kind() != "" {
		t.Fatalf("kinds %q %q %q", got.Indices[0].Kind(), got.Indices[1].Kind(), got.Indices[2].Kind())
	}
	if d := got.Indices[0].Dir(); d != "_indices/01000000-0000-0000-0000-000000000042/" {
		t.Fatalf("dir %s", d)
	}
	// No indices: no section at all, as before.
	m.Indices = nil
	got, _, err = parseManifestFile("m", marshalManifestFile(m, nil))
	if err != nil || got.IndexSection != nil || got.Indices != nil {
		t.Fatalf("no indices: section %v indices %v err %v", got.IndexSection, got.Indices, err)
	}
}

func TestHostileIndexSectionsAreFormatErrors(t *testing.T) {
	m := &Manifest{Schema: testSchema(t), Version: 4, Indices: []Index{testIndex("id_idx", 1, []int32{0}, 0, 1)}, DataFormat: DataFormat, DataVersion: "2.2"}
	good := marshalManifestFile(m, nil)
	pos := int(*m.IndexSection)
	n := int(uint32(good[pos]) | uint32(good[pos+1])<<8)
	cookie := pos + bytes.Index(good[pos:], []byte{0x3a, 0x30, 0, 0})
	for name, mutate := range map[string]func(b []byte){
		"length past the file": func(b []byte) { b[pos+2] = 0xff },
		"bitmap cookie":        func(b []byte) { b[cookie] ^= 0xff },
		"truncated message":    func(b []byte) { b[pos] = byte(n - 3) },
	} {
		b := slices.Clone(good)
		mutate(b)
		_, _, err := parseManifestFile("m", b)
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a *FormatError", name, err)
		}
	}
}

// indexedTable is a stable-row-id table of three fragments (ids 0-9, 10-19, 20-29) with a BTREE
// index on id over fragments 0 and 1, a vector index on name over fragment 0 and an index of
// the same name as the BTREE's over nothing (an empty older delta).
func indexedTable(t *testing.T, name string) *Dataset {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open(ctx, "mem://"+strings.ReplaceAll(t.Name(), "/", "_")+"-"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.DeletePrefix(context.Background(), ""); st.Close() })
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{10, 20}, {20, 30}} {
		s, err := d.StageAppend(ctx, rows(seq(r[0], r[1])...), StageOptions{})
		d = commit(t, d, s, err)
	}
	s, err := d.StageCreateIndex([]Index{testIndex("id_idx", 1, []int32{0}, 0, 1), vectorIndex("name_vec", 2, []int32{1}, 0)}, nil, StageOptions{})
	return commit(t, d, s, err)
}

func indexFrags(d *Dataset) map[string][]uint32 {
	out := map[string][]uint32{}
	for _, x := range d.Indices() {
		out[x.Name] = x.Fragments
	}
	return out
}

func wantFrags(t *testing.T, what string, d *Dataset, want map[string][]uint32) {
	t.Helper()
	if got := indexFrags(d); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: indices cover %v, want %v", what, got, want)
	}
	// What was committed is what a reader finds.
	again, err := d.Checkout(context.Background(), d.Version())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Indices(), d.Indices()) {
		t.Fatalf("%s: read back %+v, committed %+v", what, again.Indices(), d.Indices())
	}
}

func TestIndicesCarriedThroughEveryWrite(t *testing.T) {
	ctx := context.Background()
	d := indexedTable(t, "t1")
	v4 := d.Version()
	wantFrags(t, "created", d, map[string][]uint32{"id_idx": {0, 1}, "name_vec": {0}})

	s, err := d.StageAppend(ctx, rows(seq(30, 35)...), StageOptions{})
	d = commit(t, d, s, err)
	wantFrags(t, "append", d, map[string][]uint32{"id_idx": {0, 1}, "name_vec": {0}})

	s, err = d.StageDelete(ctx, In("id", 3, 12), StageOptions{})
	d = commit(t, d, s, err)
	wantFrags(t, "delete", d, map[string][]uint32{"id_idx": {0, 1}, "name_vec": {0}})

	// An upsert masks the old rows with deletion files and writes them anew: no column of an
	// indexed fragment changes in place, so the indices go on covering those fragments.
	s, err = d.StageUpsert(ctx, "id", rows(4, 31), StageOptions{})
	d = commit(t, d, s, err)
	wantFrags(t, "upsert", d, map[string][]uint32{"id_idx": {0, 1}, "name_vec": {0}})

	// Fragment 0 gone with all its rows: the vector index covers no fragment left and goes,
	// as Lance drops it; the BTREE still covers fragment 1.
	s, err = d.StageDelete(ctx, In("id", 0, 1, 2, 5, 6, 7, 8, 9), StageOptions{})
	d = commit(t, d, s, err)
	wantFrags(t, "delete of the vector index's fragment", d, map[string][]uint32{"id_idx": {0, 1}})
	// A scalar index stays even when every fragment it covers is gone.
	s, err = d.StageDelete(ctx, In("id", 10, 11, 12, 13, 14, 15, 16, 17, 18, 19), StageOptions{})
	d = commit(t, d, s, err)
	if slices.ContainsFunc(d.Manifest().Fragments, func(f Fragment) bool { return f.ID <= 1 }) {
		t.Fatal("fragments 0 and 1 should be gone with all their rows")
	}
	wantFrags(t, "delete of the indexed fragments' rows", d, map[string][]uint32{"id_idx": {0, 1}})

	// Restore takes the restored version's section.
	s, err = d.StageRestore(ctx, v4, StageOptions{})
	d = commit(t, d, s, err)
	wantFrags(t, "restore", d, map[string][]uint32{"id_idx": {0, 1}, "name_vec": {0}})

	// A branch reads its parent's index files where they are.
	b, err := d.CreateBranch(ctx, "feat")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range b.Indices() {
		if x.BaseID == nil {
			t.Fatalf("branch index %s names no base", x.Name)
		}
		st, _, err := b.resolveBase(x.BaseID)
		if err != nil || st.Location(x.Dir()) != d.dir.Location(x.Dir()) {
			t.Fatalf("branch index %s resolves to %v (%v), want the parent's %s", x.Name, st.Location(x.Dir()), err, d.dir.Location(x.Dir()))
		}
	}
	s, err = b.StageAppend(ctx, rows(100), StageOptions{})
	b = commit(t, b, s, err)
	wantFrags(t, "append on a branch", b, map[string][]uint32{"id_idx": {0, 1}, "name_vec": {0}})

	s, err = d.StageOverwrite(ctx, nil, rows(1, 2), StageOptions{})
	d = commit(t, d, s, err)
	wantFrags(t, "overwrite", d, map[string][]uint32{})
}

// An Update that rewrote indexed columns in place takes the fragments it changed out of the
// indices on those columns (Lance's prune of modified fields); others keep them.
func TestUpdateOfModifiedFieldsPrunesCoverage(t *testing.T) {
	xs := []Index{testIndex("id_idx", 1, []int32{0}, 0, 1, 2), testIndex("name_idx", 2, []int32{1}, 0, 1, 2)}
	pruneModifiedFields(xs, []Fragment{{ID: 1}, {ID: 7}}, []uint32{1})
	if fmt.Sprint(xs[0].Fragments, xs[1].Fragments) != "[0 1 2] [0 2]" {
		t.Fatalf("after a rewrite of field 1 in fragment 1: %v %v", xs[0].Fragments, xs[1].Fragments)
	}
	registerMovedRows(xs, []uint64{9}, []uint64{0, 2}, []uint32{1})
	if fmt.Sprint(xs[0].Fragments, xs[1].Fragments) != "[0 1 2 9] [0 2]" {
		t.Fatalf("after rows of fragments 0 and 2 moved to 9 with field 1 changed: %v %v", xs[0].Fragments, xs[1].Fragments)
	}
	registerMovedRows(xs, []uint64{10}, []uint64{5}, nil)
	if xs[0].Covers(10) || xs[1].Covers(10) {
		t.Fatal("rows from an uncovered fragment were registered")
	}
}

func TestCreateIndexReplacesByNameAndRefusesBadIndices(t *testing.T) {
	ctx := context.Background()
	d := indexedTable(t, "t2")
	s, err := d.StageCreateIndex([]Index{testIndex("id_idx", 9, []int32{0}, 0, 1, 2)}, []Index{vectorIndex("name_vec", 2, []int32{1})}, StageOptions{})
	d = commit(t, d, s, err)
	wantFrags(t, "replace and remove", d, map[string][]uint32{"id_idx": {0, 1, 2}})
	if d.Indices()[0].UUID[0] != 9 {
		t.Fatal("the new index did not replace the old one of its name")
	}
	txn, err := d.ReadTransaction(ctx, d.Version())
	if err != nil || txn.Op.Kind != OpCreateIndex || len(txn.Op.NewIndices) != 1 || len(txn.Op.RemovedIndices) != 1 {
		t.Fatalf("transaction %+v %v", txn, err)
	}
	for name, x := range map[string]Index{
		"no name":       testIndex("", 5, []int32{0}, 0),
		"unknown field": testIndex("x", 5, []int32{7}, 0),
		"no bitmap":     func() Index { x := testIndex("x", 5, []int32{0}); x.HasFragments = false; return x }(),
	} {
		_, err := d.StageCreateIndex([]Index{x}, nil, StageOptions{})
		var ie *IndexError
		if !errors.As(err, &ie) || ie.Op != OpCreateIndex {
			t.Errorf("%s: %v, want an *IndexError", name, err)
		}
	}
}

func TestCompactionCarriesIndicesAndNeverSplitsTheirCoverage(t *testing.T) {
	ctx := context.Background()
	d := indexedTable(t, "t3")
	before := scanIDs(t, d)
	// Fragments 0 and 1 (the BTREE's) and 2 (no index) are all small: the planner may merge 0
	// with 1 only if the same indices cover both, which the vector index on 0 forbids; the
	// chosen run 0-2 is cut the same way.
	for _, chosen := range [][]uint64{nil, {0, 1, 2}} {
		s, c, err := d.StageCompaction(ctx, CompactionOptions{TargetRowsPerFragment: 1000, Fragments: chosen}, StageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s != nil {
			t.Fatalf("chosen %v: %d groups, but no two adjacent fragments share their indices", chosen, len(s.Txn.Op.Groups))
		}
		_ = c
	}
	// Drop the vector index: 0 and 1 now share the BTREE, 2 has none.
	s, err := d.StageCreateIndex(nil, []Index{vectorIndex("name_vec", 2, []int32{1})}, StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageAppend(ctx, rows(seq(30, 40)...), StageOptions{})
	d = commit(t, d, s, err)
	s, c, err := d.StageCompaction(ctx, CompactionOptions{TargetRowsPerFragment: 1000}, StageOptions{})
	if err != nil || s == nil {
		t.Fatalf("compaction %v %v", s, err)
	}
	if len(s.Txn.Op.Groups) != 2 || c.FragmentsRemoved() != 4 {
		t.Fatalf("%d groups removing %d fragments, want {0,1} and {2,3}", len(s.Txn.Op.Groups), c.FragmentsRemoved())
	}
	d = commit(t, d, s, nil)
	// The indexed group's new fragment takes the old ones' place in the bitmap.
	indexed := uint32(d.Manifest().Fragments[0].ID) // the first group's, in the old ones' place
	wantFrags(t, "compaction", d, map[string][]uint32{"id_idx": {indexed}})
	eqIDs(t, scanIDs(t, d), append(before, seq(30, 40)...))
}

// CoverageRunStart finds where the fragments before a position stop sharing their coverage,
// whichever index changes it, and fragment ids need not be dense.
func TestCoverageRunStart(t *testing.T) {
	frags := func(ids ...uint64) []Fragment {
		out := make([]Fragment, len(ids))
		for i, id := range ids {
			out[i] = Fragment{ID: id, PhysicalRows: 1}
		}
		return out
	}
	idx := func(covers ...uint32) Index { return Index{Name: "x", Fragments: covers, HasFragments: true} }
	for _, c := range []struct {
		name string
		m    Manifest
		end  int // 0: all the fragments
		want int
	}{
		{"no fragments", Manifest{Indices: []Index{idx(1)}}, 0, 0},
		{"no index", Manifest{Fragments: frags(1, 2, 3)}, 0, 0},
		{"one index over all", Manifest{Fragments: frags(1, 2, 3), Indices: []Index{idx(1, 2, 3)}}, 0, 0},
		{"an index over the older ones", Manifest{Fragments: frags(1, 4, 7, 9), Indices: []Index{idx(1, 4)}}, 0, 2},
		{"the newest covered, an older one not", Manifest{Fragments: frags(1, 2, 3), Indices: []Index{idx(2, 3)}}, 0, 1},
		{"a second index ends it sooner", Manifest{Fragments: frags(1, 2, 3, 4), Indices: []Index{idx(1, 2), idx(1, 2, 3)}}, 0, 3},
		{"the newest alone", Manifest{Fragments: frags(1, 2), Indices: []Index{idx(1)}}, 0, 1},
		{"the run before an older boundary", Manifest{Fragments: frags(1, 2, 3, 4, 5), Indices: []Index{idx(2, 3)}}, 3, 1},
		{"the oldest run", Manifest{Fragments: frags(1, 2, 3, 4, 5), Indices: []Index{idx(2, 3)}}, 1, 0},
	} {
		end := c.end
		if end == 0 {
			end = len(c.m.Fragments)
		}
		if got := c.m.CoverageRunStart(end); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestRewriteRefusesWhatItCannotCarry(t *testing.T) {
	ctx := context.Background()
	// Without stable row ids a rewrite would move rows out from under the index.
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 10)...), CreateOptions{DisableStableRowIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(seq(10, 20)...), StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageCreateIndex([]Index{testIndex("id_idx", 1, []int32{0}, 0)}, nil, StageOptions{})
	d = commit(t, d, s, err)
	group := RewriteGroup{OldFragments: cloneFragments(d.Manifest().Fragments[:2]), NewFragments: []Fragment{{PhysicalRows: 20}}}
	rw := d.newStaged(StageOptions{}, Operation{Kind: OpRewrite, Groups: []RewriteGroup{group}}, nil)
	_, err = d.Commit(ctx, rw)
	var ie *IndexError
	if !errors.As(err, &ie) || ie.Index != "id_idx" || ie.Op != OpRewrite {
		t.Fatalf("non-stable rewrite of an indexed fragment: %v, want an *IndexError naming id_idx", err)
	}
	if latest, _ := d.Latest(ctx); latest.Version() != d.Version() {
		t.Fatal("a refused rewrite committed a version")
	}

	// With stable row ids, a staged rewrite that an index created meanwhile covers in part can
	// no longer move onto the new version.
	d = indexedTable(t, "t4")
	s, err = d.StageCreateIndex(nil, []Index{vectorIndex("name_vec", 2, []int32{1})}, StageOptions{})
	d = commit(t, d, s, err)
	staged, _, err := d.StageCompaction(ctx, CompactionOptions{TargetRowsPerFragment: 1000, Fragments: []uint64{0, 1}}, StageOptions{InlineTransactionOnly: true})
	if err != nil || staged == nil {
		t.Fatal(staged, err)
	}
	s, err = d.StageCreateIndex([]Index{testIndex("half", 7, []int32{1}, 1)}, nil, StageOptions{})
	d = commit(t, d, s, err)
	var rc *RewriteConflictError
	if err := staged.Rebase(d); !errors.As(err, &rc) {
		t.Fatalf("rebase over a half-covering index: %v, want a *RewriteConflictError", err)
	}

	// A fragment reuse index (a deferred remap) blocks compaction of the table.
	d = indexedTable(t, "t5")
	fr := testIndex(FragReuseIndexName, 8, nil, 0)
	s, err = d.StageCreateIndex([]Index{fr}, nil, StageOptions{})
	d = commit(t, d, s, err)
	if staged, _, err := d.StageCompaction(ctx, CompactionOptions{TargetRowsPerFragment: 1000}, StageOptions{}); err != nil || staged != nil {
		t.Fatalf("compaction beside a fragment reuse index: %v %v, want nothing to do", staged, err)
	}
}

func TestCleanupRemovesOnlyIndexFilesNoKeptVersionNames(t *testing.T) {
	ctx := context.Background()
	d := indexedTable(t, "t6")
	st := d.Store()
	old := d.Indices()[0] // id_idx
	put := func(x Index, name string) {
		if err := st.Put(ctx, x.Dir()+name, []byte("index bytes")); err != nil {
			t.Fatal(err)
		}
	}
	put(old, "page_data.lance")
	put(old, "page_lookup.lance")
	put(d.Indices()[1], "index.idx")
	fresh := testIndex("id_idx", 9, []int32{0}, 0, 1, 2)
	put(fresh, "page_data.lance")
	orphan := testIndex("orphan", 11, []int32{0}, 0)
	put(orphan, "page_data.lance")
	s, err := d.StageCreateIndex([]Index{fresh}, nil, StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageAppend(ctx, rows(50), StageOptions{})
	d = commit(t, d, s, err)

	// Versions below the newest go; only the replaced id_idx's files are named by them alone.
	p, err := PlanCleanup(ctx, st, map[string]uint64{"": d.Version()}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	exists := func(x Index, name string) bool {
		ok, err := st.Exists(ctx, x.Dir()+name)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if exists(old, "page_data.lance") || exists(old, "page_lookup.lance") {
		t.Fatal("the replaced index's files were kept")
	}
	if !exists(fresh, "page_data.lance") {
		t.Fatal("the new index's files were removed")
	}
	vec := d.Indices()[slices.IndexFunc(d.Indices(), func(x Index) bool { return x.Name == "name_vec" })]
	if !exists(vec, "index.idx") {
		t.Fatal("the vector index's files were removed")
	}
	if !exists(orphan, "page_data.lance") {
		t.Fatal("an unnamed index directory went without an orphan sweep")
	}
	// The orphan sweep takes unnamed index directories older than the grace only.
	p, err = PlanCleanup(ctx, st, map[string]uint64{"": d.Version()}, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if !exists(orphan, "page_data.lance") {
		t.Fatal("a young unnamed index directory was swept")
	}
	p, err = PlanCleanup(ctx, st, map[string]uint64{"": d.Version()}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(orphan, "page_data.lance") || !exists(fresh, "page_data.lance") {
		t.Fatal("the orphan sweep kept the unnamed index or removed a named one")
	}
}

func FuzzIndexSection(f *testing.F) {
	a := testIndex("id_idx", 1, []int32{0, 1}, 0, 1, 70000)
	b := vectorIndex("v", 2, []int32{2}, seq32(0, 5000)...)
	f.Add(encodeIndexSection([]Index{a, b}))
	f.Add([]byte{10, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		xs, err := decodeIndexSection(raw)
		if err != nil {
			return
		}
		again, err := decodeIndexSection(encodeIndexSection(xs))
		if err != nil {
			t.Fatalf("re-encoded section does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, xs) {
			t.Fatalf("round trip changed the section:\n%+v\n%+v", again, xs)
		}
	})
}

func TestBTreeIndexFiles(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 5000)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(-3, 7000, 2), StageOptions{})
	d = commit(t, d, s, err)
	for _, col := range []string{"id", "name"} {
		s, err = d.StageBTreeIndex(ctx, col, IndexOptions{})
		d = commit(t, d, s, err)
	}
	if got := indexNames(d); fmt.Sprint(got) != "[id_idx name_idx]" {
		t.Fatalf("indices %v", got)
	}
	for _, x := range d.Indices() {
		if x.Kind() != "BTree" || fmt.Sprint(x.Fragments) != "[0 1]" || x.DatasetVersion != 2 && x.Name == "id_idx" {
			t.Fatalf("%s: kind %s fragments %v dataset version %d", x.Name, x.Kind(), x.Fragments, x.DatasetVersion)
		}
	}
	x := d.Indices()[0]
	read := func(name string) arrow.Record {
		r := openIndexFile(t, d, &x, name)
		rec, err := r.Read(ctx, r.Schema().Fields, nil, 0, r.NumRows(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if name == "page_lookup.lance" && string(r.Schema().Metadata["batch_size"]) != "4096" {
			t.Fatalf("lookup metadata %v", r.Schema().Metadata)
		}
		return rec
	}
	data, lookup := read("page_data.lance"), read("page_lookup.lance")
	defer data.Release()
	defer lookup.Release()
	vals := data.Column(0).(*array.Int64)
	if data.NumRows() != 5003 || vals.Value(0) != -3 || vals.Value(5002) != 7000 || vals.Value(3) != 2 || vals.Value(4) != 2 {
		t.Fatalf("page data: %d rows, first %d, last %d", data.NumRows(), vals.Value(0), vals.Value(5002))
	}
	for i := 1; i < vals.Len(); i++ {
		if vals.Value(i) < vals.Value(i-1) {
			t.Fatalf("values out of order at %d", i)
		}
	}
	mins, maxs := lookup.Column(0).(*array.Int64), lookup.Column(1).(*array.Int64)
	if lookup.NumRows() != 2 || mins.Value(0) != -3 || maxs.Value(1) != 7000 || mins.Value(1) != vals.Value(4096) {
		t.Fatalf("lookup %v", lookup)
	}
	// A string column with nulls sorts them first and counts them per page.
	names := d.Indices()[1]
	b, _ := d.Store().Get(ctx, names.Dir()+"page_lookup.lance")
	r, err := file.Open(ctx, file.BytesSource(b), "lookup")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := r.Read(ctx, r.Schema().Fields, nil, 0, r.NumRows(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()
	if nulls := lk.Column(2).(*array.Uint32).Value(0); nulls != 1001 { // ids divisible by 5, and 7000
		t.Fatalf("first page counts %d nulls", nulls)
	}
	if _, err := d.StageBTreeIndex(ctx, "nope", IndexOptions{}); err == nil {
		t.Fatal("an index on a missing column was staged")
	}
}

func indexNames(d *Dataset) []string {
	var out []string
	for _, x := range d.Indices() {
		out = append(out, x.Name)
	}
	slices.Sort(out)
	return out
}

// Large builds sort their halves side by side and merge them: the pages still hold every row
// once, nulls first, then by value, ties by row id.
func TestBTreeSortsLargeColumns(t *testing.T) {
	const n = 3*parallelSortMin + 17
	rng := rand.New(rand.NewPCG(1, 2))
	b := array.NewInt64Builder(memory.DefaultAllocator)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(n - i) // not in value order either
		if rng.IntN(50) == 0 {
			b.AppendNull()
		} else {
			b.Append(rng.Int64N(1000))
		}
	}
	col := b.NewArray()
	defer col.Release()
	data, lookup, err := btreePages(arrow.PrimitiveTypes.Int64, []arrow.Array{array.NewSlice(col, 0, n/2), array.NewSlice(col, n/2, n)}, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Release()
	defer lookup.Release()
	vals, got := data.Column(0).(*array.Int64), data.Column(1).(*array.Uint64)
	seen := map[uint64]bool{}
	for i := 0; i < n; i++ {
		seen[got.Value(i)] = true
		if i == 0 {
			continue
		}
		an, bn := vals.IsNull(i-1), vals.IsNull(i)
		switch {
		case !an && bn:
			t.Fatalf("a null after a value at %d", i)
		case an && bn, !an && !bn && vals.Value(i-1) == vals.Value(i):
			if got.Value(i-1) >= got.Value(i) {
				t.Fatalf("ties not by row id at %d", i)
			}
		case !an && !bn && vals.Value(i-1) > vals.Value(i):
			t.Fatalf("values out of order at %d", i)
		}
	}
	if len(seen) != n || lookup.NumRows() != int64((n+BTreePageRows-1)/BTreePageRows) {
		t.Fatalf("%d distinct row ids of %d, %d pages", len(seen), n, lookup.NumRows())
	}
}

// String keys sharing a long prefix, of every length around it (the prefix itself, shorter,
// with a NUL after it, empty), with nulls, in chunks of String and LargeString arrays, sort as
// their bytes do, ties by row id: the comparison of the 8 bytes after the shared prefix
// agrees with the keys'.
func TestBTreeSortsStringsSharingAPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"", "\x00", "a", "b", "ab", "a\x00", "zz", "-1", "-10", "-9"}
	for _, large := range []bool{false, true} {
		for _, shared := range []string{"", "p1000005", "tenant:00042/user:"} {
			var keys []string
			var nulls []bool
			var ids []uint64
			for i := range 4000 {
				ids = append(ids, uint64(rng.IntN(1<<20))<<12|uint64(i))
				k := shared
				switch rng.IntN(40) {
				case 0:
					k = ""
				case 1:
					k = shared[:rng.IntN(len(shared)+1)]
				default:
					for range rng.IntN(4) {
						k += alphabet[rng.IntN(len(alphabet))]
					}
				}
				keys, nulls = append(keys, k), append(nulls, k == "" && rng.IntN(2) == 0)
			}
			// Three chunks, as a fold reads the new rows fragment by fragment.
			var chunks []arrow.Array
			var first []int
			for _, cut := range [][2]int{{0, 1000}, {1000, 3000}, {3000, 4000}} {
				var b array.Builder = array.NewStringBuilder(memory.DefaultAllocator)
				if large {
					b = array.NewLargeStringBuilder(memory.DefaultAllocator)
				}
				for i := cut[0]; i < cut[1]; i++ {
					if nulls[i] {
						b.AppendNull()
					} else {
						b.(interface{ Append(string) }).Append(keys[i])
					}
				}
				chunks, first = append(chunks, b.NewArray()), append(first, cut[0])
			}
			es := sortBTreeEntries(chunks, ids)
			want := make([]int, len(keys))
			for i := range want {
				want[i] = i
			}
			slices.SortFunc(want, func(i, j int) int {
				if ni, nj := nulls[i], nulls[j]; ni || nj {
					if ni && nj {
						return cmp.Compare(ids[i], ids[j])
					}
					if ni {
						return -1
					}
					return 1
				}
				if c := strings.Compare(keys[i], keys[j]); c != 0 {
					return c
				}
				return cmp.Compare(ids[i], ids[j])
			})
			if len(es) != len(want) {
				t.Fatalf("%d entries, want %d", len(es), len(want))
			}
			for k, e := range es {
				at := first[e.at()] + int(e.row)
				if at != want[k] || e.id != ids[at] || e.null() != nulls[at] {
					t.Fatalf("large %v, prefix %q: entry %d is row %d (%q, id %d, null %v), want row %d (%q)",
						large, shared, k, at, keys[at], e.id, e.null(), want[k], keys[want[k]])
				}
			}
			for _, c := range chunks {
				c.Release()
			}
		}
	}
}

// openIndexFile opens the index file name of x.
func openIndexFile(t *testing.T, d *Dataset, x *Index, name string) *file.Reader {
	t.Helper()
	ctx := context.Background()
	b, err := d.Store().Get(ctx, x.Dir()+name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := file.Open(ctx, file.BytesSource(b), name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
