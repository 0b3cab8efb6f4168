package file

import (
	"encoding/binary"
	"sort"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/endian"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// appendRows queues rows [from, to) of arr on column c, flushing pages as they fill up.
func (w *Writer) appendRows(c *column, arr arrow.Array, from, to int) {
	if c.lay.kind == kindStruct {
		w.appendStruct(c, arr, from, to)
	}
	for from < to {
		n := c.fit(arr, from, to, w.opts)
		size := c.sizeOf(arr, from, from+n)
		if c.lay.kind != kindStruct { // a struct header page has no data, only a row count
			arr.Retain()
			c.chunks = append(c.chunks, chunk{arr: arr, from: from, to: from + n})
		}
		c.rows += n
		c.size += size
		w.pending += size / 8
		if c.lay.kind == kindList {
			w.appendItems(c, arr, from, from+n)
		}
		if c.size >= int64(w.opts.MaxPageBytes)*8 || (w.opts.MaxPageRows > 0 && c.rows >= w.opts.MaxPageRows) {
			w.flush(c)
		}
		from += n
	}
}

// fit returns how many rows from `from` on can join c's pending page before it is full (>= 1).
func (c *column) fit(arr arrow.Array, from, to int, o Options) int {
	n := to - from
	if o.MaxPageRows > 0 {
		n = min(n, o.MaxPageRows-c.rows)
	}
	room := int64(o.MaxPageBytes)*8 - c.size
	switch c.lay.kind {
	case kindFixed, kindList:
		per := c.bitsPerRow(arr)
		n = int(min(int64(n), (room+per-1)/per))
	case kindBinary:
		// The smallest k whose rows fill the page: 64 bits of end offset plus the bytes per row.
		off := offsetsOf(arr)
		base := off.at(from)
		n = min(n, sort.Search(n, func(k int) bool { return 64*int64(k+1)+8*(off.at(from+k+1)-base) >= room })+1)
	}
	return max(n, 1)
}

// sizeOf estimates the encoded size in bits of rows [from, to) of arr.
func (c *column) sizeOf(arr arrow.Array, from, to int) int64 {
	if c.lay.kind == kindBinary {
		off := offsetsOf(arr)
		return 64*int64(to-from) + 8*(off.at(to)-off.at(from))
	}
	return c.bitsPerRow(arr) * int64(to-from)
}

// bitsPerRow is the encoded size of a row of arr in a fixed-width or list offsets column.
func (c *column) bitsPerRow(arr arrow.Array) int64 {
	per := int64(c.lay.bitsPerRow())
	if c.lay.kind == kindFixed && arr.NullN() == 0 {
		per-- // no row validity bitmap will be written for rows without nulls
	}
	return per
}

// appendStruct passes the rows to the children. Lance 2.0 cannot store struct-level nulls: it
// writes a null struct row as nulls in every child, and so does this.
func (w *Writer) appendStruct(c *column, arr arrow.Array, from, to int) {
	sa := arr.(*array.Struct)
	for k, kid := range c.kids {
		child := sa.Field(k)
		if sa.NullN() > 0 {
			child = withParentNulls(child, sa)
			w.appendRows(kid, child, from, to)
			child.Release()
			continue
		}
		w.appendRows(kid, child, from, to)
	}
}

// withParentNulls returns child with its validity ANDed with its parent's (same length).
func withParentNulls(child, parent arrow.Array) arrow.Array {
	d := child.Data()
	n, off := d.Len(), d.Offset()
	bitmap := make([]byte, bitutil.BytesForBits(int64(off+n)))
	pv, pOff := parent.NullBitmapBytes(), parent.Data().Offset()
	if cv := child.NullBitmapBytes(); len(cv) > 0 && child.NullN() > 0 {
		bitutil.BitmapAnd(pv, cv, int64(pOff), int64(off), bitmap, int64(off), int64(n))
	} else {
		bitutil.CopyBitmap(pv, pOff, n, bitmap, off)
	}
	bufs := append([]*memory.Buffer{memory.NewBufferBytes(bitmap)}, d.Buffers()[1:]...)
	nd := array.NewData(d.DataType(), n, bufs, d.Children(), array.UnknownNullCount, off)
	defer nd.Release()
	return array.MakeFromData(nd)
}

// appendItems queues the items of list rows [from, to) on the item column. Items under null
// lists are skipped: a null list has no items in the file (its end offset does not advance).
func (w *Writer) appendItems(c *column, arr arrow.Array, from, to int) {
	values := arr.(array.ListLike).ListValues()
	off := offsetsOf(arr)
	if nullsIn(arr, from, to) == 0 {
		w.appendRows(c.item, values, int(off.at(from)), int(off.at(to)))
		return
	}
	start, end := int64(-1), int64(-1)
	for i := from; i < to; i++ {
		lo, hi := off.at(i), off.at(i+1)
		if arr.IsNull(i) || lo == hi {
			continue
		}
		if lo != end {
			if end > start {
				w.appendRows(c.item, values, int(start), int(end))
			}
			start = lo
		}
		end = hi
	}
	if end > start {
		w.appendRows(c.item, values, int(start), int(end))
	}
}

// flush encodes c's pending values as one page at the end of the output.
func (w *Writer) flush(c *column) {
	w.pending -= c.size / 8 // before the page reserves its room, so it is not counted twice
	var p pageMeta
	switch c.lay.kind {
	case kindFixed:
		p = w.flushFixed(c)
	case kindBinary:
		p = w.flushBinary(c)
	case kindList:
		p = w.flushList(c)
		// Lance's writer never lets an item page span two offsets pages (its scheduler has that
		// limitation), so the items of this page are flushed with it.
		defer func() {
			if c.item.rows > 0 {
				w.flush(c.item)
			}
		}()
	case kindStruct:
		p = pageMeta{encoding: encStruct()}
	}
	p.rows = uint64(c.rows)
	c.pages = append(c.pages, p)
	for i := range c.chunks {
		c.chunks[i].arr.Release()
		c.chunks[i] = chunk{}
	}
	c.chunks = c.chunks[:0]
	c.rows, c.size = 0, 0
}

// padded is n rounded up to the buffer alignment.
func padded(n int) int { return (n + bufferAlign - 1) / bufferAlign * bufferAlign }

// buffer appends a page buffer of n bytes, padded to 64, and returns it for filling in. The
// caller must have reserved room for all of a page's buffers first: a later buffer must not move
// the output while an earlier one is still being filled.
func (w *Writer) buffer(p *pageMeta, n int) []byte {
	var b []byte
	w.out, b = appendPageBuffer(w.out, &p.offsets, &p.sizes, n)
	return b
}

// appendPageBuffer is buffer for either writer: it grows out (within its capacity) by n bytes
// and their padding, records the buffer's position and size, and returns both.
func appendPageBuffer(out []byte, offsets, sizes *[]uint64, n int) ([]byte, []byte) {
	pad := padded(n) - n
	if cap(out)-len(out) < n+pad {
		panic("lance file: page buffer not reserved") // a bug in this package, not bad input
	}
	start := len(out)
	out = out[:start+n+pad]
	for i := start + n; i < len(out); i++ {
		out[i] = padByte
	}
	*offsets = append(*offsets, uint64(start))
	*sizes = append(*sizes, uint64(n))
	return out, out[start : start+n : start+n]
}

func (w *Writer) flushFixed(c *column) pageMeta {
	var p pageMeta
	rows, dim, bits := c.rows, max(c.lay.dim, 1), c.lay.bits
	rowNulls, itemNulls := 0, 0
	for _, ch := range c.chunks {
		rowNulls += nullsIn(ch.arr, ch.from, ch.to)
		if c.lay.dim > 0 {
			items := ch.arr.(*array.FixedSizeList).ListValues()
			base := ch.arr.Data().Offset() * dim
			itemNulls += nullsIn(items, base+ch.from*dim, base+ch.to*dim)
		}
	}
	if rowNulls == rows {
		p.encoding = encAllNulls()
		return p
	}
	// Buffers in the order lance numbers them: row validity, item validity (lists), values.
	w.reserve(2*padded(int(bitutil.BytesForBits(int64(rows*dim)))) + padded(int(bitutil.BytesForBits(int64(rows*dim*bits)))))
	next := uint32(0)
	var rowValid, itemValid []byte
	if rowNulls > 0 {
		rowValid = w.buffer(&p, int(bitutil.BytesForBits(int64(rows))))
		next++
	}
	if c.lay.dim > 0 && (rowNulls > 0 || itemNulls > 0) {
		itemValid = w.buffer(&p, int(bitutil.BytesForBits(int64(rows*dim))))
		next++
	}
	values := w.buffer(&p, int(bitutil.BytesForBits(int64(rows*dim*bits))))

	pos := 0
	for _, ch := range c.chunks {
		n := ch.to - ch.from
		if rowValid != nil {
			copyValidity(rowValid, pos, ch.arr, ch.from, n)
		}
		leaf, base := ch.arr, ch.from
		if c.lay.dim > 0 {
			leaf = ch.arr.(*array.FixedSizeList).ListValues()
			base = (ch.arr.Data().Offset() + ch.from) * dim
		}
		if itemValid != nil {
			copyValidity(itemValid, pos*dim, leaf, base, n*dim)
			if rowNulls > 0 { // items of null rows are null too, as lance writes them
				for i := 0; i < n; i++ {
					if ch.arr.IsNull(ch.from + i) {
						bitutil.SetBitsTo(itemValid, int64((pos+i)*dim), int64(dim), false)
					}
				}
			}
		}
		src := leaf.Data().Buffers()[1].Bytes()
		first := leaf.Data().Offset() + base
		if bits == 1 {
			bitutil.CopyBitmap(src, first, n*dim, values, pos*dim)
		} else {
			bw := bits / 8
			copy(values[pos*dim*bw:], src[first*bw:(first+n*dim)*bw])
		}
		pos += n
	}

	enc := encFlat(uint64(bits), next)
	if c.lay.dim > 0 {
		items := encNoNulls(enc)
		if itemValid != nil {
			items = encSomeNulls(encFlat(1, next-1), enc)
		}
		enc = encFSL(uint32(dim), items)
	}
	if rowNulls > 0 {
		p.encoding = encSomeNulls(encFlat(1, 0), enc)
	} else {
		p.encoding = encNoNulls(enc)
	}
	return p
}

// flushBinary writes [end offsets u64, bytes]. End offsets count from the page start; a null's
// entry is the previous end plus A = total bytes + 1, which the reader recognises as >= A.
func (w *Writer) flushBinary(c *column) pageMeta {
	var p pageMeta
	total := int64(0)
	for _, ch := range c.chunks {
		total += validSpan(ch.arr, ch.from, ch.to)
	}
	adj := uint64(total) + 1
	w.reserve(padded(8*c.rows) + padded(int(total)))
	indices := w.buffer(&p, 8*c.rows)
	data := w.buffer(&p, int(total))
	i, end := 0, uint64(0)
	for _, ch := range c.chunks {
		off := offsetsOf(ch.arr)
		src := bufBytes(ch.arr.Data().Buffers()[2]) // nil when every value is empty or null
		if nullsIn(ch.arr, ch.from, ch.to) == 0 {
			lo, hi := off.at(ch.from), off.at(ch.to)
			copy(data[end:], src[lo:hi])
			i = putEnds(indices, i, off, ch.from, ch.to, end)
			end += uint64(hi - lo)
			continue
		}
		for r := ch.from; r < ch.to; r++ {
			if ch.arr.IsNull(r) {
				binary.LittleEndian.PutUint64(indices[8*i:], end+adj)
			} else {
				lo, hi := off.at(r), off.at(r+1)
				copy(data[end:], src[lo:hi])
				end += uint64(hi - lo)
				binary.LittleEndian.PutUint64(indices[8*i:], end)
			}
			i++
		}
	}
	p.encoding = encBinary(encNoNulls(encFlat(64, 0)), encFlat(8, 1), adj)
	return p
}

// flushList writes one u64 end offset per row, relative to the page's first item. K is the number
// of items the page references; a null list's entry is the previous end plus A = K + 1.
func (w *Writer) flushList(c *column) pageMeta {
	var p pageMeta
	k := int64(0)
	for _, ch := range c.chunks {
		k += validSpan(ch.arr, ch.from, ch.to)
	}
	adj := uint64(k) + 1
	w.reserve(padded(8 * c.rows))
	offs := w.buffer(&p, 8*c.rows)
	i, end := 0, uint64(0)
	for _, ch := range c.chunks {
		off := offsetsOf(ch.arr)
		if nullsIn(ch.arr, ch.from, ch.to) == 0 {
			i = putEnds(offs, i, off, ch.from, ch.to, end)
			end += uint64(off.at(ch.to) - off.at(ch.from))
			continue
		}
		for r := ch.from; r < ch.to; r++ {
			if ch.arr.IsNull(r) {
				binary.LittleEndian.PutUint64(offs[8*i:], end+adj)
			} else {
				end += uint64(off.at(r+1) - off.at(r))
				binary.LittleEndian.PutUint64(offs[8*i:], end)
			}
			i++
		}
	}
	p.encoding = encList(encNoNulls(encFlat(64, 0)), adj, uint64(k))
	return p
}

// putEnds writes the end offsets of rows [from, to) (no nulls) shifted to start at base, from
// slot i of dst; it returns the next slot. This is the one pass from Arrow offsets to Lance ends.
func putEnds(dst []byte, i int, off offsets, from, to int, base uint64) int {
	dst = dst[8*i : 8*(i+to-from)]
	if endian.IsBigEndian || uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%8 != 0 {
		for j := from; j < to; j++ {
			binary.LittleEndian.PutUint64(dst[8*(j-from):], uint64(off.at(j+1)-off.at(from))+base)
		}
		return i + to - from
	}
	// Little-endian host: the output is a plain []uint64 (page buffers are 64-byte aligned).
	out := arrow.Uint64Traits.CastFromBytes(dst)
	if off.o32 != nil {
		src := off.o32[from : to+1]
		shift := base - uint64(int64(src[0]))
		src = src[1:]
		out = out[:len(src)]
		for j, v := range src {
			out[j] = uint64(int64(v)) + shift
		}
	} else {
		src := off.o64[from : to+1]
		shift := base - uint64(src[0])
		src = src[1:]
		out = out[:len(src)]
		for j, v := range src {
			out[j] = uint64(v) + shift
		}
	}
	return i + to - from
}

// validSpan is the number of bytes (or items) of the non-null rows in [from, to).
func validSpan(arr arrow.Array, from, to int) int64 {
	off := offsetsOf(arr)
	if nullsIn(arr, from, to) == 0 {
		return off.at(to) - off.at(from)
	}
	total := int64(0)
	for r := from; r < to; r++ {
		if arr.IsValid(r) {
			total += off.at(r+1) - off.at(r)
		}
	}
	return total
}

// offsets gives uniform access to an array's 32- or 64-bit Arrow offsets, indexed by row.
type offsets struct {
	o32 []int32
	o64 []int64
}

func (o offsets) at(i int) int64 {
	if o.o32 != nil {
		return int64(o.o32[i])
	}
	return o.o64[i]
}

func offsetsOf(arr arrow.Array) offsets {
	d := arr.Data()
	if d.Len() == 0 {
		return offsets{o32: []int32{0}}
	}
	b := d.Buffers()[1].Bytes()
	switch arr.DataType().ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY, arrow.LARGE_LIST:
		return offsets{o64: arrow.Int64Traits.CastFromBytes(b)[d.Offset() : d.Offset()+d.Len()+1]}
	}
	return offsets{o32: arrow.Int32Traits.CastFromBytes(b)[d.Offset() : d.Offset()+d.Len()+1]}
}

