package file

import (
	"encoding/binary"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
)

// Mini-block page (MiniBlockLayout), buffers in this order:
//
//	0 chunk metadata: one little-endian word per chunk, u16 in 2.1 and u32 in 2.2
//	  (has_large_chunk): (chunk bytes / 8 - 1) << 4 | log2(values in chunk); the last chunk
//	  says 0 in the low 4 bits and holds whatever values remain
//	1 chunks, back to back, each a multiple of 8 bytes:
//	    u16 levels in the chunk (0 without rep/def) | u16 rep bytes | u16 def bytes
//	    | size of each value buffer (u16 in 2.1, u32 in 2.2) | pad to 8
//	    | rep levels (u16 each) | pad | def levels (u16 each) | pad | value buffers, each padded to 8
//	2 repetition index (only with lists): per chunk u64 rows ending in it, u64 levels left over
//
// Every chunk but the last holds 2^k values (1 <= k <= 12). Levels are stored as plain u16
// (rep/def_compression = flat 16); values are flat, a fixed size list of flat values (plus an
// item validity bitmap buffer when items are null), or variable: u32 (u64 for large types)
// offsets counted from the start of the buffer, followed by the bytes.
const (
	mbMaxChunkValues   = 4096
	maxChunkValueBytes = 8186 // the engines' MAX_MINIBLOCK_BYTES: value buffers of one chunk
	maxChunkBytes      = 32768
	maxChunkLevels     = 32767 // level buffer sizes are u16 bytes
)

type mbChunk struct {
	values, levels int
	bufs           [2]int // value buffer sizes
	size           int
}

func pad8(n int) int { return (n + 7) &^ 7 }

// halve returns the largest power of two below n.
func halve(n int) int {
	if n&(n-1) == 0 {
		return n / 2
	}
	return 1 << (bits.Len(uint(n)) - 1)
}

