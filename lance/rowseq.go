package lance

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
)

// Codecs of the two per-fragment sequences of stable-row-id datasets (lance rowids.proto):
//
//	RowIdSequence{segments=1 repeated U64Segment}: one row id per physical row, in row order.
//	RowDatasetVersionSequence{runs=1 repeated {span=1 U64Segment, version=2}}: runs of rows that
//	share a version; only a span's length counts (lance reads versions run by run).
//
// A U64Segment is one of range=1 {start, end}, range_with_holes=2 {start, end, holes}
// (holes: the absent values, sorted), range_with_bitmap=3 {start, end, bitmap} (bit i, least
// significant bit first within each byte, says whether start+i is present), sorted_array=4 or
// array=5 (an EncodedU64Array: u16_array=1 / u32_array=2 {base, little-endian offsets} or
// u64_array=3 {little-endian values}).
//
// The decoders take the number of values the caller can accept (a fragment's physical rows):
// a range costs a few bytes however long it is, so every length is checked against that limit
// before anything is allocated for it. They return errors, never panic, on any input.

// segment is one decoded U64Segment, its values not expanded.
type segment struct {
	kind       int    // 1..5, the oneof field number
	start, end uint64 // kinds 1-3
	holes      []uint64
	bitmap     []byte
	values     []uint64 // kinds 4, 5
	n          uint64   // number of values
}

const (
	segRange       = 1
	segRangeHoles  = 2
	segRangeBitmap = 3
	segSortedArray = 4
	segArray       = 5
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", pb.ErrMalformed, fmt.Sprintf(format, args...))
}

