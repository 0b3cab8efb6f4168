package lance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
)

// An INVERTED (full-text) index, as Lance 10 writes it with the default parameters
// (docs/lance-indices.md): four Lance files under _indices/<uuid>/, at the table's data file
// version, one partition (0):
//
//   - metadata.lance: no rows but one, deleted_fragments (an empty roaring bitmap), and the
//     schema metadata naming the partitions, the analyzer parameters and the format;
//   - part_0_tokens.lance: one row: the token map as an FST (token -> token id, ids in order of
//     first appearance), the token count and the tokens' total bytes;
//   - part_0_docs.lance: one row per document (a live row with at least one token): its row id
//     and token count; a document's id is its position here;
//   - part_0_invert.lance: one row per token id: the posting list in blocks of 128 documents,
//     the best BM25 score of any of its documents, its document count and its impact entries.
//
// Lance 8, 10 and 12 all read this layout (index format 2); Lance 12 writes the same.
const (
	InvertedDetailsType = "/lance.table.InvertedIndexDetails"
	// invertedIndexVersion is the index_version Lance 10 records for this layout.
	invertedIndexVersion = 2
	invertedMetadataFile = "metadata.lance"
	invertedBlock        = 128
	invertedImpactGroup  = 32 // blocks per second-level impact entry
	bm25K1               = float32(1.2)
	bm25B                = float32(0.75)
)

// invertedParams is the analyzer parameters as Lance 10 records them in metadata.lance.
const invertedParams = `{"lance_tokenizer":"text","base_tokenizer":"simple","language":"English",` +
	`"with_position":false,"max_token_length":40,"lower_case":true,"stem":true,"remove_stop_words":true,` +
	`"custom_stop_words":null,"ascii_folding":true,"min_ngram_length":3,"max_ngram_length":3,` +
	`"prefix_only":false,"block_size":128,"split_identifiers":false,"split_on_numerics":false,` +
	`"preserve_original":false,"index_operators":false}`

// invertedDetails is the InvertedIndexDetails message Lance 10 writes for the default
// parameters: base_tokenizer "simple", language "\"English\"" (JSON), max_token_length 40,
// lower_case, stem, remove_stop_words, ascii_folding, min and max ngram length 3, block_size
// 128 (with_position and prefix_only false are left out, as proto3 leaves them).
func invertedDetails() []byte {
	var e pb.Encoder
	e.String(1, "simple")
	e.String(2, `"English"`)
	for _, f := range []struct {
		num pb.Number
		v   uint64
	}{{4, 40}, {5, 1}, {6, 1}, {7, 1}, {8, 1}, {9, 3}, {10, 3}, {12, invertedBlock}} {
		e.UintAlways(f.num, f.v)
	}
	return e.B
}

// StageInvertedIndex builds an INVERTED (full-text search) index on a string column over every
// live row of this version, with Lance's default analyzer, and returns the CreateIndex
// transaction that lists it (replacing an index of the same name). Its files are written with
// the transaction, under a new uuid; nothing is visible until Commit. The index covers every
// fragment of this version; null strings and strings without a token are not documents, but
// their rows count as indexed, as in an index the engine builds. Rows of fragments appended
// later are searched by the engines without the index until it is built again.
func (d *Dataset) StageInvertedIndex(ctx context.Context, column string, o IndexOptions) (*Staged, error) {
	return d.stageIndex(ctx, column, o, d.buildInverted)
}

// stageIndex stages the CreateIndex transaction of one index that build encodes on column.
func (d *Dataset) stageIndex(ctx context.Context, column string, o IndexOptions,
	build func(ctx context.Context, column, name string, fo file.Options, w *fileWrites) (Index, error)) (*Staged, error) {
	fo, err := d.fileOptions(o.Stage.FileOptions)
	if err != nil {
		return nil, err
	}
	w := &fileWrites{}
	x, err := build(ctx, column, o.Name, fo, w)
	if err != nil {
		return nil, err
	}
	return d.newStaged(o.Stage, Operation{Kind: OpCreateIndex, NewIndices: []Index{x}}, w), nil
}