// encodeMiniBlock writes pg as a mini-block page. It writes nothing and returns false when
// the levels cannot be cut into chunks of the allowed size (long runs of empty or null lists).
func (w *writer21) encodeMiniBlock(pg *pageData, p *wpage21) bool {
	l := pg.l
	hasRep, hasDef := l.lists, l.def != nil
	validity := l.itemValidity()
	nbuf := 1
	if validity {
		nbuf = 2
	}
	var lens []uint8 // binary: value lengths, all < wideValueBytes here
	var cum []int32  // binary: cum[i] = bytes of values [0, i)
	ow := 4
	if l.lay.large {
		ow = 8
	}
	if l.lay.kind == kindBinary {
		lens = make([]uint8, l.values)
		cum = make([]int32, l.values+1)
		k, total := 0, int32(0)
		for _, s := range l.segs {
			if off := offsetsOf(s.arr); off.o32 != nil {
				k, total = valueLens(off.o32, s.from, s.to, lens, cum, k, total)
			} else {
				k, total = valueLens(off.o64, s.from, s.to, lens, cum, k, total)
			}
		}
	}
	// the value buffer sizes of values [v, v+n)
	bufSizes := func(v, n int) [2]int {
		if lens != nil {
			total := int(cum[v+n] - cum[v])
			// the readers take the buffer as whole offsets: the bytes are padded to the width
			return [2]int{(n+1)*ow + (total+ow-1)/ow*ow}
		}
		vb := int((l.valueBits()*int64(n) + 7) / 8)
		if validity {
			return [2]int{(n*l.lay.dim + 7) / 8, vb}
		}
		return [2]int{vb}
	}
	wordBytes := 2
	if w.large {
		wordBytes = 4
	}
	hdr := 2 + nbuf*wordBytes
	if hasRep {
		hdr += 2
	}
	if hasDef {
		hdr += 2
	}
	hdr = pad8(hdr)

	// visAt[k] is the level of the k-th value, when lists make levels and values differ
	var visAt []int32
	if hasRep && hasDef {
		visAt = make([]int32, 0, l.values)
		for i, d := range l.def {
			if d <= pg.maxVis {
				visAt = append(visAt, int32(i))
			}
		}
	}
	var chunks []mbChunk
	v, lv := 0, 0
	for v < l.values {
		rest := l.values - v
		n := min(rest, mbMaxChunkValues)
		for {
			last := n == rest
			if !last && n&(n-1) != 0 {
				n = 1 << (bits.Len(uint(n)) - 1)
				continue
			}
			if !last && n < 2 {
				return false // a lone value would read as the last chunk
			}
			b := bufSizes(v, n)
			levels := n
			switch {
			case last:
				levels = l.levels - lv
			case visAt != nil:
				// up to and including the chunk's last value: null and empty lists after it
				// open the next chunk, as the engines cut them
				levels = int(visAt[v+n-1]) + 1 - lv
			}
			size := hdr + pad8(b[0]) + pad8(b[1])
			if hasRep {
				size += pad8(2 * levels)
			}
			if hasDef {
				size += pad8(2 * levels)
			}
			if b[0]+b[1] <= maxChunkValueBytes && size <= maxChunkBytes && levels <= maxChunkLevels {
				chunks = append(chunks, mbChunk{values: n, levels: levels, bufs: b, size: size})
				v += n
				lv += levels
				break
			}
			if n < 2 {
				return false
			}
			n = halve(n)
		}
	}

	// 2.2 with Options.Compress: the value buffer of each chunk of strings or scalars is
	// LZ4-compressed (general)
	var packed [][]byte
	if w.large && w.opts.Compress && (lens != nil || (l.lay.kind == kindFixed && l.lay.dim == 0 && l.lay.bits >= 8)) {
		packed = make([][]byte, len(chunks))
		cur := newValCursor(l.segs)
		var raw, all []byte
		first := 0
		for ci := range chunks {
			c := &chunks[ci]
			if n := pad8(c.bufs[0]); cap(raw) < n {
				raw = make([]byte, n)
			} else {
				raw = raw[:n] // filled whole, padding included, by the put functions
			}
			if lens != nil {
				l.putVariableChunk(raw, 0, cur, lens[first:first+c.values], ow)
			} else {
				l.putFixedChunk(raw, 0, cur, c.values, c.bufs[0])
			}
			first += c.values
			at := len(all)
			all = appendGeneral(all, raw[:c.bufs[0]])
			packed[ci] = all[at:len(all):len(all)]
			c.size += pad8(len(packed[ci])) - pad8(c.bufs[0])
			c.bufs[0] = len(packed[ci])
		}
	}
	dataSize := 0
	for _, c := range chunks {
		dataSize += c.size
	}
	riSize := 0
	if hasRep {
		riSize = 16 * len(chunks)
	}
	w.reserve(padded(wordBytes*len(chunks)) + padded(dataSize) + padded(riSize))
	meta := w.buffer(p, wordBytes*len(chunks))
	data := w.buffer(p, dataSize)
	var ri []byte
	if hasRep {
		ri = w.buffer(p, riSize)
	}

	cur := newValCursor(l.segs)
	pos, v, lv := 0, 0, 0
	var prevLeft int
	for ci, c := range chunks {
		last := ci == len(chunks)-1
		word := uint32(c.size/8-1) << 4
		if !last {
			word |= uint32(bits.Len(uint(c.values)) - 1)
		}
		if w.large {
			binary.LittleEndian.PutUint32(meta[4*ci:], word)
		} else {
			binary.LittleEndian.PutUint16(meta[2*ci:], uint16(word))
		}
		out := data[pos : pos+c.size]
		h := 0
		put16 := func(x int) { binary.LittleEndian.PutUint16(out[h:], uint16(x)); h += 2 }
		if hasRep || hasDef {
			put16(c.levels)
		} else {
			put16(0)
		}
		if hasRep {
			put16(2 * c.levels)
		}
		if hasDef {
			put16(2 * c.levels)
		}
		for b := 0; b < nbuf; b++ {
			if w.large {
				binary.LittleEndian.PutUint32(out[h:], uint32(c.bufs[b]))
				h += 4
			} else {
				put16(c.bufs[b])
			}
		}
		h = fillPad(out, h)
		if hasRep {
			putLevels(out[h:], l.rep[lv:lv+c.levels])
			h = fillPad(out, h+2*c.levels)
		}
		if hasDef {
			putLevels(out[h:], l.def[lv:lv+c.levels])
			h = fillPad(out, h+2*c.levels)
		}
		switch {
		case packed != nil:
			h = fillPad(out, h+copy(out[h:], packed[ci]))
		case lens != nil:
			h = l.putVariableChunk(out, h, cur, lens[v:v+c.values], ow)
		case validity:
			vb := out[h : h+c.bufs[0]]
			clear(vb)
			k := 0
			cur2 := *cur
			cur2.take(c.values, func(arr arrow.Array, from, to int) {
				l.putItemValidity(vb, k, arr, from, to)
				k += to - from
			})
			h = fillPad(out, h+c.bufs[0])
			h = l.putFixedChunk(out, h, cur, c.values, c.bufs[1])
		default:
			h = l.putFixedChunk(out, h, cur, c.values, c.bufs[0])
		}
		if h != c.size {
			panic("lance file: mini-block chunk size miscounted") // a bug in this package
		}
		if hasRep {
			prevLeft = putRepIndex(ri, ci, l.rep[lv:lv+c.levels], l.maxRep, last, prevLeft)
		}
		pos += c.size
		v += c.values
		lv += c.levels
	}

	values := compFlat(uint64(l.lay.bits))
	switch {
	case packed != nil && lens != nil:
		values = compGeneral(compVariable(uint64(8 * ow)))
	case packed != nil:
		values = compGeneral(values)
	case l.lay.kind == kindBinary:
		values = compVariable(uint64(8 * ow))
	case l.lay.dim > 0:
		values = compFSL(uint64(l.lay.dim), values, validity)
	}
	p.layout = miniBlockDesc{
		rep: hasRep, def: hasDef, values: values, layers: pg.layers,
		numBuffers: uint64(nbuf), numItems: uint64(l.values), large: w.large,
	}.encode()
	return true
}