// decodeEncodedU64Array decodes an EncodedU64Array. Its values cost at least two input bytes
// each, so the input bounds the allocation.
func decodeEncodedU64Array(b []byte) ([]uint64, error) {
	kind, body := 0, []byte(nil)
	if err := pb.Walk(b, func(f pb.Field) error {
		if f.Num >= 1 && f.Num <= 3 {
			if err := f.Want(2); err != nil {
				return err
			}
			kind, body = int(f.Num), f.Bytes
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if kind == 0 {
		return nil, malformed("encoded u64 array has no array")
	}
	var base uint64
	var raw []byte
	if err := pb.Walk(body, func(f pb.Field) error {
		switch f.Num {
		case 1:
			if kind != 3 {
				base = f.Varint
			}
		case 2:
			if err := f.Want(2); err != nil {
				return err
			}
			raw = f.Bytes
		}
		return nil
	}); err != nil {
		return nil, err
	}
	width := map[int]int{1: 2, 2: 4, 3: 8}[kind]
	if len(raw)%width != 0 {
		return nil, malformed("u%d array of %d bytes", width*8, len(raw))
	}
	out := make([]uint64, len(raw)/width)
	for i := range out {
		var v uint64
		switch width {
		case 2:
			v = uint64(binary.LittleEndian.Uint16(raw[2*i:]))
		case 4:
			v = uint64(binary.LittleEndian.Uint32(raw[4*i:]))
		default:
			v = binary.LittleEndian.Uint64(raw[8*i:])
		}
		s, carry := bits.Add64(base, v, 0)
		if carry != 0 {
			return nil, malformed("array value %d + %d overflows", base, v)
		}
		out[i] = s
	}
	return out, nil
}

// decodeSegment decodes one U64Segment and checks its consistency.
func decodeSegment(b []byte) (segment, error) {
	var s segment
	var body []byte
	if err := pb.Walk(b, func(f pb.Field) error {
		if f.Num >= segRange && f.Num <= segArray {
			if err := f.Want(2); err != nil {
				return err
			}
			s.kind, body = int(f.Num), f.Bytes // a repeated oneof member: the last one wins
		}
		return nil
	}); err != nil {
		return s, err
	}
	switch s.kind {
	case 0:
		return s, malformed("u64 segment has no segment")
	case segSortedArray, segArray:
		vals, err := decodeEncodedU64Array(body)
		if err != nil {
			return s, err
		}
		s.values, s.n = vals, uint64(len(vals))
		return s, nil
	}
	var holes []byte
	hasHoles := false
	if err := pb.Walk(body, func(f pb.Field) error {
		switch f.Num {
		case 1:
			s.start = f.Varint
		case 2:
			s.end = f.Varint
		case 3:
			if s.kind == segRange {
				return nil
			}
			if err := f.Want(2); err != nil {
				return err
			}
			if s.kind == segRangeHoles {
				holes, hasHoles = f.Bytes, true
			} else {
				s.bitmap = f.Bytes
			}
		}
		return nil
	}); err != nil {
		return s, err
	}
	if s.end < s.start {
		return s, malformed("segment range [%d, %d) ends before it starts", s.start, s.end)
	}
	span := s.end - s.start
	switch s.kind {
	case segRange:
		s.n = span
	case segRangeHoles:
		if !hasHoles {
			return s, malformed("range with holes has no holes")
		}
		h, err := decodeEncodedU64Array(holes)
		if err != nil {
			return s, err
		}
		for i, v := range h {
			if v < s.start || v >= s.end || (i > 0 && v <= h[i-1]) {
				return s, malformed("hole %d is outside [%d, %d) or out of order", v, s.start, s.end)
			}
		}
		s.holes, s.n = h, span-uint64(len(h))
	case segRangeBitmap:
		if uint64(len(s.bitmap)) != (span+7)/8 {
			return s, malformed("bitmap of %d bytes for a range of %d values", len(s.bitmap), span)
		}
		var n uint64
		for i, x := range s.bitmap {
			if i == len(s.bitmap)-1 && span%8 != 0 && x>>(span%8) != 0 {
				return s, malformed("bitmap has bits set past its range")
			}
			n += uint64(bits.OnesCount8(x))
		}
		s.n = n
	}
	return s, nil
}

// appendTo appends the segment's values to out.
func (s *segment) appendTo(out []uint64) []uint64 {
	switch s.kind {
	case segRange:
		for v := s.start; v < s.end; v++ {
			out = append(out, v)
		}
	case segRangeHoles:
		h := s.holes
		for v := s.start; v < s.end; v++ {
			if len(h) > 0 && h[0] == v {
				h = h[1:]
				continue
			}
			out = append(out, v)
		}
	case segRangeBitmap:
		for i := uint64(0); i < s.end-s.start; i++ {
			if s.bitmap[i/8]&(1<<(i%8)) != 0 {
				out = append(out, s.start+i)
			}
		}
	default:
		out = append(out, s.values...)
	}
	return out
}

// decodeRowIDSequence decodes a serialized RowIdSequence into its row ids, refusing more
// than limit of them.
func decodeRowIDSequence(b []byte, limit uint64) ([]uint64, error) {
	var segs []segment
	var total uint64
	err := pb.Walk(b, func(f pb.Field) error {
		if f.Num != 1 {
			return nil
		}
		if err := f.Want(2); err != nil {
			return err
		}
		s, err := decodeSegment(f.Bytes)
		if err != nil {
			return err
		}
		if total += s.n; total > limit || total < s.n {
			return malformed("row id sequence holds more than %d ids", limit)
		}
		segs = append(segs, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]uint64, 0, total)
	for i := range segs {
		out = segs[i].appendTo(out)
	}
	return out, nil
}

// versionRun is n consecutive rows last written (or created) at version.
type versionRun struct{ n, version uint64 }

// decodeVersionRuns decodes a serialized RowDatasetVersionSequence into its runs, refusing
// more than limit rows in all.
func decodeVersionRuns(b []byte, limit uint64) ([]versionRun, error) {
	var runs []versionRun
	var total uint64
	err := pb.Walk(b, func(f pb.Field) error {
		if f.Num != 1 {
			return nil
		}
		if err := f.Want(2); err != nil {
			return err
		}
		var r versionRun
		hasSpan := false
		if err := pb.Walk(f.Bytes, func(g pb.Field) error {
			switch g.Num {
			case 1:
				if err := g.Want(2); err != nil {
					return err
				}
				s, err := decodeSegment(g.Bytes)
				if err != nil {
					return err
				}
				r.n, hasSpan = s.n, true
			case 2:
				r.version = g.Varint
			}
			return nil
		}); err != nil {
			return err
		}
		if !hasSpan {
			return malformed("version run has no span")
		}
		if total += r.n; total > limit || total < r.n {
			return malformed("version sequence covers more than %d rows", limit)
		}
		if r.n > 0 {
			runs = append(runs, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return runs, nil
}

// decodeVersionSequence decodes a serialized RowDatasetVersionSequence into one version per
// row, refusing more than limit rows.
func decodeVersionSequence(b []byte, limit uint64) ([]uint64, error) {
	runs, err := decodeVersionRuns(b, limit)
	if err != nil {
		return nil, err
	}
	return expandRuns(runs), nil
}

func expandRuns(runs []versionRun) []uint64 {
	var total uint64
	for _, r := range runs {
		total += r.n
	}
	out := make([]uint64, 0, total)
	for _, r := range runs {
		for i := uint64(0); i < r.n; i++ {
			out = append(out, r.version)
		}
	}
	return out
}

// encodeVersionRuns encodes one version per row as runs of equal versions, each run's
// span the range of row offsets it covers. No rows encode as nil.
func encodeVersionRuns(versions []uint64) []byte {
	var runs []versionRun
	for i := 0; i < len(versions); {
		j := i + 1
		for j < len(versions) && versions[j] == versions[i] {
			j++
		}
		runs = append(runs, versionRun{n: uint64(j - i), version: versions[i]})
		i = j
	}
	return encodeVersionRunList(runs)
}

// encodeVersionRunList is encodeVersionRuns of the versions runs expands to: runs of equal
// versions merged, empty ones dropped.
func encodeVersionRunList(runs []versionRun) []byte {
	var e pb.Encoder
	var at uint64
	for i := 0; i < len(runs); {
		v, n := runs[i].version, uint64(0)
		for ; i < len(runs) && (runs[i].version == v || runs[i].n == 0); i++ {
			n += runs[i].n
		}
		if n == 0 {
			continue
		}
		lo, hi := at, at+n
		e.Message(1, func(run *pb.Encoder) {
			run.Message(1, func(seg *pb.Encoder) { encodeRangeSegment(seg, lo, hi) })
			run.Uint(2, v)
		})
		at = hi
	}
	return e.B
}

func encodeRangeSegment(seg *pb.Encoder, start, end uint64) {
	seg.Message(segRange, func(r *pb.Encoder) { r.Uint(1, start); r.Uint(2, end) })
}

// encodeU64Array writes an EncodedU64Array of vals in the narrowest width that holds their
// offsets from the smallest value (lance's choice).
func encodeU64Array(e *pb.Encoder, vals []uint64) {
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	switch arrayWidth(hi - lo) {
	case 2:
		raw := make([]byte, 0, 2*len(vals))
		for _, v := range vals {
			raw = binary.LittleEndian.AppendUint16(raw, uint16(v-lo))
		}
		e.Message(1, func(a *pb.Encoder) { a.Uint(1, lo); a.Bytes(2, raw) })
	case 4:
		raw := make([]byte, 0, 4*len(vals))
		for _, v := range vals {
			raw = binary.LittleEndian.AppendUint32(raw, uint32(v-lo))
		}
		e.Message(2, func(a *pb.Encoder) { a.Uint(1, lo); a.Bytes(2, raw) })
	default:
		raw := make([]byte, 0, 8*len(vals))
		for _, v := range vals {
			raw = binary.LittleEndian.AppendUint64(raw, v)
		}
		e.Message(3, func(a *pb.Encoder) { a.Bytes(2, raw) })
	}
}

func arrayWidth(span uint64) int {
	switch {
	case span <= 0xffff:
		return 2
	case span <= 0xffffffff:
		return 4
	}
	return 8
}

// Row id sequence encoding: ids are cut into clusters (strictly increasing, no gap wider than
// clusterGap); a cluster of at least minCluster ids becomes one segment in its cheapest sorted
// form (a range, a range with holes, a range with a bitmap, or a sorted array), and the ids of
// smaller clusters between two such segments are gathered into one array segment.
const (
	clusterGap = 256
	minCluster = 16
)

// encodeRowIDSequence encodes row ids (one per physical row, in row order) as a RowIdSequence.
func encodeRowIDSequence(ids []uint64) []byte {
	var e pb.Encoder
	var pending []uint64
	flush := func() {
		if len(pending) == 0 {
			return
		}
		sorted := true
		for i := 1; i < len(pending); i++ {
			sorted = sorted && pending[i] > pending[i-1]
		}
		kind := pb.Number(segArray)
		if sorted {
			kind = segSortedArray
		}
		vals := pending
		e.Message(1, func(seg *pb.Encoder) {
			seg.Message(kind, func(a *pb.Encoder) { encodeU64Array(a, vals) })
		})
		pending = nil
	}
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] > ids[j-1] && ids[j]-ids[j-1] <= clusterGap {
			j++
		}
		if j-i < minCluster {
			pending = append(pending, ids[i:j]...)
		} else {
			flush()
			c := ids[i:j]
			e.Message(1, func(seg *pb.Encoder) { encodeSortedCluster(seg, c) })
		}
		i = j
	}
	flush()
	return e.B
}

// encodeSortedCluster writes strictly increasing ids as the smallest of lance's sorted
// segment forms.
func encodeSortedCluster(seg *pb.Encoder, c []uint64) {
	lo, hi := c[0], c[len(c)-1]
	span := hi - lo + 1
	n := uint64(len(c))
	if span == n {
		encodeRangeSegment(seg, lo, hi+1)
		return
	}
	holes := span - n
	w := uint64(arrayWidth(hi - lo))
	holesSize, bitmapSize, arraySize := holes*w, (span+7)/8, n*w
	switch {
	case holesSize <= bitmapSize && holesSize <= arraySize:
		hs := make([]uint64, 0, holes)
		next := lo
		for _, v := range c {
			for ; next < v; next++ {
				hs = append(hs, next)
			}
			next = v + 1
		}
		seg.Message(segRangeHoles, func(r *pb.Encoder) {
			r.Uint(1, lo)
			r.Uint(2, hi+1)
			r.Message(3, func(a *pb.Encoder) { encodeU64Array(a, hs) })
		})
	case bitmapSize <= arraySize:
		bm := make([]byte, bitmapSize)
		for _, v := range c {
			i := v - lo
			bm[i/8] |= 1 << (i % 8)
		}
		seg.Message(segRangeBitmap, func(r *pb.Encoder) {
			r.Uint(1, lo)
			r.Uint(2, hi+1)
			r.BytesAlways(3, bm)
		})
	default:
		seg.Message(segSortedArray, func(a *pb.Encoder) { encodeU64Array(a, c) })
	}
}

// stableRowIDs decodes the fragment's row ids, one per physical row.
func (f *Fragment) stableRowIDs() ([]uint64, error) {
	if f.RowIDs == nil {
		if f.hasRowIDs() {
			return nil, fmt.Errorf("%w: fragment %d keeps its row ids in an external file", ErrUnsupported, f.ID)
		}
		return nil, fmt.Errorf("lance: fragment %d has no row ids", f.ID)
	}
	ids, err := decodeRowIDSequence(f.RowIDs, f.PhysicalRows)
	if err != nil {
		return nil, fmt.Errorf("lance: fragment %d: row id sequence: %w", f.ID, err)
	}
	if uint64(len(ids)) != f.PhysicalRows {
		return nil, fmt.Errorf("lance: fragment %d: %d row ids for %d rows", f.ID, len(ids), f.PhysicalRows)
	}
	return ids, nil
}

func (f *Fragment) hasExternal(num pb.Number) bool {
	for _, x := range f.externalSeqField {
		if x.Num == num {
			return true
		}
	}
	return false
}

// versionRuns decodes one of the fragment's version sequences (inline bytes b, or external in
// field ext) as runs covering its physical rows; ok=false when the fragment has none.
func (f *Fragment) versionRuns(b []byte, ext pb.Number, what string) (runs []versionRun, ok bool, err error) {
	if b == nil {
		if f.hasExternal(ext) {
			return nil, false, fmt.Errorf("%w: fragment %d keeps its %s versions in an external file", ErrUnsupported, f.ID, what)
		}
		return nil, false, nil
	}
	runs, err = decodeVersionRuns(b, f.PhysicalRows)
	if err != nil {
		return nil, false, fmt.Errorf("lance: fragment %d: %s version sequence: %w", f.ID, what, err)
	}
	var n uint64
	for _, r := range runs {
		n += r.n
	}
	if n != f.PhysicalRows {
		return nil, false, fmt.Errorf("lance: fragment %d: %s versions cover %d of %d rows", f.ID, what, n, f.PhysicalRows)
	}
	return runs, true, nil
}

// createdRuns are the runs of the version that created each row: all version 1 when the
// fragment records none (as lance reads it).
func (f *Fragment) createdRuns() ([]versionRun, error) {
	runs, ok, err := f.versionRuns(f.CreatedAt, 10, "created-at")
	if err != nil || ok {
		return runs, err
	}
	if f.PhysicalRows == 0 {
		return nil, nil
	}
	return []versionRun{{n: f.PhysicalRows, version: 1}}, nil
}

// lastUpdatedRuns are the runs of the version that last wrote each row: the created-at
// versions when the fragment records none (as lance's compaction reads it).
func (f *Fragment) lastUpdatedRuns() ([]versionRun, error) {
	runs, ok, err := f.versionRuns(f.LastUpdatedAt, 8, "last-updated-at")
	if err != nil || ok {
		return runs, err
	}
	return f.createdRuns()
}
