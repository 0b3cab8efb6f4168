package lance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Fuzzing of the index file readers: whatever bytes an index file holds, reading it gives a
// typed format error (*FormatError, or the file package's *file.FormatError), never a panic.

// typedFormatError says whether err is one of the package's format errors.
func typedFormatError(err error) bool {
	var fe *FormatError
	var ffe *file.FormatError
	return errors.As(err, &fe) || errors.As(err, &ffe)
}

// goIndexFiles builds, in Go, BTREE indices on id and name, an INVERTED index on name and an
// IVF_FLAT index on a vector table, and returns their files by name ("<kind>-<column>-<file>").
func goIndexFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	keep := func(d *Dataset, prefix string, x *Index, names ...string) {
		for _, n := range names {
			b, err := d.Store().Get(ctx, x.Dir()+n)
			if err != nil {
				tb.Fatal(err)
			}
			out[prefix+n] = b
		}
	}
	st := memStore(tb)
	d, err := Create(ctx, st, testSchema(tb), rows(seq(0, 300)...), CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := d.StageIndices(ctx, []IndexSpec{{Kind: IndexBTree, Column: "id"}, {Kind: IndexBTree, Column: "name"},
		{Kind: IndexInverted, Column: "name"}}, StageOptions{})
	if err == nil {
		d, err = d.Commit(ctx, s)
	}
	if err != nil {
		tb.Fatal(err)
	}
	keep(d, "go-btree-id-", d.BTree("id"), btreeDataFile, btreeLookupFile)
	keep(d, "go-btree-name-", d.BTree("name"), btreeDataFile, btreeLookupFile)
	keep(d, "go-inverted-", d.Inverted("name"), invertedMetadataFile, "part_0_tokens.lance", "part_0_docs.lance", "part_0_invert.lance")

	vs, err := schema.FromArrow(ivfArrow)
	if err != nil {
		tb.Fatal(err)
	}
	vst, err := storage.Open(ctx, "mem://"+strings.ReplaceAll(tb.Name(), "/", "_")+"-ivf")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = vst.DeletePrefix(context.Background(), ""); vst.Close() })
	v, err := Create(ctx, vst, vs, ivfRows(seq(0, 40)), CreateOptions{})
	if err == nil {
		s, err = v.StageIVFFlatIndex(ctx, "v", IndexOptions{})
	}
	if err == nil {
		v, err = v.Commit(ctx, s)
	}
	if err != nil {
		tb.Fatal(err)
	}
	keep(v, "go-ivf-", v.VectorIndex("v"), ivfIndexFile, ivfAuxFile)
	return out
}

// engineIndexFiles are the index files the official engines wrote in testdata: BTREE (btree/),
// INVERTED (official/lance10-fts.lance) and IVF_FLAT (ivfflat/), by path.
func engineIndexFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	for _, glob := range []string{"testdata/btree/*.lance", "testdata/official/*/_indices/*/*", "testdata/ivfflat/*/_indices/*/*"} {
		paths, err := filepath.Glob(glob)
		if err != nil {
			tb.Fatal(err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			out[p] = b
		}
	}
	if len(out) < 12 {
		tb.Fatalf("%d engine-written index files in testdata", len(out))
	}
	return out
}

// btreeFuzzTypes are the column types FuzzBTreeFiles searches as, with a bound of each kind.
var btreeFuzzTypes = []struct {
	t     arrow.DataType
	bound func(int64) any
}{
	{arrow.PrimitiveTypes.Int64, func(v int64) any { return v }},
	{arrow.BinaryTypes.String, func(v int64) any { return "n" + string(rune('0'+v%10)) }},
	{arrow.PrimitiveTypes.Float64, func(v int64) any { return float64(v) / 2 }},
	{arrow.PrimitiveTypes.Uint32, func(v int64) any { return uint64(v) }},
}

// fuzzRanges are the ranges FuzzBTreeFiles asks for around a bound: the value, from it on, up
// to it exclusive, everything.
func fuzzRanges(v any) []BTreeRange {
	return []BTreeRange{Equal(v), {Lo: v}, {Hi: v, HiExcl: true}, {}}
}

// searchBTreeBytes is SearchBTree's reading of the two files, from bytes.
func searchBTreeBytes(lookup, data []byte, t arrow.DataType, r BTreeRange) (map[uint64]bool, *BTreeSearch, error) {
	ctx := context.Background()
	s := &BTreeSearch{}
	openData := func() (*file.Reader, error) { return file.Open(ctx, file.BytesSource(data), "page_data") }
	ids, err := searchBTreeFiles(ctx, file.BytesSource(lookup), "page_lookup", openData, "page_data", t, r, s)
	return ids, s, err
}