// valueLens writes the lengths of values [from, to) of offsets o to lens[k:], and their running
// sum from total to cum[k+1:]; it returns the next k and the total. Typed by the offsets' width,
// without offsets.at's branch per value: this loop runs once for every string a file holds.
func valueLens[T int32 | int64](o []T, from, to int, lens []uint8, cum []int32, k int, total int32) (int, int32) {
	for r := from; r < to; r++ {
		n := uint8(o[r+1] - o[r])
		lens[k] = n
		total += int32(n)
		k++
		cum[k] = total
	}
	return k, total
}

// putRepIndex fills chunk ci's (rows ended, levels left over) pair the way the engines count
// them: a row ends in a chunk when the next row starts in it, the last chunk also ends the
// last row, and leftovers turn into an ended row when the next chunk starts with a new row.
func putRepIndex(ri []byte, ci int, rep []uint16, maxRep uint16, last bool, prevLeft int) int {
	rows := 0
	lastStart := -1
	for i, r := range rep {
		if r == maxRep {
			if i > 0 {
				rows++
			}
			lastStart = i
		}
	}
	left := 0
	if !last {
		left = len(rep)
		if lastStart >= 0 {
			left = len(rep) - lastStart
		}
	}
	if ci > 0 && len(rep) > 0 && rep[0] == maxRep && prevLeft != 0 {
		prev := ri[16*(ci-1):]
		binary.LittleEndian.PutUint64(prev, binary.LittleEndian.Uint64(prev)+1)
		binary.LittleEndian.PutUint64(prev[8:], 0)
	}
	if last {
		rows++
	}
	binary.LittleEndian.PutUint64(ri[16*ci:], uint64(rows))
	binary.LittleEndian.PutUint64(ri[16*ci+8:], uint64(left))
	return left
}

// fillPad pads out from h to the next multiple of 8 with the engines' fill byte.
func fillPad(out []byte, h int) int {
	for ; h%8 != 0; h++ {
		out[h] = 0xFE
	}
	return h
}

// putFixedChunk copies the next n fixed-width values into out at h (size bytes) and pads.
func (l *leaf21) putFixedChunk(out []byte, h int, cur *valCursor, n, size int) int {
	dst := out[h : h+size]
	if l.lay.bits == 1 {
		clear(dst)
	}
	k := 0
	cur.take(n, func(arr arrow.Array, from, to int) {
		l.putFixed(dst, k, arr, from, to)
		k += to - from
	})
	return fillPad(out, h+size)
}

// putVariableChunk writes offsets then bytes of the next len(lens) values into out at h.
func (l *leaf21) putVariableChunk(out []byte, h int, cur *valCursor, lens []uint8, ow int) int {
	n := len(lens)
	end := (n + 1) * ow
	if ow == 4 {
		o := out[h : h+4*(n+1)]
		for i, ln := range lens {
			binary.LittleEndian.PutUint32(o[4*i:], uint32(end))
			end += int(ln)
		}
		binary.LittleEndian.PutUint32(o[4*n:], uint32(end))
	} else {
		o := out[h : h+8*(n+1)]
		for i, ln := range lens {
			binary.LittleEndian.PutUint64(o[8*i:], uint64(end))
			end += int(ln)
		}
		binary.LittleEndian.PutUint64(o[8*n:], uint64(end))
	}
	d := h + (n+1)*ow
	cur.take(n, func(arr arrow.Array, from, to int) {
		off := offsetsOf(arr)
		src := bufBytes(arr.Data().Buffers()[2])
		d += copy(out[d:], src[off.at(from):off.at(to)])
	})
	for ; (d-h)%ow != 0; d++ {
		out[d] = padByte // the engines pad the bytes to the offset width with 'H'
	}
	return fillPad(out, d)
}
