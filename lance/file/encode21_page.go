package file

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// wideValueBytes is the value size from which the engines switch a page from mini-block to
// full-zip (MINIBLOCK_MAX_BYTE_LENGTH_PER_VALUE): a string of 256 bytes or more anywhere in the
// page, or a fixed-width value (vector) of 256 bytes or more.
const wideValueBytes = 256

// flush encodes l's pending page at the end of the output and starts a new one.
func (w *writer21) flush(l *leaf21) {
	w.pending -= l.bytes + 4*int64(l.levels)
	layers, remap, maxVis := l.pageLayers()
	for i, d := range l.def {
		l.def[i] = remap[d]
	}
	pg := pageData{l: l, layers: layers, maxVis: maxVis}
	p := wpage21{rows: uint64(l.rows), priority: l.firstRow}
	switch {
	case l.values == 0: // only null and empty lists: levels without values
		w.encodeAllNull(&pg, &p)
	case len(l.steps) == 1 && segNulls(l.segs) == l.values:
		p.layout = allNullDesc{layers: layers}.encode()
	case l.wide() || !w.encodeMiniBlock(&pg, &p):
		w.encodeFullZip(&pg, &p)
	}
	l.pages = append(l.pages, p)
	for i := range l.segs {
		l.segs[i].arr.Release()
		l.segs[i] = chunk{}
	}
	l.firstRow += uint64(l.rows)
	l.segs = l.segs[:0]
	if l.def != nil {
		l.spare = l.def[:0]
	}
	l.rep, l.def = l.rep[:0], nil
	clear(l.used)
	l.values, l.levels, l.rows, l.bytes, l.vbits, l.maxLen = 0, 0, 0, 0, 0, 0
}

// pageData is a pending page ready to encode: levels renumbered, layers decided.
type pageData struct {
	l      *leaf21
	layers []repDefLayer
	maxVis uint16 // def levels above this have no value
}

func (l *leaf21) wide() bool {
	if l.lay.kind == kindBinary {
		return l.maxLen >= wideValueBytes
	}
	return l.valueBits() >= 8*wideValueBytes
}

// itemValidity reports whether a fixed-size-list leaf stores its items' validity: when a row
// or an item of the page is null. (The engines do the same; they read a list of vectors with
// null vectors wrongly without it, "Structural validity has N entries for an array with M
// values".)
func (l *leaf21) itemValidity() bool {
	if l.lay.kind != kindFixed || l.lay.dim == 0 {
		return false
	}
	dim := l.lay.dim
	for _, s := range l.segs {
		if nullsIn(s.arr, s.from, s.to) > 0 {
			return true
		}
		items := s.arr.(*array.FixedSizeList).ListValues()
		base := s.arr.Data().Offset() * dim
		if nullsIn(items, base+s.from*dim, base+s.to*dim) > 0 {
			return true
		}
	}
	return false
}

func segNulls(segs []chunk) int {
	n := 0
	for _, s := range segs {
		n += nullsIn(s.arr, s.from, s.to)
	}
	return n
}

// encodeAllNull writes a page of levels only: rep and def as plain u16 buffers.
func (w *writer21) encodeAllNull(pg *pageData, p *wpage21) {
	l := pg.l
	w.reserve(2*padded(2*len(l.rep)) + padded(2*len(l.def)))
	putLevels(w.buffer(p, 2*len(l.rep)), l.rep)
	putLevels(w.buffer(p, 2*len(l.def)), l.def)
	p.layout = allNullDesc{
		layers: pg.layers, v22: w.large, rep: len(l.rep) > 0, def: len(l.def) > 0,
		numRep: uint64(len(l.rep)), numDef: uint64(len(l.def)),
	}.encode()
}

func putLevels(dst []byte, levels []uint16) {
	for i, v := range levels {
		binary.LittleEndian.PutUint16(dst[2*i:], v)
	}
}

// valCursor walks a page's values, run by run, in order.
type valCursor struct {
	segs []chunk
	i    int
	pos  int
}

func newValCursor(segs []chunk) *valCursor {
	c := &valCursor{segs: segs}
	if len(segs) > 0 {
		c.pos = segs[0].from
	}
	return c
}

// take calls fn for each run of the next n values: rows [from, to) of arr.
func (c *valCursor) take(n int, fn func(arr arrow.Array, from, to int)) {
	for n > 0 {
		s := c.segs[c.i]
		k := min(n, s.to-c.pos)
		fn(s.arr, c.pos, c.pos+k)
		c.pos += k
		n -= k
		if c.pos == s.to {
			c.i++
			if c.i < len(c.segs) {
				c.pos = c.segs[c.i].from
			}
		}
	}
}

// fixedSource is where the value bytes of rows of a fixed-width leaf array live.
type fixedSource struct {
	items arrow.Array // the array holding the leaf values (the child of a fixed size list)
	bytes []byte      // its values buffer
	first int         // index in bytes' units of row 0's first item
	dim   int
}

func fixedSourceOf(arr arrow.Array, dim int) fixedSource {
	if dim == 0 {
		return fixedSource{items: arr, bytes: bufBytes(arr.Data().Buffers()[1]), first: arr.Data().Offset(), dim: 1}
	}
	items := arr.(*array.FixedSizeList).ListValues()
	return fixedSource{items: items, bytes: bufBytes(items.Data().Buffers()[1]),
		first: items.Data().Offset() + arr.Data().Offset()*dim, dim: dim}
}

// putFixed copies the values of rows [from, to) of arr to dst starting at value pos.
func (l *leaf21) putFixed(dst []byte, pos int, arr arrow.Array, from, to int) {
	src := fixedSourceOf(arr, l.lay.dim)
	n := (to - from) * src.dim
	first := src.first + from*src.dim
	if l.lay.bits == 1 {
		if src.bytes != nil {
			bitutil.CopyBitmap(src.bytes, first, n, dst, pos*src.dim)
		}
		return
	}
	bw := l.lay.bits / 8
	if src.bytes == nil { // all-null arrays may come without a values buffer
		clear(dst[pos*src.dim*bw : (pos*src.dim+n)*bw])
		return
	}
	copy(dst[pos*src.dim*bw:], src.bytes[first*bw:(first+n)*bw])
}

// putItemValidity writes the item validity of rows [from, to) of a fixed size list array at
// bit pos*dim of dst; the items of a null row are marked null, as the engines write them.
func (l *leaf21) putItemValidity(dst []byte, pos int, arr arrow.Array, from, to int) {
	dim := l.lay.dim
	src := fixedSourceOf(arr, dim)
	copyValidity(dst, pos*dim, src.items, src.first-src.items.Data().Offset()+from*dim, (to-from)*dim)
	if arr.NullN() > 0 {
		for r := from; r < to; r++ {
			if arr.IsNull(r) {
				bitutil.SetBitsTo(dst, int64((pos+r-from)*dim), int64(dim), false)
			}
		}
	}
}