// Inverted is the version's INVERTED index on exactly the named column, or nil.
func (d *Dataset) Inverted(column string) *Index {
	return d.indexOn(column, func(x *Index) bool { return x.Kind() == "Inverted" })
}

// ftsWordMemo bounds how many distinct words a build remembers the token of (about 6 MiB at
// most): the words met first are mostly the frequent ones, and past the bound the rest are
// analysed each time they occur.
const ftsWordMemo = 1 << 16

// invertedBuild is one partition being built.
type invertedBuild struct {
	words    map[string]int32  // word -> its token's id, -1 for a dropped word (ftsWordMemo at most)
	ids      map[string]uint32 // token -> token id
	tokens   []string          // by id
	postings [][]uint32        // per token id: doc id, frequency, doc id, frequency, ...
	rowIDs   []uint64          // per doc id
	lengths  []uint32          // per doc id: its token count
	total    uint64            // tokens of every document
	// The document being added: per token id, the document id + 1 it was last seen in and its
	// count there; the token ids in first-seen order.
	seenIn, freq []uint32
	order        []uint32
}

// add tokenizes one document; a document without tokens is left out.
func (b *invertedBuild) add(rowID uint64, text string) {
	b.order = b.order[:0]
	doc := uint32(len(b.rowIDs))
	n := uint32(0)
	ftsWords(text, func(w string) {
		word, known := b.words[w]
		if !known {
			word = b.token(w)
			if len(b.words) < ftsWordMemo {
				b.words[strings.Clone(w)] = word // w is a view of the column's buffer
			}
		}
		if word < 0 {
			return
		}
		id := uint32(word)
		if b.seenIn[id] != doc+1 {
			b.seenIn[id], b.freq[id] = doc+1, 0
			b.order = append(b.order, id)
		}
		b.freq[id]++
		n++
	})
	if n == 0 {
		return
	}
	for _, id := range b.order {
		b.postings[id] = append(b.postings[id], doc, b.freq[id])
	}
	b.rowIDs = append(b.rowIDs, rowID)
	b.lengths = append(b.lengths, n)
	b.total += uint64(n)
}

// token analyses one word and returns its token's id, the token added if new; -1 when the
// word is dropped.
func (b *invertedBuild) token(w string) int32 {
	tok, ok := ftsToken(w)
	if !ok {
		return -1
	}
	if id, ok := b.ids[tok]; ok {
		return int32(id)
	}
	return int32(b.newToken(strings.Clone(tok))) // it may still be a view of the column's buffer
}

// newToken adds token tok, which b may keep, and returns its id.
func (b *invertedBuild) newToken(tok string) uint32 {
	id := uint32(len(b.tokens))
	b.ids[tok] = id
	b.tokens = append(b.tokens, tok)
	b.postings = append(b.postings, nil)
	b.seenIn = append(b.seenIn, 0)
	b.freq = append(b.freq, 0)
	return id
}

func (d *Dataset) buildInverted(ctx context.Context, column, name string, fo file.Options, w *fileWrites) (Index, error) {
	if name == "" {
		name = column + "_idx"
	}
	refuse := func(reason string) (Index, error) {
		return Index{}, &IndexError{Dataset: d.dir.URI(), Index: name, Op: OpCreateIndex, Reason: reason}
	}
	f := d.Schema().Field(column)
	if f == nil {
		return refuse(fmt.Sprintf("no column %q", column))
	}
	af, err := f.ToArrow()
	if err != nil {
		return Index{}, err
	}
	if af.Type.ID() != arrow.STRING && af.Type.ID() != arrow.LARGE_STRING {
		return refuse(fmt.Sprintf("column %q is %s: an INVERTED index here indexes strings", column, af.Type))
	}
	b, rows, err := d.invertColumn(ctx, column, nil)
	if err != nil {
		return Index{}, err
	}
	if rows == 0 {
		return refuse("the table has no rows to index")
	}
	if len(b.tokens) == 0 {
		return refuse(fmt.Sprintf("column %q has no token to index", column))
	}

	x, err := d.newIndexMeta(f.ID, name, &IndexDetails{TypeURL: InvertedDetailsType, Value: invertedDetails()}, invertedIndexVersion)
	if err != nil {
		return Index{}, err
	}
	files, err := b.records(0)
	if err != nil {
		return Index{}, fmt.Errorf("lance: INVERTED index on %s: %w", column, err)
	}
	files = append(files, namedRecord{invertedMetadataFile, invertedMetadata([]uint64{0}, encodePortableRoaring(nil))})
	if err := writeNamedRecords(x, column, files, fo, w); err != nil {
		return Index{}, err
	}
	return x, nil
}

