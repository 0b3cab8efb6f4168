package file

import (
	"math"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// pageRows is rows [first, first+count) of a decoded page (page pi of its column), counted
// from the decoded data's first row.
type pageRows struct {
	pg           *page21
	pi           int
	first, count uint64
}

// isVarBinary says dt is a string or binary type, whose values a page decodes to offsets into
// one byte buffer.
func isVarBinary(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// readVarBinary21 makes the n values of pages, strings or binary of type dt without a null,
// into one array directly: its offsets computed, its bytes copied a page at a time (or, for
// one page read whole, taken as they are), where a builder appended them value by value, with
// a validity bit each. A key column read back for an index fold, the bulk of a compaction's or
// a merge's reads, is such a column. ok is false, with nothing done, when a page holds nulls
// or is not plain variable-width values: the caller emits the pages one by one.
func readVarBinary21(dt arrow.DataType, pages []pageRows, n uint64) (arrow.Array, bool, error) {
	utf := dt.ID() == arrow.STRING || dt.ID() == arrow.LARGE_STRING
	offsets := make([][]uint64, len(pages)) // each page's offsets of its rows
	var size uint64
	for i, d := range pages {
		offs, ok, err := plainValues(d.pg, d.first, d.count, utf)
		if !ok || err != nil {
			return nil, ok, err
		}
		offsets[i] = offs
		size += offs[d.count] - offs[0]
	}
	large := dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.LARGE_BINARY
	if !large && size > math.MaxInt32 {
		return nil, false, nil
	}

	// One page whose values are all wanted lends the array its buffer (a page's is its own,
	// made by its decoding); a part of one is copied, so as not to hold the rest.
	var data []byte
	whole := len(pages) == 1 && size == uint64(len(pages[0].pg.vals.data))
	if whole {
		data = pages[0].pg.vals.data
	} else {
		data = make([]byte, 0, size)
	}
	var offs32 []int32
	var offs64 []int64
	if large {
		offs64 = make([]int64, 1, n+1)
	} else {
		offs32 = make([]int32, 1, n+1)
	}
	at := uint64(0) // the bytes of the values before the page's
	for i, d := range pages {
		v, offs := d.pg.vals, offsets[i]
		lo, hi := offs[0], offs[d.count]
		for _, e := range offs[1:] {
			if large {
				offs64 = append(offs64, int64(at+e-lo))
			} else {
				offs32 = append(offs32, int32(at+e-lo))
			}
		}
		if !whole {
			data = append(data, v.data[lo:hi]...)
		}
		at += hi - lo
	}
	var offBytes []byte
	if large {
		offBytes = arrow.Int64Traits.CastToBytes(offs64)
	} else {
		offBytes = arrow.Int32Traits.CastToBytes(offs32)
	}
	ad := array.NewData(dt, int(n), []*memory.Buffer{nil, memory.NewBufferBytes(offBytes), memory.NewBufferBytes(data)}, nil, 0, 0)
	defer ad.Release()
	return array.MakeFromData(ad), true, nil
}

// plainValues is the offsets of rows [first, first+count) of pg (count+1 of them, into the
// page's bytes), and ok, when pg holds variable-width values without nulls, levels or a
// constant, and the rows' offsets lie in order within its bytes. With utf the values are
// checked as UTF-8 in one pass over their bytes rather than value by value (short values
// never reach utf8.Valid's word-at-a-time path): the whole range being valid, each value is
// too when it starts on a rune, not inside one. Bytes that are no UTF-8 give ok false (the
// caller's value-by-value path names the value); a value that starts inside a rune is an
// error naming it.
func plainValues(pg *page21, first, count uint64, utf bool) (offs []uint64, ok bool, err error) {
	v := pg.vals
	if pg.def != nil || pg.allNull || pg.constant || pg.levels.list || v == nil || !v.variable || count == 0 ||
		first > pg.rows || count > pg.rows-first || first+count > v.n || first+count >= uint64(len(v.offs)) {
		return nil, false, nil
	}
	offs = v.offs[first : first+count+1]
	lo, hi := offs[0], offs[count]
	if lo > hi || hi > uint64(len(v.data)) {
		return nil, false, nil // the value-by-value path names the bad offsets
	}
	if utf && !utf8.Valid(v.data[lo:hi]) {
		return nil, false, nil
	}
	for k := range count {
		s, e := offs[k], offs[k+1]
		if s > e || e > hi {
			return nil, false, nil
		}
		if utf && s < e && !utf8.RuneStart(v.data[s]) {
			return nil, true, errf("value %d is not UTF-8", first+k)
		}
	}
	return offs, true, nil
}