// nullsIn counts the nulls among rows [from, to) of arr.
func nullsIn(arr arrow.Array, from, to int) int {
	if arr.NullN() == 0 || to <= from {
		return 0
	}
	if arr.NullN() == arr.Len() {
		return to - from
	}
	return (to - from) - bitutil.CountSetBits(arr.NullBitmapBytes(), arr.Data().Offset()+from, to-from)
}

// nextNull returns the first null row at or after i, or -1.
func nextNull(arr arrow.Array, i int) int {
	for ; i < arr.Len(); i++ {
		if arr.IsNull(i) {
			return i
		}
	}
	return -1
}

// copyValidity writes the validity of rows [from, from+n) of arr to bits [pos, pos+n) of dst.
func copyValidity(dst []byte, pos int, arr arrow.Array, from, n int) {
	if arr.NullN() == 0 {
		bitutil.SetBitsTo(dst, int64(pos), int64(n), true)
		return
	}
	if v := arr.NullBitmapBytes(); len(v) > 0 {
		bitutil.CopyBitmap(v, arr.Data().Offset()+from, n, dst, pos)
		return
	}
	bitutil.SetBitsTo(dst, int64(pos), int64(n), false) // all null, no bitmap
}

// bufBytes is b's bytes, nil for a nil buffer (Arrow allows one where there is nothing to hold).
func bufBytes(b *memory.Buffer) []byte {
	if b == nil {
		return nil
	}
	return b.Bytes()
}