// newInvertedBuild is an empty partition to build.
func newInvertedBuild() *invertedBuild {
	return &invertedBuild{words: map[string]int32{}, ids: map[string]uint32{}}
}

// invertColumn tokenizes the string column of the live rows of fragments (nil: every
// fragment) into one new partition; rows is how many rows it read.
func (d *Dataset) invertColumn(ctx context.Context, column string, fragments []uint64) (b *invertedBuild, rows int, err error) {
	b = newInvertedBuild()
	rows, err = d.invertInto(ctx, nil, b, column, fragments)
	return b, rows, err
}

// invertInto tokenizes the column's rows of fragments into b, after the documents b holds,
// read through reads (nil: a scan of their own).
func (d *Dataset) invertInto(ctx context.Context, reads *foldReads, b *invertedBuild, column string, fragments []uint64) (rows int, err error) {
	recs, err := d.readIndexed(ctx, reads, column, fragments)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	// The documents' row ids and lengths sized up front: grown by appending, their copies were
	// most of what tokenizing allocated besides the postings.
	docs := len(b.rowIDs)
	for _, r := range recs {
		docs += int(r.NumRows() - int64(r.Column(0).NullN()))
	}
	b.rowIDs = slices.Grow(b.rowIDs, docs-len(b.rowIDs))
	b.lengths = slices.Grow(b.lengths, docs-len(b.lengths))
	for _, r := range recs {
		ids := r.Column(1).(*array.Uint64).Uint64Values()
		col := r.Column(0)
		rows += int(r.NumRows())
		for i := range ids {
			if col.IsNull(i) {
				continue
			}
			var s string
			if c, ok := col.(*array.String); ok {
				s = c.Value(i)
			} else {
				s = col.(*array.LargeString).Value(i)
			}
			b.add(ids[i], s)
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
	return rows, nil
}

// merge appends the documents and postings of partition p after those b holds, as one
// partition: p's document ids move up by the documents before them, and its tokens join b's.
func (b *invertedBuild) merge(p *decodedInverted) {
	base := uint32(len(b.rowIDs))
	b.rowIDs = append(b.rowIDs, p.rowIDs...)
	b.lengths = append(b.lengths, p.lengths...)
	for _, n := range p.lengths {
		b.total += uint64(n)
	}
	for t, tok := range p.tokens {
		id, ok := b.ids[tok]
		if !ok {
			id = b.newToken(tok)
		}
		post := b.postings[id]
		for k := 0; k < len(p.postings[t]); k += 2 {
			post = append(post, base+p.postings[t][k], p.postings[t][k+1])
		}
		b.postings[id] = post
	}
}

// writeNamedRecords encodes an index's records as files of its directory into w; it releases
// the records.
func writeNamedRecords(x Index, column string, files []namedRecord, fo file.Options, w *fileWrites) error {
	var err error
	for _, part := range files {
		var data []byte
		if err == nil {
			if data, err = encodeIndexFile(part.rec, fo); err != nil {
				err = fmt.Errorf("lance: index %s on %s: %s: %w", x.Name, column, part.name, err)
			} else {
				w.add(x.Dir()+part.name, data, "lance.write_index_file", "index file")
			}
		}
		part.rec.Release()
	}
	return err
}

type namedRecord struct {
	name string
	rec  arrow.Record
}

// invertedMeta is schema metadata of the key, value pairs kv.
func invertedMeta(kv ...string) *arrow.Metadata {
	var ks, vs []string
	for i := 0; i < len(kv); i += 2 {
		ks, vs = append(ks, kv[i]), append(vs, kv[i+1])
	}
	m := arrow.NewMetadata(ks, vs)
	return &m
}

// invertedFormat are the metadata keys of the posting format this package writes.
var invertedFormat = []string{"format_version", "2", "posting_block_size", strconv.Itoa(invertedBlock), "posting_tail_codec", "varint_delta_v1"}

// invertedMetadata is metadata.lance's record: the partitions, the analyzer parameters and the
// format in its schema metadata, and one row, deleted_fragments (a portable roaring bitmap).
func invertedMetadata(partitions []uint64, deleted []byte) arrow.Record {
	parts, _ := json.Marshal(partitions)
	ms := arrow.NewSchema([]arrow.Field{{Name: "deleted_fragments", Type: arrow.BinaryTypes.Binary}},
		invertedMeta(append([]string{"partitions", string(parts), "params", invertedParams, "token_set_format", "fst"}, invertedFormat...)...))
	mb := array.NewRecordBuilder(memory.DefaultAllocator, ms)
	defer mb.Release()
	mb.Field(0).(*array.BinaryBuilder).Append(deleted)
	return mb.NewRecord()
}

// partFile is the name of a partition's file: part_<id>_<kind>.lance.
func partFile(id uint64, kind string) string { return fmt.Sprintf("part_%d_%s.lance", id, kind) }

// records encodes the partition as partition part's three files' records.
func (b *invertedBuild) records(part uint64) ([]namedRecord, error) {
	mem := memory.DefaultAllocator
	var out []namedRecord
	meta, format := invertedMeta, invertedFormat

	// part_<part>_tokens.lance
	m := make(map[string]uint64, len(b.tokens))
	var tokenBytes uint64
	for id, t := range b.tokens {
		m[t] = uint64(id)
		tokenBytes += uint64(len(t))
	}
	ts := arrow.NewSchema([]arrow.Field{{Name: "_token_fst_bytes", Type: arrow.BinaryTypes.LargeBinary},
		{Name: "_token_next_id", Type: arrow.PrimitiveTypes.Uint32}, {Name: "_token_total_length", Type: arrow.PrimitiveTypes.Uint64}}, nil)
	tb := array.NewRecordBuilder(mem, ts)
	tb.Field(0).(*array.BinaryBuilder).Append(buildFST(m))
	tb.Field(1).(*array.Uint32Builder).Append(uint32(len(b.tokens)))
	tb.Field(2).(*array.Uint64Builder).Append(tokenBytes)
	out = append(out, namedRecord{partFile(part, "tokens"), tb.NewRecord()})
	tb.Release()

	// part_<part>_docs.lance
	ds := arrow.NewSchema([]arrow.Field{{Name: "_rowid", Type: arrow.PrimitiveTypes.Uint64}, {Name: "_num_tokens", Type: arrow.PrimitiveTypes.Uint32}},
		meta("total_tokens", strconv.FormatUint(b.total, 10)))
	db := array.NewRecordBuilder(mem, ds)
	db.Field(0).(*array.Uint64Builder).AppendValues(b.rowIDs, nil)
	db.Field(1).(*array.Uint32Builder).AppendValues(b.lengths, nil)
	out = append(out, namedRecord{partFile(part, "docs"), db.NewRecord()})
	db.Release()

	// part_<part>_invert.lance
	binList := arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.LargeBinary, Nullable: true})
	is := arrow.NewSchema([]arrow.Field{{Name: "_posting", Type: binList}, {Name: "_max_score", Type: arrow.PrimitiveTypes.Float32},
		{Name: "_length", Type: arrow.PrimitiveTypes.Uint32}, {Name: "_impacts", Type: binList}}, meta(format...))
	ib := array.NewRecordBuilder(mem, is)
	defer ib.Release()
	postings := ib.Field(0).(*array.ListBuilder)
	postingBlocks := postings.ValueBuilder().(*array.BinaryBuilder)
	impacts := ib.Field(3).(*array.ListBuilder)
	impactEntries := impacts.ValueBuilder().(*array.BinaryBuilder)
	sc := newBM25(len(b.rowIDs), b.total)
	for id := range b.tokens {
		p := b.postings[id]
		blocks, best := encodePosting(p, b.lengths, sc)
		postings.Append(true)
		for _, blk := range blocks {
			postingBlocks.Append(blk)
		}
		ib.Field(1).(*array.Float32Builder).Append(best)
		ib.Field(2).(*array.Uint32Builder).Append(uint32(len(p) / 2))
		impacts.Append(true)
		for _, e := range encodeImpacts(p, b.lengths) {
			impactEntries.Append(e)
		}
	}
	out = append(out, namedRecord{partFile(part, "invert"), ib.NewRecord()})
	return out, nil
}

