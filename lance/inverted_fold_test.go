package lance

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// texted is rows of ids whose name is a short text naming the id's word.
func texted(ids ...int64) ([]arrow.Record, map[int64]string) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testArrow)
	defer b.Release()
	texts := map[int64]string{}
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		s := fmt.Sprintf("doc%d about %s", id, []string{"graphs", "tables", "vectors"}[id%3])
		texts[id] = s
		b.Field(1).(*array.StringBuilder).Append(s)
	}
	return []arrow.Record{b.NewRecord()}, texts
}

// invertedPartitions reads index x's partitions: the metadata's list, and each partition
// decoded.
func invertedPartitions(t *testing.T, d *Dataset, x *Index) ([]uint64, []*decodedInverted) {
	t.Helper()
	ctx := context.Background()
	parts, _, err := readInvertedMetadata(ctx, d.Store(), x)
	if err != nil || parts == nil {
		t.Fatalf("metadata of %s: %v %v", x.Name, parts, err)
	}
	var out []*decodedInverted
	for _, p := range parts {
		files, err := partitionFiles(ctx, d.Store(), x, p)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := decodeInverted(files[0], files[1], files[2])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, dec)
	}
	return parts, out
}

// matching is the live ids whose documents hold token, over every partition of x.
func matching(t *testing.T, d *Dataset, x *Index, token string) []int64 {
	t.Helper()
	_, parts := invertedPartitions(t, d, x)
	var rowIDs []uint64
	for _, p := range parts {
		tok := slices.Index(p.tokens, token)
		if tok < 0 {
			continue
		}
		for i := 0; i < len(p.postings[tok]); i += 2 {
			rowIDs = append(rowIDs, p.rowIDs[p.postings[tok][i]])
		}
	}
	live := map[uint64]int64{}
	recs, err := d.ReadAll(context.Background(), ScanOptions{Columns: []string{"id"}, WithRowID: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			live[r.Column(1).(*array.Uint64).Value(i)] = r.Column(0).(*array.Int64).Value(i)
		}
		r.Release()
	}
	var out []int64
	for _, id := range rowIDs {
		if v, ok := live[id]; ok {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// A lagging INVERTED index is folded: its partitions kept byte for byte, one more holding the
// documents of the fragments it did not cover, under its name, covering every fragment; the
// documents of every partition, live rows only, are exactly the rows whose text holds a token.
// At invertedFoldPartitions partitions they are merged into one.
func TestInvertedFoldAddsAPartition(t *testing.T) {
	ctx := context.Background()
	recs, texts := texted(seq(0, 300)...)
	d, err := Create(ctx, memStore(t), testSchema(t), recs, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageInvertedIndex(ctx, "name", IndexOptions{})
	d = commit(t, d, s, err)
	first := *d.Inverted("name")
	firstTokens, _ := d.Store().Get(ctx, first.Dir()+partFile(0, "tokens"))

	more, moreTexts := texted(seq(300, 360)...)
	for k, v := range moreTexts {
		texts[k] = v
	}
	s, err = d.StageAppend(ctx, more, StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageDelete(ctx, In("id", 3, 303), StageOptions{})
	d = commit(t, d, s, err)
	delete(texts, 3)
	delete(texts, 303)
	s, err = d.StageIndices(ctx, []IndexSpec{{Column: "name", Kind: IndexInverted}}, StageOptions{})
	d = commit(t, d, s, err)

	x := d.Inverted("name")
	if x.UUID == first.UUID || x.Name != "name_idx" || len(d.Indices()) != 1 {
		t.Fatalf("after the fold: %+v", d.Indices())
	}
	if rows, _ := d.Uncovered(x); rows != 0 {
		t.Fatalf("the folded index leaves %d rows uncovered", rows)
	}
	parts, decoded := invertedPartitions(t, d, x)
	if !slices.Equal(parts, []uint64{0, 1}) || len(decoded[1].rowIDs) != 59 { // 303 was deleted before the fold
		t.Fatalf("partitions %v, the new one with %d documents", parts, len(decoded[1].rowIDs))
	}
	if b, _ := d.Store().Get(ctx, x.Dir()+partFile(0, "tokens")); !bytes.Equal(b, firstTokens) {
		t.Fatal("the old partition was not kept as it was")
	}
	check := func(stage string) {
		t.Helper()
		for _, word := range []string{"graph", "tabl", "vector", "doc7", "doc3", "doc303", "doc350", "about"} {
			var want []int64
			for id, text := range texts {
				if slices.Contains(tokensOf(text), word) {
					want = append(want, id)
				}
			}
			slices.Sort(want)
			if got := matching(t, d, d.Inverted("name"), word); !slices.Equal(got, want) {
				t.Fatalf("%s: %q: index %v, scan %v", stage, word, got, want)
			}
		}
	}
	check("folded once")

	for k := int64(0); k < invertedFoldPartitions; k++ {
		more, moreTexts := texted(400 + k)
		for id, v := range moreTexts {
			texts[id] = v
		}
		s, err = d.StageAppend(ctx, more, StageOptions{})
		d = commit(t, d, s, err)
		s, err = d.StageIndices(ctx, []IndexSpec{{Column: "name", Kind: IndexInverted}}, StageOptions{})
		d = commit(t, d, s, err)
	}
	if parts, _ := invertedPartitions(t, d, d.Inverted("name")); len(parts) >= invertedFoldPartitions {
		t.Fatalf("%d partitions after %d folds", len(parts), invertedFoldPartitions+1)
	}
	check("folded many times")
}

// An INVERTED index written with another analyzer than this package's is built anew, not
// folded: a partition tokenized differently would not answer the same query.
func TestInvertedFoldRefusesAnotherAnalyzer(t *testing.T) {
	ctx := context.Background()
	recs, _ := texted(seq(0, 20)...)
	d, err := Create(ctx, memStore(t), testSchema(t), recs, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageInvertedIndex(ctx, "name", IndexOptions{})
	d = commit(t, d, s, err)
	// Rewrite the metadata with stemming off.
	x := d.Inverted("name")
	meta := invertedMetadata([]uint64{0}, encodePortableRoaring(nil))
	md := meta.Schema().Metadata()
	vals := md.Values()
	vals[md.FindKey("params")] = string(bytes.Replace([]byte(invertedParams), []byte(`"stem":true`), []byte(`"stem":false`), 1))
	changed := arrow.NewMetadata(md.Keys(), vals)
	rec := array.NewRecord(arrow.NewSchema(meta.Schema().Fields(), &changed), meta.Columns(), meta.NumRows())
	fo, err := d.fileOptions(file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeIndexFile(rec, fo)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Store().Put(ctx, x.Dir()+invertedMetadataFile, b); err != nil {
		t.Fatal(err)
	}
	more, _ := texted(100)
	s, err = d.StageAppend(ctx, more, StageOptions{})
	d = commit(t, d, s, err)
	w := &fileWrites{}
	if _, ok, err := d.foldInverted(ctx, nil, d.Inverted("name"), "name", fo, w); ok || err != nil {
		t.Fatalf("folded an index of another analyzer: %v %v", ok, err)
	}
	// Nor is a full-text index of a column that is not a string (as the engines index lists).
	onID := d.Inverted("name").clone()
	onID.Fields = []int32{d.Schema().Field("id").ID}
	if _, ok, err := d.foldInverted(ctx, nil, &onID, "id", fo, w); ok || err != nil {
		t.Fatalf("folded a full-text index of an integer column: %v %v", ok, err)
	}
	s, err = d.StageIndices(ctx, []IndexSpec{{Column: "name", Kind: IndexInverted}}, StageOptions{})
	d = commit(t, d, s, err)
	if parts, _ := invertedPartitions(t, d, d.Inverted("name")); !slices.Equal(parts, []uint64{0}) {
		t.Fatalf("rebuilt as partitions %v", parts)
	}
}

// An INVERTED index one of whose partition files is gone is built anew, and the fold that gave
// up midway leaves no file behind: the store then holds the old index's directory and the new
// one's only.
func TestInvertedFoldGivingUpLeavesNoFiles(t *testing.T) {
	ctx := context.Background()
	recs, _ := texted(seq(0, 50)...)
	d, err := Create(ctx, memStore(t), testSchema(t), recs, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageInvertedIndex(ctx, "name", IndexOptions{})
	d = commit(t, d, s, err)
	old := *d.Inverted("name")
	if err := d.Store().Delete(ctx, old.Dir()+partFile(0, "invert")); err != nil {
		t.Fatal(err)
	}
	more, _ := texted(100, 101)
	s, err = d.StageAppend(ctx, more, StageOptions{})
	d = commit(t, d, s, err)
	s, err = d.StageIndices(ctx, []IndexSpec{{Column: "name", Kind: IndexInverted}}, StageOptions{})
	d = commit(t, d, s, err)
	x := d.Inverted("name")
	if parts, _ := invertedPartitions(t, d, x); !slices.Equal(parts, []uint64{0}) {
		t.Fatalf("rebuilt as partitions %v", parts)
	}
	objs, err := d.Store().List(ctx, "_indices/")
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, o := range objs {
		dirs[strings.Split(strings.TrimPrefix(o.Key, "_indices/"), "/")[0]] = true
	}
	if len(dirs) != 2 || !dirs[old.UUIDString()] || !dirs[x.UUIDString()] {
		t.Fatalf("index directories %v, want the old %s and the new %s", dirs, old.UUIDString(), x.UUIDString())
	}
}

// postingsByRow is, per token, the frequency of the token in each row's document, and per row
// its document's length, over the partitions ps.
func postingsByRow(ps ...*decodedInverted) (map[string]map[uint64]uint32, map[uint64]uint32) {
	toks, lens := map[string]map[uint64]uint32{}, map[uint64]uint32{}
	for _, p := range ps {
		for doc, row := range p.rowIDs {
			lens[row] = p.lengths[doc]
		}
		for t, tok := range p.tokens {
			if toks[tok] == nil {
				toks[tok] = map[uint64]uint32{}
			}
			for k := 0; k < len(p.postings[t]); k += 2 {
				toks[tok][p.rowIDs[p.postings[t][k]]] = p.postings[t][k+1]
			}
		}
	}
	return toks, lens
}

// At invertedFoldPartitions partitions a fold merges them and the new rows into one partition
// from the index's files: the same documents and postings as a build over the table, the same
// BM25 block scores; and the documents of rows deleted since are kept, as the partitions held
// them (a build from the table would drop them). Holding more than foldDeadShare times the
// documents of the live rows, the index is built anew instead, without them.
func TestInvertedFoldMergesPartitionsAtTheLimit(t *testing.T) {
	ctx := context.Background()
	recs, _ := texted(seq(0, 200)...)
	d, err := Create(ctx, memStore(t), testSchema(t), recs, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageInvertedIndex(ctx, "name", IndexOptions{})
	d = commit(t, d, s, err)
	fold := func(ids ...int64) {
		t.Helper()
		more, _ := texted(ids...)
		s, err := d.StageAppend(ctx, more, StageOptions{})
		d = commit(t, d, s, err)
		s, err = d.StageIndices(ctx, []IndexSpec{{Column: "name", Kind: IndexInverted}}, StageOptions{})
		d = commit(t, d, s, err)
	}
	for k := int64(1); k < invertedFoldPartitions; k++ {
		fold(1000*k, 1000*k+1)
	}
	if parts, _ := invertedPartitions(t, d, d.Inverted("name")); len(parts) != invertedFoldPartitions {
		t.Fatalf("%d partitions before the merge", len(parts))
	}
	fold(seq(9000, 9300)...)
	parts, merged := invertedPartitions(t, d, d.Inverted("name"))
	if !slices.Equal(parts, []uint64{invertedFoldPartitions}) {
		t.Fatalf("partitions %v after the merge", parts)
	}
	fresh, _, err := d.invertColumn(ctx, "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	recsOf, err := fresh.records(0)
	if err != nil {
		t.Fatal(err)
	}
	var enc [3][]byte
	fo, _ := d.fileOptions(file.Options{})
	for i, r := range recsOf {
		if enc[i], err = encodeIndexFile(r.rec, fo); err != nil {
			t.Fatal(err)
		}
	}
	built, err := decodeInverted(enc[0], enc[1], enc[2])
	if err != nil {
		t.Fatal(err)
	}
	gotToks, gotLens := postingsByRow(merged[0])
	wantToks, wantLens := postingsByRow(built)
	if !reflect.DeepEqual(gotToks, wantToks) || !reflect.DeepEqual(gotLens, wantLens) {
		t.Fatalf("merged: %d tokens over %d documents; built from the table: %d over %d, or other postings", len(gotToks), len(gotLens), len(wantToks), len(wantLens))
	}
	for t2, tok := range built.tokens {
		if m := merged[0].maxScore[slices.Index(merged[0].tokens, tok)]; m != built.maxScore[t2] {
			t.Fatalf("token %q: merged max score %v, built %v", tok, m, built.maxScore[t2])
		}
	}

	// Rows deleted since keep their documents through a merge ...
	for k := int64(1); k < invertedFoldPartitions; k++ {
		fold(20000 + k)
	}
	s, err = d.StageDelete(ctx, In("id", 7), StageOptions{})
	d = commit(t, d, s, err)
	fold(30000)
	parts, merged = invertedPartitions(t, d, d.Inverted("name"))
	if len(parts) != 1 || len(merged[0].rowIDs) != int(d.CountRows())+1 {
		t.Fatalf("partitions %v, %d documents for %d live rows and one deleted", parts, len(merged[0].rowIDs), d.CountRows())
	}
	// ... until they are most of the documents: then the index is built from the table.
	for k := int64(1); k < invertedFoldPartitions; k++ {
		fold(40000 + k)
	}
	s, err = d.StageDelete(ctx, Filter{SQL: "id < 9200", Columns: []string{"id"}, Match: func(rec arrow.Record) ([]bool, error) {
		ids := rec.Column(0).(*array.Int64)
		m := make([]bool, ids.Len())
		for i := range m {
			m[i] = ids.Value(i) < 9200
		}
		return m, nil
	}}, StageOptions{})
	d = commit(t, d, s, err)
	fold(50000)
	parts, merged = invertedPartitions(t, d, d.Inverted("name"))
	if len(parts) != 1 || len(merged[0].rowIDs) != int(d.CountRows()) {
		t.Fatalf("partitions %v, %d documents for %d live rows", parts, len(merged[0].rowIDs), d.CountRows())
	}
}