// FuzzBTreeFiles: a BTREE's page_lookup and page_data of any bytes, searched as a column of each
// kind, give the ids or a typed format error.
func FuzzBTreeFiles(f *testing.F) {
	add := func(files map[string][]byte, prefix string, kinds ...uint8) {
		for _, k := range kinds {
			lookup, data := files[prefix+"page_lookup.lance"], files[prefix+"page_data.lance"]
			if lookup == nil || data == nil {
				f.Fatalf("no BTREE files %s*", prefix)
			}
			f.Add(lookup, data, k, int64(7))
		}
	}
	g, e := goIndexFiles(f), engineIndexFiles(f)
	add(g, "go-btree-id-", 0, 3)
	add(g, "go-btree-name-", 1)
	add(e, "testdata/btree/lance10-id-", 0)
	add(e, "testdata/btree/lance10-tag-", 1)
	add(e, "testdata/btree/lance10-x-", 2)
	f.Fuzz(func(t *testing.T, lookup, data []byte, kind uint8, bound int64) {
		k := btreeFuzzTypes[int(kind)%len(btreeFuzzTypes)]
		for _, r := range fuzzRanges(k.bound(bound)) {
			if _, _, err := searchBTreeBytes(lookup, data, k.t, r); err != nil && !typedFormatError(err) {
				t.Fatalf("range %+v as %s: not a format error: %v", r, k.t, err)
			}
		}
	})
}

// FuzzInvertedTokens: a part_<n>_tokens.lance of any bytes (the Lance file, its FST row, the
// FST) reads as tokens or fails with a typed format error.
func FuzzInvertedTokens(f *testing.F) {
	f.Add(goIndexFiles(f)["go-inverted-part_0_tokens.lance"])
	for p, b := range engineIndexFiles(f) {
		if filepath.Base(p) == "part_0_tokens.lance" {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := readTokenFile(b, 1<<12); err != nil && !typedFormatError(err) {
			t.Fatalf("not a format error: %v", err)
		}
	})
}

// FuzzInvertedPartition: a partition's three files, any one of them any bytes, decode (as a
// fold at the partition limit reads them to merge them) or fail with a typed format error.
func FuzzInvertedPartition(f *testing.F) {
	g := goIndexFiles(f)
	for which := range uint8(3) {
		f.Add(which, g[[]string{"go-inverted-part_0_tokens.lance", "go-inverted-part_0_docs.lance", "go-inverted-part_0_invert.lance"}[which]])
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		files := [3][]byte{g["go-inverted-part_0_tokens.lance"], g["go-inverted-part_0_docs.lance"], g["go-inverted-part_0_invert.lance"]}
		files[int(which)%3] = b
		if _, err := decodeInverted(files[0], files[1], files[2]); err != nil && !typedFormatError(err) {
			t.Fatalf("not a format error: %v", err)
		}
	})
}

// FuzzIndexFile: any index file (BTREE, INVERTED, IVF_FLAT; by Go and by the engines) of any
// bytes opens, reads every column and every global buffer (an IVF model, …), or fails with a
// typed format error.
func FuzzIndexFile(f *testing.F) {
	for _, files := range []map[string][]byte{goIndexFiles(f), engineIndexFiles(f)} {
		for _, b := range files {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := readIndexFileWhole(b); err != nil && !typedFormatError(err) {
			t.Fatalf("not a format error: %v", err)
		}
	})
}