// bm25 holds a partition's statistics for the scores stored in the posting blocks, computed in
// float32 in Lance's order of operations.
type bm25 struct {
	docs  int
	avgdl float32
}

func newBM25(docs int, total uint64) bm25 {
	return bm25{docs: docs, avgdl: float32(total) / float32(docs)}
}

// idf is ln((N - n + 0.5) / (n + 0.5) + 1) for a token in n of the N documents.
func (s bm25) idf(n int) float32 {
	N, nf := float32(s.docs), float32(n)
	x := float32(float32(float32(N-nf)+0.5)/float32(nf+0.5)) + 1
	return float32(math.Log(float64(x)))
}

// partial is f / (f + K1 (1 - B + B dl / avgdl)), the part of a document's BM25 weight that
// depends on the document.
func (s bm25) partial(freq, docLen uint32) float32 {
	f := float32(freq)
	norm := bm25K1 * float32(float32(1-bm25B)+float32(float32(bm25B*float32(docLen))/s.avgdl))
	return f / float32(f+norm)
}

// encodePosting encodes a posting list (doc id, frequency pairs, ascending doc ids) as its
// blocks, and returns the best block score. A block starts with its best score (f32). A full
// block of 128 documents then holds the first doc id (u32), and the doc id deltas (the first
// 0) and the frequencies, each as a bit width (u8) and 128 values bit-packed BitPacker4x-style.
// The last block, when not full, holds varints instead: the doc ids as deltas from the
// previous one (the first as it is), then the frequencies.
func encodePosting(p []uint32, lengths []uint32, sc bm25) ([][]byte, float32) {
	n := len(p) / 2
	scale := sc.idf(n) * (bm25K1 + 1)
	var blocks [][]byte
	best := float32(0)
	for start := 0; start < n; start += invertedBlock {
		end := min(n, start+invertedBlock)
		top := float32(-math.MaxFloat32)
		for i := start; i < end; i++ {
			top = max(top, sc.partial(p[2*i+1], lengths[p[2*i]]))
		}
		score := float32(top * scale)
		if start == 0 || score > best {
			best = score
		}
		blk := binary.LittleEndian.AppendUint32(nil, math.Float32bits(score))
		if end-start == invertedBlock {
			var docs, freqs [invertedBlock]uint32
			first := p[2*start]
			prev := first
			for k := range invertedBlock {
				doc := p[2*(start+k)]
				docs[k], prev = doc-prev, doc
				freqs[k] = p[2*(start+k)+1]
			}
			blk = binary.LittleEndian.AppendUint32(blk, first)
			blk = appendPacked4x(blk, &docs)
			blk = appendPacked4x(blk, &freqs)
		} else {
			prev := uint32(0)
			for i := start; i < end; i++ {
				blk = binary.AppendUvarint(blk, uint64(p[2*i]-prev))
				prev = p[2*i]
			}
			for i := start; i < end; i++ {
				blk = binary.AppendUvarint(blk, uint64(p[2*i+1]))
			}
		}
		blocks = append(blocks, blk)
	}
	return blocks, best
}

