package lance

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// Reading back an INVERTED partition in the layout this package writes (format 2, fst token
// set, 128-row posting blocks, varint_delta_v1 tails), so that a fold at the partition limit
// merges the partitions' postings instead of reading and tokenizing the whole column again.
// Every count, offset and document id is checked: a damaged partition is a *FormatError, and
// the fold then builds the index anew.

// decodedInverted is one INVERTED partition read back from its files.
type decodedInverted struct {
	tokens   []string   // by token id
	rowIDs   []uint64   // by doc id
	lengths  []uint32   // by doc id
	postings [][]uint32 // by token id: doc, freq, doc, freq, ... in doc order
	maxScore []float32  // by token id
}

// invertedPartitionMaxTokens bounds the tokens a partition's token map may claim.
const invertedPartitionMaxTokens = 1 << 30

// decodeInverted reads part_<n>_{tokens,docs,invert}.lance of one partition.
func decodeInverted(tokens, docs, invert []byte) (*decodedInverted, error) {
	out := &decodedInverted{}
	var err error
	if out.tokens, err = readTokenFile(tokens, invertedPartitionMaxTokens); err != nil {
		return nil, err
	}
	dc, release, err := readIndexColumns(docs, "docs")
	if err != nil {
		return nil, err
	}
	defer release()
	if len(dc) != 2 {
		return nil, invertedFormatError("docs", fmt.Sprintf("%d columns, want 2", len(dc)))
	}
	rowIDs, ok0 := dc[0].(*array.Uint64)
	lengths, ok1 := dc[1].(*array.Uint32)
	if !ok0 || !ok1 || rowIDs.NullN() > 0 || lengths.NullN() > 0 || rowIDs.Len() != lengths.Len() {
		return nil, invertedFormatError("docs", "want two columns, row ids (uint64) and token counts (uint32), without nulls")
	}
	out.rowIDs, out.lengths = rowIDs.Uint64Values(), lengths.Uint32Values()

	ic, release2, err := readIndexColumns(invert, "invert")
	if err != nil {
		return nil, err
	}
	defer release2()
	if len(ic) < 3 {
		return nil, invertedFormatError("invert", "want _posting, _max_score and _length columns")
	}
	lists, ok0 := ic[0].(*array.List)
	scores, ok1 := ic[1].(*array.Float32)
	lens, ok2 := ic[2].(*array.Uint32)
	if !ok0 || !ok1 || !ok2 || lists.Len() != len(out.tokens) || scores.Len() != lists.Len() || lens.Len() != lists.Len() || lens.NullN() > 0 {
		return nil, invertedFormatError("invert", fmt.Sprintf("want one posting list, score and length per token of %d", len(out.tokens)))
	}
	blocks, ok := lists.ListValues().(*array.LargeBinary)
	if !ok {
		return nil, invertedFormatError("invert", "posting blocks are not large binary")
	}
	out.maxScore = scores.Float32Values()
	docCount := uint32(len(out.rowIDs))
	for t := 0; t < lists.Len(); t++ {
		from, to := lists.ValueOffsets(t)
		n := int(lens.Value(t))
		if n == 0 || n > len(out.rowIDs) {
			return nil, invertedFormatError("invert", fmt.Sprintf("token %d: %d postings in a partition of %d documents", t, n, len(out.rowIDs)))
		}
		p := make([]uint32, 0, 2*n)
		for k := from; k < to; k++ {
			if p, err = decodePostingBlock(blocks.Value(int(k)), n-len(p)/2, p); err != nil {
				return nil, invertedFormatError("invert", fmt.Sprintf("token %d block %d: %v", t, k-from, err))
			}
		}
		if len(p)/2 != n {
			return nil, invertedFormatError("invert", fmt.Sprintf("token %d: %d postings, _length %d", t, len(p)/2, n))
		}
		for k := 0; k < len(p); k += 2 {
			if p[k] >= docCount || k > 0 && p[k] <= p[k-2] || p[k+1] == 0 {
				return nil, invertedFormatError("invert", fmt.Sprintf("token %d: posting %d is document %d, frequency %d", t, k/2, p[k], p[k+1]))
			}
		}
		out.postings = append(out.postings, p)
	}
	return out, nil
}

func invertedFormatError(kind, reason string) error {
	return &FormatError{File: "INVERTED partition " + kind, Offset: -1, Reason: reason}
}