// readIndexFileWhole opens an index file and reads all of it: its rows and its global buffers.
func readIndexFileWhole(b []byte) error {
	ctx := context.Background()
	r, err := file.Open(ctx, file.BytesSource(b), "index file")
	if err != nil {
		return err
	}
	rec, err := readIndexRows(ctx, r, "index file", 0, r.NumRows())
	if err != nil {
		return err
	}
	rec.Release()
	for i := uint32(0); i < r.NumGlobalBuffers(); i++ {
		if _, err := r.GlobalBuffer(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// TestHostileBTreeFilesAreFormatErrors: the shapes that once panicked or read past a page.
func TestHostileBTreeFilesAreFormatErrors(t *testing.T) {
	g := goIndexFiles(t)
	lookup, data := g["go-btree-id-page_lookup.lance"], g["go-btree-id-page_data.lance"]
	if ids, _, err := searchBTreeBytes(lookup, data, arrow.PrimitiveTypes.Int64, Equal(int64(7))); err != nil || len(ids) != 1 {
		t.Fatalf("the real files: %v, %v", ids, err)
	}
	enc := func(rec arrow.Record) []byte {
		defer rec.Release()
		b, err := encodeIndexFile(rec, file.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	one := func(name string, a arrow.Array) arrow.Record {
		defer a.Release()
		return array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: name, Type: a.DataType(), Nullable: true}}, nil), []arrow.Array{a}, int64(a.Len()))
	}
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.AppendValues([]int64{1, 7, 9}, nil)
	onlyValues := enc(one("values", ib.NewArray())) // page data without its ids column
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	sb.AppendValues([]string{"a", "b"}, nil)
	stringValues := enc(one("values", sb.NewArray()))
	// A lookup naming page 2^32-1 of a batch_size that overflows an int64 offset.
	lk, err := readRecord(lookup)
	if err != nil {
		t.Fatal(err)
	}
	meta := arrow.NewMetadata([]string{"batch_size"}, []string{"9223372036854775807"})
	pb := array.NewUint32Builder(memory.DefaultAllocator)
	for i := 0; i < int(lk.NumRows()); i++ {
		pb.Append(^uint32(0))
	}
	pages := pb.NewArray()
	far := enc(array.NewRecord(arrow.NewSchema(lk.Schema().Fields(), &meta), []arrow.Array{lk.Column(0), lk.Column(1), lk.Column(2), pages}, lk.NumRows()))
	pages.Release()
	lk.Release()
	unknownType := bytes.Replace(lookup, []byte("uint32"), []byte("uiii32"), 1)
	if bytes.Equal(unknownType, lookup) {
		t.Fatal("no uint32 in the lookup's schema")
	}
	for _, c := range []struct {
		name         string
		lookup, data []byte
		t            arrow.DataType
	}{
		{"page data of one column", lookup, onlyValues, arrow.PrimitiveTypes.Int64},
		{"a lookup of another kind", lookup, data, arrow.BinaryTypes.String},
		{"page data of another kind", lookup, stringValues, arrow.PrimitiveTypes.Int64},
		{"a page past the data", far, data, arrow.PrimitiveTypes.Int64},
		{"a lookup that is no Lance file", data[:len(data)/2], data, arrow.PrimitiveTypes.Int64},
		// FuzzIndexFile found it: a column type the file's own schema names and no reader knows.
		{"a lookup column of an unknown type", unknownType, data, arrow.PrimitiveTypes.Int64},
		{"page data of an unknown type", lookup, bytes.Replace(data, []byte("uint64"), []byte("uiii64"), 1), arrow.PrimitiveTypes.Int64},
	} {
		r := Equal(int64(7))
		if c.t.ID() == arrow.STRING {
			r = Equal("n7")
		}
		if _, _, err := searchBTreeBytes(c.lookup, c.data, c.t, r); !typedFormatError(err) {
			t.Errorf("%s: %v, want a format error", c.name, err)
		}
	}
	// A range of the wrong kind is the caller's error, not the file's.
	if _, _, err := searchBTreeBytes(lookup, data, arrow.PrimitiveTypes.Int64, Equal("7")); err == nil || typedFormatError(err) {
		t.Errorf("a string bound on an Int64 column: %v", err)
	}
}

// readRecord reads the whole of a Lance file of bytes.
func readRecord(b []byte) (arrow.Record, error) {
	ctx := context.Background()
	r, err := file.Open(ctx, file.BytesSource(b), "index file")
	if err != nil {
		return nil, err
	}
	return r.Read(ctx, r.Schema().Fields, nil, 0, r.NumRows(), memory.DefaultAllocator)
}

// foldFixture is a table with Go-built BTREE indices on id and name and an INVERTED index on
// name, and rows appended since that none covers: every index of it is due a fold.
type foldFixture struct {
	d                         *Dataset
	idData, nameData, invMeta string // keys of the files FuzzIndexFold replaces
}

func newFoldFixture(tb testing.TB) foldFixture {
	tb.Helper()
	ctx := context.Background()
	st, err := storage.Open(ctx, "mem://"+strings.ReplaceAll(tb.Name(), "/", "_")+"-fold")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.DeletePrefix(context.Background(), ""); st.Close() })
	d, err := Create(ctx, st, testSchema(tb), rows(seq(0, 300)...), CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := d.StageIndices(ctx, foldSpecs, StageOptions{})
	if err == nil {
		d, err = d.Commit(ctx, s)
	}
	if err == nil {
		s, err = d.StageAppend(ctx, rows(seq(300, 320)...), StageOptions{})
	}
	if err == nil {
		d, err = d.Commit(ctx, s)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return foldFixture{d: d, idData: d.BTree("id").Dir() + btreeDataFile, nameData: d.BTree("name").Dir() + btreeDataFile,
		invMeta: d.Inverted("name").Dir() + invertedMetadataFile}
}

var foldSpecs = []IndexSpec{{Kind: IndexBTree, Column: "id"}, {Kind: IndexBTree, Column: "name"}, {Kind: IndexInverted, Column: "name"}}

// FuzzIndexFold: whatever bytes the page data of a lagging BTREE or the metadata of a lagging
// INVERTED index hold, folding them never panics; it folds, or builds the index anew from the
// table (a file it cannot read), or fails with a typed format error.
func FuzzIndexFold(f *testing.F) {
	g := goIndexFiles(f)
	for _, k := range []string{"go-btree-id-page_data.lance", "go-btree-name-page_data.lance", "go-inverted-metadata.lance"} {
		f.Add(uint8(0), g[k])
		f.Add(uint8(1), g[k])
		f.Add(uint8(2), g[k])
	}
	// Folds read the page data this process wrote from memory: off, they read the damaged file.
	SetBTreeCacheBytes(0)
	f.Cleanup(func() { SetBTreeCacheBytes(DefaultBTreeCacheBytes) })
	fx := newFoldFixture(f)
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		ctx := context.Background()
		key := []string{fx.idData, fx.nameData, fx.invMeta}[int(which)%3]
		orig, err := fx.d.Store().Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := fx.d.Store().Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = fx.d.Store().Put(ctx, key, orig) }()
		if _, err := fx.d.StageIndices(ctx, foldSpecs, StageOptions{}); err != nil && !typedFormatError(err) {
			t.Fatalf("not a format error: %v", err)
		}
	})
}
