package lance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

var testArrow = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: arrow.NewMetadata([]string{schema.PrimaryKeyMeta}, []string{"true"})},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func testSchema(t testing.TB) *schema.Schema {
	s, err := schema.FromArrow(testArrow)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rows(ids ...int64) []arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testArrow)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		if id%5 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", id))
		}
	}
	return []arrow.Record{b.NewRecord()}
}

func seq(lo, hi int64) []int64 {
	var out []int64
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func memStore(t testing.TB) storage.Store {
	st, err := storage.Open(context.Background(), "mem://"+strings.ReplaceAll(t.Name(), "/", "_"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.DeletePrefix(context.Background(), ""); st.Close() })
	return st
}

// scanIDs returns the sorted ids and checks names match the generator.
func scanIDs(t *testing.T, d *Dataset) []int64 {
	t.Helper()
	recs, err := d.ReadAll(context.Background(), ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range recs {
		idc := r.Column(0).(*array.Int64)
		nc := r.Column(1).(*array.String)
		for i := 0; i < int(r.NumRows()); i++ {
			id := idc.Value(i)
			want := fmt.Sprintf("n%d", id)
			if id%5 == 0 {
				if nc.IsValid(i) {
					t.Fatalf("id %d: name should be null", id)
				}
			} else if nc.Value(i) != want {
				t.Fatalf("id %d: name %q want %q", id, nc.Value(i), want)
			}
			ids = append(ids, id)
		}
		r.Release()
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if uint64(len(ids)) != d.CountRows() {
		t.Fatalf("scan found %d rows, metadata says %d", len(ids), d.CountRows())
	}
	return ids
}

func eqIDs(t *testing.T, got, want []int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ids %v\nwant %v", got, want)
	}
}

func commit(t *testing.T, d *Dataset, s *Staged, err error) *Dataset {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	nd, err := d.Commit(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return nd
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Version() != 1 || !d.Manifest().StableRowIDs() || d.Manifest().DataVersion != "2.2" {
		t.Fatalf("v1 manifest: version %d stable %v format %s", d.Version(), d.Manifest().StableRowIDs(), d.Manifest().DataVersion)
	}
	if ok, _ := st.Exists(ctx, "_versions/18446744073709551614.manifest"); !ok {
		t.Fatal("version 1 not written with the V2 name")
	}
	eqIDs(t, scanIDs(t, d), seq(0, 10))

	s, err := d.StageAppend(ctx, rows(seq(10, 15)...), StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageDelete(ctx, In("id", 2, 11, 99), StageOptions{})
	d = commit(t, d, s, err)
	if d.Manifest().ReaderFlags != FlagStableRowIDs|FlagDeletionFiles {
		t.Fatalf("flags after delete: %d", d.Manifest().ReaderFlags)
	}
	eqIDs(t, scanIDs(t, d), append(append(seq(0, 2), seq(3, 11)...), seq(12, 15)...))
	s, err = d.StageDelete(ctx, In("id", 3), StageOptions{}) // cumulative with the first delete
	d = commit(t, d, s, err)
	if n := d.Manifest().Fragments[0].Deletion.NumDeletedRows; n != 2 {
		t.Fatalf("deletion vector not cumulative: %d rows", n)
	}
	s, err = d.StageInsertOnlyUpdate(ctx, rows(100, 101), StageOptions{Properties: map[string]string{InsertAbsenceProperty: "v1"}})
	d = commit(t, d, s, err)
	s, err = d.StageUpsert(ctx, "id", rows(100, 200), StageOptions{})
	d = commit(t, d, s, err)
	eqIDs(t, scanIDs(t, d), []int64{0, 1, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 100, 101, 200})
	if d.Manifest().NextRowID != 19 {
		t.Fatalf("next_row_id %d, want 19", d.Manifest().NextRowID)
	}
	s, err = d.StageRestore(ctx, 2, StageOptions{})
	d = commit(t, d, s, err)
	eqIDs(t, scanIDs(t, d), seq(0, 15))
	s, err = d.StageOverwrite(ctx, nil, nil, StageOptions{})
	d = commit(t, d, s, err)
	if len(d.Manifest().Fragments) != 0 || d.CountRows() != 0 {
		t.Fatal("zero-fragment overwrite left fragments")
	}
	s, err = d.StageAppend(ctx, rows(7), StageOptions{})
	d = commit(t, d, s, err)
	eqIDs(t, scanIDs(t, d), []int64{7})
	if d.Version() != 9 {
		t.Fatalf("version %d want 9", d.Version())
	}

	// Every version stays readable, and the latest is found by listing.
	vs, err := d.Versions(ctx)
	if err != nil || len(vs) != 9 || vs[0] != 1 || vs[8] != 9 {
		t.Fatalf("versions %v %v", vs, err)
	}
	old, err := Open(ctx, st, AtVersion(2))
	if err != nil {
		t.Fatal(err)
	}
	eqIDs(t, scanIDs(t, old), seq(0, 15))
	latest, err := Open(ctx, st)
	if err != nil || latest.Version() != 9 {
		t.Fatalf("open latest: %v %v", latest, err)
	}
	if l2, err := old.Latest(ctx); err != nil || l2.Version() != 9 {
		t.Fatalf("probe latest: %v", err)
	}
}

func TestTransactionsReadable(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), nil, CreateOptions{Stage: StageOptions{UUID: "11111111-2222-4333-8444-555555555555"}})
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{InsertAbsenceProperty: "v1"}
	s, err := d.StageInsertOnlyUpdate(ctx, rows(1, 2), StageOptions{UUID: "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", Properties: props})
	d = commit(t, d, s, err)
	s, err = d.StageDelete(ctx, In("id", 1), StageOptions{})
	d = commit(t, d, s, err)

	tx, err := d.ReadTransaction(ctx, 1)
	if err != nil || tx.Op.Kind != OpOverwrite || tx.ReadVersion != 0 || tx.UUID != "11111111-2222-4333-8444-555555555555" {
		t.Fatalf("v1 txn %+v %v", tx, err)
	}
	tx, err = d.ReadTransaction(ctx, 2)
	if err != nil || tx.Op.Kind != OpUpdate || tx.ReadVersion != 1 || tx.Properties[InsertAbsenceProperty] != "v1" {
		t.Fatalf("v2 txn %+v %v", tx, err)
	}
	if len(tx.Op.RemovedFragmentIDs) != 0 || len(tx.Op.UpdatedFragments) != 0 || len(tx.Op.Fragments) != 1 ||
		fmt.Sprint(tx.Op.FieldsForPreservingFragBitmap) != "[0 1]" || tx.Op.UpdateMode != UpdateRewriteRows {
		t.Fatalf("insert-only update shape wrong: %+v", tx.Op)
	}
	tx, err = d.ReadTransaction(ctx, 3)
	if err != nil || tx.Op.Kind != OpDelete || tx.Op.Predicate != "id IN (1)" {
		t.Fatalf("v3 txn %+v %v", tx, err)
	}
	// The .txn file holds the same bytes as the inline section.
	raw, err := st.Get(ctx, "_transactions/"+d.Manifest().TransactionFile)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := DecodeTransaction(raw)
	if err != nil || fromFile.UUID != tx.UUID {
		t.Fatalf("txn file: %v", err)
	}
}

// An inline-only transaction writes no _transactions/ file, records no transaction_file, sets
// writer flag 32 for that version only, and reads back from the manifest.
func TestInlineTransactionOnly(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), nil, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inline := StageOptions{UUID: "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", InlineTransactionOnly: true}
	s, err := d.StageAppend(ctx, rows(1, 2), inline)
	if err == nil && s.TransactionFileName() != "" {
		t.Fatalf("TransactionFileName() = %q for an inline-only transaction", s.TransactionFileName())
	}
	d = commit(t, d, s, err)
	m := d.Manifest()
	if m.TransactionFile != "" || m.TransactionSection == nil || m.WriterFlags&FlagDisableTransactionFile == 0 || m.ReaderFlags&FlagDisableTransactionFile != 0 {
		t.Fatalf("manifest: transaction_file %q, section %v, flags reader %d writer %d", m.TransactionFile, m.TransactionSection, m.ReaderFlags, m.WriterFlags)
	}
	files, err := st.List(ctx, "_transactions")
	if err != nil || len(files) != 1 { // only version 1's, from Create
		t.Fatalf("transaction files %v, %v; want only version 1's", files, err)
	}
	tx, err := d.ReadTransaction(ctx, 2)
	if err != nil || tx.UUID != inline.UUID || tx.Op.Kind != OpAppend {
		t.Fatalf("inline transaction %+v, %v", tx, err)
	}
	reopened, err := Open(ctx, st)
	if err != nil || reopened.Version() != 2 || reopened.CountRows() != 2 {
		t.Fatalf("reopen: %v", err)
	}
	// The next commit, with a file, recomputes the flags.
	s, err = d.StageDelete(ctx, In("id", 1), StageOptions{})
	d = commit(t, d, s, err)
	if d.Manifest().WriterFlags&FlagDisableTransactionFile != 0 || d.Manifest().TransactionFile == "" {
		t.Fatalf("flag 32 or an empty transaction_file carried over: %+v", d.Manifest())
	}
}

func TestCommitIsExact(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(1), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.StageAppend(ctx, rows(2), StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.StageAppend(ctx, rows(3), StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Commit(ctx, a); err != nil {
		t.Fatal(err)
	}
	_, err = d.Commit(ctx, b)
	var ce *CommitConflictError
	if !errors.As(err, &ce) || ce.Version != 2 || ce.ReadVersion != 1 {
		t.Fatalf("second commit: %v", err)
	}
	latest, _ := Open(ctx, st)
	eqIDs(t, scanIDs(t, latest), []int64{1, 2})
	if _, err := Create(ctx, st, testSchema(t), nil, CreateOptions{}); !errors.As(err, &ce) {
		t.Fatalf("create over an existing dataset: %v", err)
	}
}

func TestCommitFailpointLeavesNothingVisible(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(1), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	for _, fp := range []string{"lance.commit.before_txn_file", "lance.commit.before_manifest"} {
		if err := failpoint.Enable(fp, "1*error"); err != nil {
			t.Fatal(err)
		}
		s, err := d.StageAppend(ctx, rows(2), StageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Commit(ctx, s); !failpoint.IsInjected(err) {
			t.Fatalf("%s: %v", fp, err)
		}
		latest, _ := Open(ctx, st)
		if latest.Version() != 1 {
			t.Fatalf("%s: version moved to %d", fp, latest.Version())
		}
		failpoint.Reset()
	}
}

func TestV1NamingAndNoStableRowIDs(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(1, 2), CreateOptions{V1Naming: true, DisableStableRowIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(3), StageOptions{})
	d = commit(t, d, s, err)
	for _, k := range []string{"_versions/1.manifest", "_versions/2.manifest"} {
		if ok, _ := st.Exists(ctx, k); !ok {
			t.Fatalf("%s missing", k)
		}
	}
	if d.Manifest().ReaderFlags != 0 || d.Manifest().Fragments[1].RowIDs != nil {
		t.Fatal("row ids written with stable row ids off")
	}
	o, err := Open(ctx, st)
	if err != nil || o.Version() != 2 {
		t.Fatalf("open V1 dataset: %v", err)
	}
	// Mixing naming schemes is refused, as the official engine refuses it.
	_ = st.Put(ctx, "_versions/18446744073709551612.manifest", []byte("x"))
	if _, err := Open(ctx, st); err == nil || !strings.Contains(err.Error(), "naming schemes") {
		t.Fatalf("mixed schemes: %v", err)
	}
}

func TestBranches(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(1, 2, 3), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	feat, err := d.CreateBranch(ctx, "feat")
	if err != nil {
		t.Fatal(err)
	}
	if feat.Version() != 1 || feat.Manifest().ReaderFlags&FlagBasePaths == 0 {
		t.Fatalf("branch manifest: v%d flags %d", feat.Version(), feat.Manifest().ReaderFlags)
	}
	s, err := feat.StageAppend(ctx, rows(10), StageOptions{})
	feat = commit(t, feat, s, err)
	s, err = feat.StageDelete(ctx, In("id", 2), StageOptions{})
	feat = commit(t, feat, s, err)
	eqIDs(t, scanIDs(t, feat), []int64{1, 3, 10})
	main, _ := Open(ctx, st)
	eqIDs(t, scanIDs(t, main), []int64{1, 2, 3})
	if ok, _ := st.Exists(ctx, "tree/feat/_versions/18446744073709551613.manifest"); !ok {
		t.Fatal("branch version 2 not under tree/feat")
	}

	sub, err := feat.CreateBranch(ctx, "feat/sub")
	if err != nil {
		t.Fatal(err)
	}
	eqIDs(t, scanIDs(t, sub), []int64{1, 3, 10})
	raw, err := st.Get(ctx, "_refs/branches/feat%2Fsub.json")
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"parentBranch", "identifier", "parentVersion", "createAt", "manifestSize", "metadata"} {
		if _, ok := generic[k]; !ok {
			t.Fatalf("ref JSON lacks %q: %s", k, raw)
		}
	}
	subID, _ := sub.Identifier(ctx)
	featID, _ := feat.Identifier(ctx)
	if len(featID) != 1 || len(subID) != 2 || subID[0] != featID[0] || subID[1].ParentVersion != 3 || len(subID[1].UUID) != 32 {
		t.Fatalf("identifiers feat=%v sub=%v", featID, subID)
	}
	reopened, err := Open(ctx, st, WithBranch("feat/sub"))
	if err != nil || reopened.Version() != 3 {
		t.Fatalf("open nested branch: %v", err)
	}

	bs, err := ListBranches(ctx, st)
	if err != nil || len(bs) != 2 || bs[0].Name != "feat" || bs[1].Name != "feat/sub" {
		t.Fatalf("list: %+v %v", bs, err)
	}
	if _, err := d.CreateBranch(ctx, "feat"); err == nil {
		t.Fatal("duplicate branch created")
	}
	for _, bad := range []string{"", "main", "/x", "a//b", "a..b", "x.lock", "sp ace", ".", "x/.", "./x", "a__0xb", strings.Repeat("n", MaxBranchNameBytes+1)} {
		if err := ValidateBranchName(bad); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	// Deleting feat keeps the nested branch's files.
	if err := DeleteBranch(ctx, st, "feat"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, st, WithBranch("feat")); err == nil {
		t.Fatal("deleted branch still opens")
	}
	if _, err := Open(ctx, st, WithBranch("feat/sub")); err != nil {
		t.Fatalf("nested branch lost with its parent's delete: %v", err)
	}
	// A re-created branch gets a new identifier.
	feat2, err := d.CreateBranch(ctx, "feat")
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := feat2.Identifier(ctx)
	if id2.Equal(featID) {
		t.Fatal("re-created branch kept the old identifier")
	}
}

func TestCorruptManifestsAreTyped(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(1), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := st.Get(ctx, d.key)
	cases := map[string][]byte{
		"empty":     {},
		"bad magic": append(append([]byte{}, good[:len(good)-4]...), 'X', 'X', 'X', 'X'),
		"truncated": good[:len(good)/2],
		"lying pos": func() []byte { b := append([]byte{}, good...); b[len(b)-16] ^= 0x40; return b }(),
		"bad body": func() []byte {
			b := append([]byte{}, good...)
			body := int(binary.LittleEndian.Uint64(b[len(b)-16:])) + 4
			copy(b[body+1:], []byte{0xff, 0xff, 0xff, 0xff, 0x0f}) // first field's length: 4 GiB
			return b
		}(),
		"wrong proto": []byte("\x05\x00\x00\x00hello\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00LANC"),
	}
	for name, b := range cases {
		if _, _, err := parseManifestFile("m", b); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("%s: untyped error %v", name, err)
			}
		}
	}
}

func TestRoaringDeletionFiles(t *testing.T) {
	// cookie 12346, one container key 0 with 3 values, offsets, values 1, 5, 9.
	b := []byte{0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 16, 0, 0, 0, 1, 0, 5, 0, 9, 0}
	got, err := decodePortableRoaring(b, 100)
	if err != nil || fmt.Sprint(got) != "[1 5 9]" {
		t.Fatalf("%v %v", got, err)
	}
	for n := range b {
		if _, err := decodePortableRoaring(b[:n], 100); err == nil {
			t.Fatalf("truncated at %d accepted", n)
		}
	}
	// A run container of 65,536 values in a few bytes is refused past the fragment's rows.
	runs := []byte{0x3b, 0x30, 0, 0, 1, 0, 0, 0xff, 0xff, 1, 0, 0, 0, 0xff, 0xff}
	if _, err := decodePortableRoaring(runs, 1000); err == nil {
		t.Fatal("oversized run container accepted")
	}
	if got, err := decodePortableRoaring(runs, 1<<16); err != nil || len(got) != 1<<16 {
		t.Fatalf("run container: %d values, %v", len(got), err)
	}
	enc, err := encodeDeletionArrow([]uint32{4, 2})
	if err != nil {
		t.Fatal(err)
	}
	offs, err := decodeDeletionFile("x", DeletionArrow, enc, 10)
	if err != nil || fmt.Sprint(offs) != "[2 4]" {
		t.Fatalf("%v %v", offs, err)
	}
	if _, err := decodeDeletionFile("x", DeletionArrow, enc, 3); err == nil {
		t.Fatal("offset past the fragment accepted")
	}
}

func FuzzManifest(f *testing.F) {
	ctx := context.Background()
	st, _ := storage.Open(ctx, "mem://fuzz-manifest-seed")
	d, err := Create(ctx, st, testSchema(f), rows(1, 2), CreateOptions{})
	if err == nil {
		s, _ := d.StageDelete(ctx, In("id", 1), StageOptions{})
		if d2, err := d.Commit(ctx, s); err == nil {
			b, _ := st.Get(ctx, d2.key)
			f.Add(b)
		}
	}
	f.Add([]byte("LANC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, txn, err := parseManifestFile("fuzz", b)
		if err != nil {
			return
		}
		_ = m.NumRows()
		if txn != nil {
			_, _ = DecodeTransaction(txn)
		}
		again := marshalManifestFile(m, nil)
		if _, _, err := parseManifestFile("again", again); err != nil {
			t.Fatalf("re-encoded manifest does not parse: %v", err)
		}
	})
}

func FuzzTransaction(f *testing.F) {
	f.Add(encodeTransaction(&Transaction{ReadVersion: 3, UUID: "u", Properties: map[string]string{"a": "b"},
		Op: Operation{Kind: OpDelete, RemovedFragmentIDs: []uint64{1}, Predicate: "id = 1"}}))
	f.Add(encodeTransaction(&Transaction{UUID: "u", Op: Operation{Kind: OpRestore, RestoreVersion: 2}}))
	f.Add(encodeTransaction(&Transaction{UUID: "u", Op: Operation{Kind: OpRewrite, Groups: []RewriteGroup{{
		OldFragments: []Fragment{{ID: 3, PhysicalRows: 2, RowIDs: encodeRangeSequence(0, 2)}},
		NewFragments: []Fragment{{PhysicalRows: 2, RowIDs: encodeRowIDSequence([]uint64{0, 1}), CreatedAt: encodeVersionRuns([]uint64{1, 2})}},
	}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		tx, err := DecodeTransaction(b)
		if err != nil {
			return
		}
		if tx.Op.Kind == OpOverwrite && tx.Op.Schema == nil {
			t.Fatal("overwrite without schema")
		}
		if _, err := DecodeTransaction(encodeTransaction(tx)); err != nil {
			t.Fatalf("re-encoded transaction does not parse: %v", err)
		}
	})
}

func TestSchemaAndFieldMetadataPersist(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	s := testSchema(t)
	s.Metadata = map[string][]byte{"omnigraph:internal_schema_version": []byte("6")}
	if _, err := Create(ctx, st, s, nil, CreateOptions{Config: map[string]string{"omnigraph.k": "v"}}); err != nil {
		t.Fatal(err)
	}
	d, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(d.Schema().Metadata["omnigraph:internal_schema_version"]); got != "6" {
		t.Fatalf("schema metadata %q", got)
	}
	if !d.Schema().Field("id").UnenforcedPrimaryKey || string(d.Schema().Field("id").Metadata[schema.PrimaryKeyMeta]) != "true" {
		t.Fatal("primary-key field metadata lost")
	}
	if d.Manifest().Config["omnigraph.k"] != "v" || d.Manifest().WriterFlags&FlagTableConfig == 0 {
		t.Fatalf("config %v flags %d", d.Manifest().Config, d.Manifest().WriterFlags)
	}
	as, err := d.Schema().ToArrow()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := as.Metadata().GetValue("omnigraph:internal_schema_version"); v != "6" {
		t.Fatal("arrow schema metadata lost")
	}
}

func FuzzDeletionFile(f *testing.F) {
	enc, _ := encodeDeletionArrow([]uint32{1, 3, 7})
	f.Add(enc, false)
	f.Add([]byte{0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 16, 0, 0, 0, 1, 0, 5, 0, 9, 0}, true)
	f.Fuzz(func(t *testing.T, b []byte, bitmap bool) {
		kind := int32(DeletionArrow)
		if bitmap {
			kind = DeletionBitmap
		}
		offs, err := decodeDeletionFile("fuzz", kind, b, 1<<20)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for i := 1; i < len(offs); i++ {
			if offs[i] < offs[i-1] {
				t.Fatal("offsets not sorted")
			}
		}
	})
}

// A range a file claims is checked without adding its two lengths: an offset and a length of
// 2^62 each summed past the int64 range to a negative end that passed the check, and a crafted
// deletion file's record batch sliced the file out of bounds (the corpus of FuzzDeletionFile
// keeps that file).
func TestWithinDoesNotOverflow(t *testing.T) {
	for _, c := range []struct {
		off, n, size int64
		want         bool
	}{
		{0, 0, 0, true}, {5, 0, 5, true}, {0, 5, 5, true}, {5, 1, 5, false}, {-1, 1, 5, false},
		{1, -1, 5, false}, {1 << 62, 1 << 62, 100, false}, {3472328296227680304, 3472328296227680304, 192, false},
		{10, math.MaxInt64, 100, false},
	} {
		if got := within(c.off, c.n, c.size); got != c.want {
			t.Errorf("within(%d, %d, %d) = %v, want %v", c.off, c.n, c.size, got, c.want)
		}
	}
}

func TestRewriteRowsByAddress(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 6)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(6, 7), StageOptions{})
	d = commit(t, d, s, err)
	recs, err := d.ReadAll(ctx, ScanOptions{Columns: []string{"id"}, WithRowAddress: true, Filter: &Filter{SQL: "x", Columns: []string{"name"},
		Match: func(r arrow.Record) ([]bool, error) {
			out := make([]bool, r.NumRows())
			for i := range out {
				out[i] = true
			}
			return out, nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	addr := map[int64]RowAddress{}
	for _, r := range recs {
		if r.NumCols() != 2 || r.Schema().Field(1).Name != RowAddressColumn {
			t.Fatalf("schema %s", r.Schema())
		}
		for i := 0; i < int(r.NumRows()); i++ {
			addr[r.Column(0).(*array.Int64).Value(i)] = RowAddress(r.Column(1).(*array.Uint64).Value(i))
		}
	}
	if addr[7].Fragment() != 1 || addr[7].Offset() != 1 || addr[3].Fragment() != 0 || addr[3].Offset() != 3 {
		t.Fatalf("addresses %v", addr)
	}
	old := d.Manifest()
	s, err = d.StageRewriteRows(ctx, []RowAddress{addr[3], addr[6], addr[7]}, rows(3, 50), StageOptions{})
	d = commit(t, d, s, err)
	eqIDs(t, scanIDs(t, d), []int64{0, 1, 2, 3, 4, 5, 50})
	added := d.AddedFragments(old)
	if len(added) != 1 || added[0].PhysicalRows != 2 || added[0].ID != 2 {
		t.Fatalf("added fragments %+v", added)
	}
	if _, err := d.StageRewriteRows(ctx, []RowAddress{RowAddress(9 << 32)}, nil, StageOptions{}); err == nil {
		t.Fatal("address in a missing fragment accepted")
	}
}

func TestCompactTailBoundsFragments(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(0), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0}
	for i := int64(1); i < 200; i++ {
		s, err := d.StageAppend(ctx, rows(i), StageOptions{})
		d = commit(t, d, s, err)
		want = append(want, i)
		if i%7 == 0 { // deleted rows are not carried into merged fragments
			s, err := d.StageDelete(ctx, In("id", i), StageOptions{})
			d = commit(t, d, s, err)
			want = want[:len(want)-1]
		}
		for {
			s, _, err := d.CompactTail(ctx, 4, StageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s == nil {
				break
			}
			d = commit(t, d, s, nil)
		}
		if n := len(d.Manifest().Fragments); n > 4*4 {
			t.Fatalf("after %d appends: %d fragments", i, n)
		}
	}
	eqIDs(t, scanIDs(t, d), want)
	latest, _ := Open(ctx, st)
	eqIDs(t, scanIDs(t, latest), want)
}

// ScanOptions.Rows reads only the live rows at the given addresses, in manifest order, from
// their fragments alone.
func TestScanRows(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(1, 2, 3), CreateOptions{}) // fragment 0
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(4, 5, 6), StageOptions{}) // fragment 1
	d = commit(t, d, s, err)
	s, err = d.StageDelete(ctx, In("id", 2), StageOptions{})
	d = commit(t, d, s, err)
	read := func(addrs []RowAddress) []int64 {
		t.Helper()
		recs, err := d.ReadAll(ctx, ScanOptions{Rows: addrs, Columns: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range recs {
			for i := 0; i < int(r.NumRows()); i++ {
				ids = append(ids, r.Column(0).(*array.Int64).Value(i))
			}
			r.Release()
		}
		return ids
	}
	// Row 1 of fragment 0 (id 2) is deleted; the order asked for does not matter.
	eqIDs(t, read([]RowAddress{1<<32 | 2, 0<<32 | 1, 0<<32 | 2, 1<<32 | 0}), []int64{3, 4, 6})
	eqIDs(t, read([]RowAddress{1<<32 | 1}), []int64{5})
	if got := read([]RowAddress{}); len(got) != 0 {
		t.Fatalf("no rows asked for, got %v", got)
	}
}

// The row id, address and version columns of a scan read in batches smaller than a fragment
// (each a view of the reader's slices from the batch's first row on) hold every row's own
// values, deleted rows left out, as one whole-fragment read does.
func TestScanExtraColumnsInSmallBatches(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(seq(10, 17)...), StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageDelete(ctx, In("id", 4, 12), StageOptions{})
	d = commit(t, d, s, err)
	read := func(batch int) map[int64][4]uint64 {
		recs, err := d.ReadAll(ctx, ScanOptions{Columns: []string{"id"}, WithRowID: true, WithRowAddress: true, WithRowVersions: true, BatchRows: batch})
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64][4]uint64{}
		for _, r := range recs {
			sc := r.Schema()
			col := func(name string) *array.Uint64 { return r.Column(sc.FieldIndices(name)[0]).(*array.Uint64) }
			for i := 0; i < int(r.NumRows()); i++ {
				out[r.Column(0).(*array.Int64).Value(i)] = [4]uint64{col(RowIDColumn).Value(i), col(RowAddressColumn).Value(i),
					col(RowCreatedAtColumn).Value(i), col(RowLastUpdatedAtColumn).Value(i)}
			}
		}
		releaseAll(recs)
		return out
	}
	whole, small := read(0), read(3)
	if len(whole) != 15 || fmt.Sprint(small) != fmt.Sprint(whole) {
		t.Fatalf("in batches of 3 %v, whole %v (want 15 rows)", small, whole)
	}
	for id, v := range small {
		frag, off, created := uint64(0), uint64(id), uint64(1)
		if id >= 10 {
			frag, off, created = 1, uint64(id-10), 2
		}
		if want := [4]uint64{uint64(id), frag<<32 | off, created, created}; v != want {
			t.Errorf("row %d: id, address, created, updated %v, want %v", id, v, want)
		}
	}
}