// readIndexColumns reads every row of the one-record index file b.
func readIndexColumns(b []byte, what string) ([]arrow.Array, func(), error) {
	ctx := context.Background()
	r, err := file.Open(ctx, file.BytesSource(b), what)
	if err != nil {
		return nil, nil, err
	}
	rec, err := readIndexRows(ctx, r, what, 0, r.NumRows())
	if err != nil {
		return nil, nil, err
	}
	return rec.Columns(), rec.Release, nil
}

// readTokenFile reads part_<n>_tokens.lance: its one LargeBinary row, an FST of the tokens and
// their ids, as the tokens by id. A file that is not one is a *FormatError (or the file
// package's).
func readTokenFile(b []byte, maxKeys uint64) ([]string, error) {
	tc, release, err := readIndexColumns(b, "tokens")
	if err != nil {
		return nil, err
	}
	defer release()
	if len(tc) < 1 {
		return nil, invertedFormatError("tokens", "no columns")
	}
	fst, ok := tc[0].(*array.LargeBinary)
	if !ok || fst.Len() != 1 || fst.IsNull(0) {
		return nil, invertedFormatError("tokens", fmt.Sprintf("want one LargeBinary FST, have %d rows of %T", tc[0].Len(), tc[0]))
	}
	keys, vals, err := readFST(fst.Value(0), maxKeys)
	if err != nil {
		return nil, err
	}
	tokens := make([]string, len(keys))
	seen := make([]bool, len(keys))
	for i, k := range keys {
		if vals[i] >= uint64(len(keys)) || seen[vals[i]] {
			return nil, invertedFormatError("tokens", fmt.Sprintf("token %q: id %d", k, vals[i]))
		}
		tokens[vals[i]], seen[vals[i]] = k, true
	}
	return tokens, nil
}

// decodePostingBlock appends to p the (doc, freq) pairs of one posting block of a list with
// left postings still to read: a full block (a float32 score, the first doc, then 128 doc
// deltas and 128 frequencies bit-packed 4x) or the tail (the score, then varint doc deltas and
// varint frequencies).
func decodePostingBlock(b []byte, left int, p []uint32) ([]uint32, error) {
	if len(b) < 4 || left <= 0 {
		return nil, fmt.Errorf("a block of %d bytes for %d postings", len(b), left)
	}
	b = b[4:] // the block's max score
	if left >= invertedBlock {
		if len(b) < 4 {
			return nil, fmt.Errorf("short block")
		}
		doc := binary.LittleEndian.Uint32(b)
		docs, rest, err := unpack4x(b[4:])
		if err != nil {
			return nil, err
		}
		freqs, rest, err := unpack4x(rest)
		if err != nil {
			return nil, err
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("%d trailing bytes", len(rest))
		}
		for k := range invertedBlock {
			doc += docs[k]
			p = append(p, doc, freqs[k])
		}
		return p, nil
	}
	docs := make([]uint32, left)
	prev := uint64(0)
	for k := range left {
		v, n := binary.Uvarint(b)
		if n <= 0 || prev+v > 1<<32-1 {
			return nil, fmt.Errorf("bad doc delta")
		}
		prev += v
		docs[k], b = uint32(prev), b[n:]
	}
	for k := range left {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<32-1 {
			return nil, fmt.Errorf("bad frequency")
		}
		p, b = append(p, docs[k], uint32(v)), b[n:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(b))
	}
	return p, nil
}

// unpack4x reads 128 values bit-packed in 4 lanes of 32-bit words, after a width byte.
func unpack4x(b []byte) ([invertedBlock]uint32, []byte, error) {
	var v [invertedBlock]uint32
	if len(b) < 1 || b[0] > 32 || len(b) < 1+16*int(b[0]) {
		return v, nil, fmt.Errorf("bad packed block")
	}
	width := int(b[0])
	words := b[1 : 1+16*width]
	word := func(i int) uint32 { return binary.LittleEndian.Uint32(words[4*i:]) }
	for i := range v {
		if width == 0 {
			break
		}
		lane, k := i%4, i/4
		bit := k * width
		w, off := bit/32, bit%32
		x := uint64(word(4*w+lane)) >> off
		if off+width > 32 {
			x |= uint64(word(4*(w+1)+lane)) << (32 - off)
		}
		v[i] = uint32(x & (1<<width - 1))
	}
	return v, b[1+16*width:], nil
}
