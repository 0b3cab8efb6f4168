package file

import (
	"encoding/binary"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
)

// Full-zip page (FullZipLayout), buffers in this order:
//
//	0 per level: control word, then the value when the level has one. The control word is
//	  rep << bits_def | def in 1, 2 or 4 bytes (whatever holds bits_rep + bits_def; none when
//	  both are 0), the bit widths being those of the page's largest levels. Fixed-width values
//	  (bits_per_value) are stored for every visible level, nulls included; variable-width
//	  values (bits_per_offset) are a u32/u64 length and the bytes, for valid values only.
//	1 repetition index (variable width, or fixed width under a list): the byte offset in
//	  buffer 0 where each row starts, and the buffer's length, in 1, 2, 4 or 8 bytes each (the
//	  reader divides the buffer's size by rows + 1).
//
// The engines use it for values of 256 bytes or more, which mini-block chunks do not suit.

func (w *writer21) encodeFullZip(pg *pageData, p *wpage21) {
	l := pg.l
	hasRep, hasDef := l.lists, l.def != nil
	var bitsRep, bitsDef int
	if hasRep {
		bitsRep = bits.Len16(l.maxRep)
	}
	if hasDef {
		var m uint16
		for _, d := range l.def {
			m = max(m, d)
		}
		bitsDef = bits.Len16(m)
	}
	cw := 0
	if hasRep || hasDef {
		switch t := bitsRep + bitsDef; {
		case t <= 8:
			cw = 1
		case t <= 16:
			cw = 2
		default:
			cw = 4
		}
	}
	levels := l.levels
	visible := func(i int) bool { return !hasDef || l.def[i] <= pg.maxVis }
	valid := func(i int) bool { return !hasDef || l.def[i] == 0 }

	binaryVals := l.lay.kind == kindBinary
	ow := 4
	if l.lay.large {
		ow = 8
	}
	validity := !binaryVals && l.itemValidity()
	vb := 0 // fixed: bytes per value, item validity included
	if !binaryVals {
		vb = int(l.valueBits() / 8)
		if validity {
			vb += (l.lay.dim + 7) / 8
		}
	}

	// sizes first: the buffers are reserved before they are written
	size := cw * levels
	if binaryVals {
		cur := newValCursor(l.segs)
		for lv := 0; lv < levels; lv++ {
			if !visible(lv) {
				continue
			}
			ok := valid(lv)
			cur.take(1, func(arr arrow.Array, from, to int) {
				if ok {
					off := offsetsOf(arr)
					size += ow + int(off.at(to)-off.at(from))
				}
			})
		}
	} else {
		size += vb * l.values
	}
	withIndex := binaryVals || hasRep
	rows := l.rows
	iw := 1
	switch {
	case size > 0xffffffff:
		iw = 8
	case size > 0xffff:
		iw = 4
	case size > 0xff:
		iw = 2
	}
	need := padded(size)
	if withIndex {
		need += padded(iw * (rows + 1))
	}
	w.reserve(need)
	data := w.buffer(p, size)
	var index []byte
	if withIndex {
		index = w.buffer(p, iw*(rows+1))
	}

	putIndex := func(k, v int) {
		switch iw {
		case 1:
			index[k] = byte(v)
		case 2:
			binary.LittleEndian.PutUint16(index[2*k:], uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(index[4*k:], uint32(v))
		default:
			binary.LittleEndian.PutUint64(index[8*k:], uint64(v))
		}
	}
	cur := newValCursor(l.segs)
	h, row := 0, 0
	var scratch []byte
	if validity {
		scratch = make([]byte, (l.lay.dim+7)/8)
	}
	for lv := 0; lv < levels; lv++ {
		var rep, def uint16
		if hasRep {
			rep = l.rep[lv]
		}
		if hasDef {
			def = l.def[lv]
		}
		if withIndex && (!hasRep || rep == l.maxRep) {
			putIndex(row, h)
			row++
		}
		word := uint32(rep)<<bitsDef | uint32(def)
		switch cw {
		case 1:
			data[h] = byte(word)
		case 2:
			binary.LittleEndian.PutUint16(data[h:], uint16(word))
		case 4:
			binary.LittleEndian.PutUint32(data[h:], word)
		}
		h += cw
		if !visible(lv) {
			continue
		}
		ok := valid(lv)
		cur.take(1, func(arr arrow.Array, from, to int) {
			switch {
			case binaryVals && !ok:
			case binaryVals:
				off := offsetsOf(arr)
				n := int(off.at(to) - off.at(from))
				if ow == 4 {
					binary.LittleEndian.PutUint32(data[h:], uint32(n))
				} else {
					binary.LittleEndian.PutUint64(data[h:], uint64(n))
				}
				h += ow
				h += copy(data[h:], bufBytes(arr.Data().Buffers()[2])[off.at(from):off.at(to)])
			case validity:
				clear(scratch)
				l.putItemValidity(scratch, 0, arr, from, to)
				h += copy(data[h:], scratch)
				l.putFixed(data[h:h+vb-len(scratch)], 0, arr, from, to)
				h += vb - len(scratch)
			default:
				l.putFixed(data[h:h+vb], 0, arr, from, to)
				h += vb
			}
		})
	}
	if h != size {
		panic("lance file: full-zip page size miscounted") // a bug in this package
	}
	if withIndex {
		putIndex(row, h)
	}

	d := fullZipDesc{
		bitsRep: uint64(bitsRep), bitsDef: uint64(bitsDef),
		numItems: uint64(levels), numVisible: uint64(l.values), layers: pg.layers,
	}
	if binaryVals {
		d.bitsPerOffset = uint64(8 * ow)
		d.values = compVariable(uint64(8 * ow))
	} else {
		d.bitsPerValue = uint64(8 * vb)
		d.values = compFlat(uint64(l.lay.bits))
		if l.lay.dim > 0 {
			d.values = compFSL(uint64(l.lay.dim), d.values, validity)
		}
	}
	p.layout = d.encode()
}