// appendPacked4x appends the bit width of the largest value (u8) and the 128 values packed in
// that many bits each, as BitPacker4x lays them out: value i goes to lane i%4, each lane's 32
// values fill its bit stream from the least significant bit of 32-bit words, and word w of lane
// j is stored as little-endian u32 number 4w+j.
func appendPacked4x(b []byte, v *[invertedBlock]uint32) []byte {
	var or uint32
	for _, x := range v {
		or |= x
	}
	width := bits.Len32(or)
	b = append(b, byte(width))
	if width == 0 {
		return b
	}
	words := make([]uint32, 4*width)
	for i, x := range v {
		lane, k := i%4, i/4
		bit := k * width
		w, off := bit/32, bit%32
		words[4*w+lane] |= x << off
		if off+width > 32 {
			words[4*(w+1)+lane] |= x >> (32 - off)
		}
	}
	for _, w := range words {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}

// encodeImpacts encodes a posting list's impact entries: one per block, then one per group of
// 32 blocks. An entry is the varints "last doc id" and "pair count", then the frontier of
// (frequency, quantized document length) pairs no other document of the entry beats on both:
// each as the varint (frequency delta - 1) << 1 | explicit, followed, when explicit, by a byte
// with the quantized length's delta (a delta of 1 is implied otherwise).
func encodeImpacts(p []uint32, lengths []uint32) [][]byte {
	n := len(p) / 2
	var level0, level1 [][]byte
	groupStart := 0
	for start := 0; start < n; start += invertedBlock {
		end := min(n, start+invertedBlock)
		level0 = append(level0, impactEntry(p[2*start:2*end], lengths))
		if len(level0)%invertedImpactGroup == 0 || end == n {
			level1 = append(level1, impactEntry(p[2*groupStart:2*end], lengths))
			groupStart = end
		}
	}
	return append(level0, level1...)
}

func impactEntry(p []uint32, lengths []uint32) []byte {
	n := len(p) / 2
	// The shortest document per frequency, then the pairs that beat every pair of a higher
	// frequency on length (the frontier: frequency and length both increasing).
	shortest := map[uint32]uint32{}
	for i := 0; i < n; i++ {
		f, l := p[2*i+1], lengths[p[2*i]]
		if s, ok := shortest[f]; !ok || l < s {
			shortest[f] = l
		}
	}
	freqs := make([]uint32, 0, len(shortest))
	for f := range shortest {
		freqs = append(freqs, f)
	}
	slices.Sort(freqs)
	type pair struct {
		freq uint32
		norm uint8
	}
	var frontier []pair
	bestLen := uint32(math.MaxUint32)
	var raw []pair
	var rawLens []uint32
	for i := len(freqs) - 1; i >= 0; i-- {
		if l := shortest[freqs[i]]; l < bestLen {
			raw = append(raw, pair{freq: freqs[i]})
			rawLens = append(rawLens, l)
			bestLen = l
		}
	}
	for i := len(raw) - 1; i >= 0; i-- { // ascending frequency and length
		q := quantizeDocLength(rawLens[i])
		if k := len(frontier); k > 0 && frontier[k-1].norm == q {
			frontier[k-1].freq = raw[i].freq // the same quantized length: the higher frequency wins
			continue
		}
		frontier = append(frontier, pair{freq: raw[i].freq, norm: q})
	}
	e := binary.AppendUvarint(nil, uint64(p[2*(n-1)]))
	e = binary.AppendUvarint(e, uint64(len(frontier)))
	prevFreq, prevNorm := uint32(0), uint8(0)
	for _, q := range frontier {
		delta := q.norm - prevNorm
		explicit := uint64(0)
		if delta != 1 {
			explicit = 1
		}
		e = binary.AppendUvarint(e, uint64(q.freq-prevFreq-1)<<1|explicit)
		if explicit == 1 {
			e = append(e, delta)
		}
		prevFreq, prevNorm = q.freq, q.norm
	}
	return e
}

// quantizeDocLength is the one-byte document length of the impact entries: lengths below 8
// as they are, longer ones as their top four significant bits (three stored) and a shift.
func quantizeDocLength(v uint32) uint8 {
	n := bits.Len32(v)
	if n < 4 {
		return uint8(v)
	}
	shift := n - 4
	return uint8((v>>shift)&0x07) | uint8(shift+1)<<3
}
