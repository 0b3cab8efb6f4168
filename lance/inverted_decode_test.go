package lance

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// decodedInverted is an INVERTED partition read back from its files (tests only).
type decodedInverted struct {
	tokens   []string   // by token id
	rowIDs   []uint64   // by doc id
	lengths  []uint32   // by doc id
	postings [][]uint32 // by token id: doc, freq, doc, freq, ...
	maxScore []float32
}

func readIndexRecord(b []byte) (*file.Reader, []arrowColumn, error) {
	ctx := context.Background()
	r, err := file.Open(ctx, file.BytesSource(b), "index file")
	if err != nil {
		return nil, nil, err
	}
	rec, err := readIndexRows(ctx, r, "index file", 0, r.NumRows())
	if err != nil {
		return nil, nil, err
	}
	var cols []arrowColumn
	for _, c := range rec.Columns() {
		cols = append(cols, c)
	}
	return r, cols, nil
}

type arrowColumn = interface {
	Len() int
	IsNull(int) bool
}

// readTokenFile reads part_<n>_tokens.lance: its one LargeBinary row, an FST of the tokens and
// their ids, as the tokens by id. A file that is not one is a *FormatError (or the file
// package's).
func readTokenFile(b []byte, maxKeys uint64) ([]string, error) {
	bad := func(format string, args ...any) error {
		return &FormatError{File: "tokens", Offset: -1, Reason: fmt.Sprintf(format, args...)}
	}
	_, tc, err := readIndexRecord(b)
	if err != nil {
		return nil, err
	}
	if len(tc) < 1 {
		return nil, bad("no columns")
	}
	fst, ok := tc[0].(*array.LargeBinary)
	if !ok || fst.Len() != 1 || fst.IsNull(0) {
		return nil, bad("want one LargeBinary FST, have %d rows of %T", tc[0].Len(), tc[0])
	}
	keys, vals, err := readFST(fst.Value(0), maxKeys)
	if err != nil {
		return nil, err
	}
	tokens := make([]string, len(keys))
	seen := make([]bool, len(keys))
	for i, k := range keys {
		if vals[i] >= uint64(len(keys)) || seen[vals[i]] {
			return nil, bad("token %q: id %d", k, vals[i])
		}
		tokens[vals[i]], seen[vals[i]] = k, true
	}
	return tokens, nil
}

// decodeInverted reads part_<n>_{tokens,docs,invert}.lance of one partition.
func decodeInverted(tokens, docs, invert []byte) (*decodedInverted, error) {
	out := &decodedInverted{}
	var err error
	if out.tokens, err = readTokenFile(tokens, 1<<30); err != nil {
		return nil, err
	}
	_, dc, err := readIndexRecord(docs)
	if err != nil {
		return nil, err
	}
	out.rowIDs = dc[0].(*array.Uint64).Uint64Values()
	out.lengths = dc[1].(*array.Uint32).Uint32Values()
	_, ic, err := readIndexRecord(invert)
	if err != nil {
		return nil, err
	}
	lists := ic[0].(*array.List)
	blocks := lists.ListValues().(*array.LargeBinary)
	lens := ic[2].(*array.Uint32).Uint32Values()
	out.maxScore = ic[1].(*array.Float32).Float32Values()
	for t := 0; t < lists.Len(); t++ {
		from, to := lists.ValueOffsets(t)
		var p []uint32
		for k := from; k < to; k++ {
			b := blocks.Value(int(k))
			left := int(lens[t]) - len(p)/2
			if p, err = decodePostingBlock(b, left, p); err != nil {
				return nil, fmt.Errorf("token %d block %d: %w", t, k-from, err)
			}
		}
		if len(p)/2 != int(lens[t]) {
			return nil, fmt.Errorf("token %d: %d postings, _length %d", t, len(p)/2, lens[t])
		}
		out.postings = append(out.postings, p)
	}
	return out, nil
}

func decodePostingBlock(b []byte, left int, p []uint32) ([]uint32, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("short block")
	}
	_ = math.Float32frombits(binary.LittleEndian.Uint32(b))
	b = b[4:]
	if left >= invertedBlock {
		first := binary.LittleEndian.Uint32(b)
		docs, rest, err := unpack4x(b[4:])
		if err != nil {
			return nil, err
		}
		freqs, rest, err := unpack4x(rest)
		if err != nil || len(rest) != 0 {
			return nil, fmt.Errorf("block of %d trailing bytes: %v", len(rest), err)
		}
		doc := first
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
		if n <= 0 {
			return nil, fmt.Errorf("bad varint")
		}
		prev += v
		docs[k], b = uint32(prev), b[n:]
	}
	for k := range left {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("bad varint")
		}
		p, b = append(p, docs[k], uint32(v)), b[n:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(b))
	}
	return p, nil
}

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
