package file

import "encoding/binary"

// constantPage decodes AllNullLayout (2.1) and ConstantLayout (2.2, the same field): an inline
// scalar (no buffers, or rep and def), a scalar in buffer 0 (then rep and def in 1 and 2), or,
// with neither, all nulls. Levels are raw u16 unless rep/def compressions are given.
func (pg *page21) constantPage(l *layout21, bufs [][]byte) error {
	var levelBufs [][]byte
	switch {
	case l.hasInline && (len(bufs) == 0 || len(bufs) == 2):
		v, err := decodeConstantBlock(l.inline, 1)
		if err != nil {
			return err
		}
		pg.vals, pg.constant, levelBufs = v, true, bufs
	case !l.hasInline && (len(bufs) == 1 || len(bufs) == 3):
		v, err := decodeScalarBuffer(bufs[0])
		if err != nil {
			return errf("constant value: %v", err)
		}
		pg.vals, pg.constant, levelBufs = v, true, bufs[1:]
	case !l.hasInline && (len(bufs) == 0 || len(bufs) == 2):
		pg.allNull, levelBufs = true, bufs
	default:
		return errf("constant layout with %d buffers", len(bufs))
	}
	if len(levelBufs) == 0 {
		return nil
	}
	var err error
	if pg.rep, err = constantLevels(l.rep, levelBufs[0], l.numRepValues); err != nil {
		return errf("repetition levels: %v", err)
	}
	if pg.def, err = constantLevels(l.def, levelBufs[1], l.numDefValues); err != nil {
		return errf("definition levels: %v", err)
	}
	return nil
}

func constantLevels(c *ce21, b []byte, n uint64) ([]uint16, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if c == nil {
		if len(b)%2 != 0 {
			return nil, errf("%d bytes of u16 levels", len(b))
		}
		n = uint64(len(b)) / 2
		return levelsOf(&vals21{n: n, w: 2, fixed: b}, n)
	}
	if n > uint64(len(b))*256 {
		return nil, errf("%d levels from %d bytes", n, len(b))
	}
	v, err := decodeBlock(c, b, n)
	if err != nil {
		return nil, err
	}
	return levelsOf(v, n)
}

// decodeScalarBuffer reads a constant that does not fit inline: u32 buffer count, a u32 size per
// buffer, the buffers. One buffer is a fixed-width value; two are the offsets and bytes of a
// one-element string or binary array.
func decodeScalarBuffer(b []byte) (*vals21, error) {
	if len(b) < 4 {
		return nil, errf("scalar of %d bytes", len(b))
	}
	nb := uint64(binary.LittleEndian.Uint32(b))
	if nb == 0 || nb > 2 || uint64(len(b)) < 4+4*nb {
		return nil, errf("scalar of %d buffers in %d bytes", nb, len(b))
	}
	parts := make([][]byte, nb)
	pos := 4 + 4*nb
	for i := range parts {
		sz := uint64(binary.LittleEndian.Uint32(b[4+4*i:]))
		if sz > uint64(len(b))-pos {
			return nil, errf("scalar buffer %d of %d bytes runs past %d", i, sz, len(b))
		}
		parts[i], pos = b[pos:pos+sz], pos+sz
	}
	if nb == 1 {
		if len(parts[0]) == 0 {
			return nil, errf("empty scalar")
		}
		return &vals21{n: 1, w: uint64(len(parts[0])), fixed: parts[0]}, nil
	}
	var lo, hi uint64
	switch len(parts[0]) {
	case 8:
		lo, hi = uint64(binary.LittleEndian.Uint32(parts[0])), uint64(binary.LittleEndian.Uint32(parts[0][4:]))
	case 16:
		lo, hi = binary.LittleEndian.Uint64(parts[0]), binary.LittleEndian.Uint64(parts[0][8:])
	default:
		return nil, errf("scalar offsets of %d bytes", len(parts[0]))
	}
	if lo > hi || hi > uint64(len(parts[1])) {
		return nil, errf("scalar offsets [%d, %d) outside %d bytes", lo, hi, len(parts[1]))
	}
	return &vals21{n: 1, variable: true, offs: []uint64{0, hi - lo}, data: parts[1][lo:hi]}, nil
}

// fullZip decodes a full-zip page: per item a control word (rep in the high bits, def in the
// low bits, 0, 1, 2 or 4 bytes), then for a visible item its value: fixed-width bytes, or for
// variable-width a length and the bytes (nothing for a null item). Buffer 1, when present, is
// the repetition index, which a whole-page decode does not need.
func (pg *page21) fullZip(l *layout21, bufs [][]byte) error {
	if len(bufs) != 1 && len(bufs) != 2 {
		return errf("full-zip page with %d buffers", len(bufs))
	}
	if l.value == nil {
		return errf("full-zip layout without a value compression")
	}
	if l.bitsRep > 16 || l.bitsDef > 16 {
		return errf("full-zip control word of %d+%d bits", l.bitsRep, l.bitsDef)
	}
	cw := uint64(0)
	switch tb := l.bitsRep + l.bitsDef; {
	case tb == 0:
	case tb <= 8:
		cw = 1
	case tb <= 16:
		cw = 2
	default:
		cw = 4
	}
	b := bufs[0]
	li := pg.levels
	var lenW, valW uint64
	if l.variable {
		if l.bitsPerOffset != 32 && l.bitsPerOffset != 64 {
			return errf("full-zip lengths of %d bits", l.bitsPerOffset)
		}
		lenW = l.bitsPerOffset / 8
	} else {
		if l.bitsPerValue == 0 || l.bitsPerValue%8 != 0 {
			return errf("full-zip values of %d bits", l.bitsPerValue)
		}
		valW = l.bitsPerValue / 8
	}
	// Every item takes at least its control word, or without one its value or length: this
	// bounds the allocations.
	per := cw
	if cw == 0 {
		per = max(valW, lenW)
	}
	if per == 0 || l.numItems > uint64(len(b))/per {
		return errf("full-zip page claims %d items in %d bytes", l.numItems, len(b))
	}
	var rep, def []uint16
	// The unzipped values never exceed the page, so they are sized for it up front: appended
	// a quarter at a time, a page of vectors was allocated about five times over.
	raw := &vals21{variable: l.variable, w: valW}
	if l.variable {
		raw.offs = make([]uint64, 1, l.numItems+1)
		raw.data = make([]byte, 0, len(b))
	} else {
		raw.fixed = make([]byte, 0, min(l.numItems*valW, uint64(len(b))))
	}
	pos := uint64(0)
	for i := uint64(0); i < l.numItems; i++ {
		var r, d uint16
		if cw > 0 {
			if uint64(len(b))-pos < cw {
				return errf("item %d: control word past the end of the page", i)
			}
			word := wordAt(b[pos:], cw*8, 0)
			pos += cw
			r, d = uint16(word>>l.bitsDef), uint16(word&(1<<l.bitsDef-1))
			if l.bitsRep > 0 {
				rep = append(rep, r)
			}
			if l.bitsDef > 0 {
				def = append(def, d)
			}
		}
		if d > li.itemLevels {
			continue // a null or empty list: no value
		}
		raw.n++
		if !l.variable {
			if uint64(len(b))-pos < valW {
				return errf("item %d: value past the end of the page", i)
			}
			raw.fixed = append(raw.fixed, b[pos:pos+valW]...)
			pos += valW
			continue
		}
		if d != 0 { // a null item has no length
			raw.offs = append(raw.offs, uint64(len(raw.data)))
			continue
		}
		if uint64(len(b))-pos < lenW {
			return errf("item %d: length past the end of the page", i)
		}
		n := wordAt(b[pos:], lenW*8, 0)
		pos += lenW
		if n > uint64(len(b))-pos {
			return errf("item %d: %d bytes past the end of the page", i, n)
		}
		raw.data = append(raw.data, b[pos:pos+n]...)
		raw.offs = append(raw.offs, uint64(len(raw.data)))
		pos += n
	}
	if pos != uint64(len(b)) {
		return errf("full-zip page has %d bytes after its %d items", uint64(len(b))-pos, l.numItems)
	}
	pg.rep, pg.def = rep, def
	v, err := fullZipValues(l.value, raw)
	if err != nil {
		return err
	}
	pg.vals = v
	return nil
}

// fullZipValues undoes the per-value compression of unzipped full-zip values.
func fullZipValues(c *ce21, raw *vals21) (*vals21, error) {
	if !raw.variable {
		if c.kind == ceFixedSizeList && c.valid {
			return fullZipFSLValidity(c, raw)
		}
		return decodeMini(c, [][]byte{raw.fixed}, raw.n)
	}
	switch c.kind {
	case ceVariable:
		return raw, nil
	case ceFsst:
		return fsstDecode(c.symtab, raw)
	case ceGeneral:
		out := &vals21{n: raw.n, variable: true, offs: make([]uint64, 1, raw.n+1)}
		for i := uint64(0); i < raw.n; i++ {
			seg := raw.data[raw.offs[i]:raw.offs[i+1]]
			if len(seg) > 0 {
				d, err := decompressBuffer(c.scheme, seg)
				if err != nil {
					return nil, errf("value %d: %v", i, err)
				}
				out.data = append(out.data, d...)
			}
			out.offs = append(out.offs, uint64(len(out.data)))
		}
		return out, nil
	}
	return nil, errf("%s compression of full-zip values is not supported", c.name())
}

// fullZipFSLValidity splits full-zip fixed size list values whose items can be null: each value
// is its items' validity bitmap (dim bits, whole bytes) followed by the items.
func fullZipFSLValidity(c *ce21, raw *vals21) (*vals21, error) {
	dim := c.bits
	if dim == 0 || dim > 1<<20 || c.a.kind != ceFlat {
		return nil, errf("fixed size list of %d %s items", dim, c.a.name())
	}
	iw, isBool, err := fixedWidth(c.a.bits)
	if err != nil || isBool {
		return nil, errf("fixed size list of %d-bit items in a full-zip page", c.a.bits)
	}
	vb := (dim + 7) / 8
	if raw.w != vb+dim*iw {
		return nil, errf("full-zip values of %d bytes for %d items of %d bytes with validity", raw.w, dim, iw)
	}
	out := &vals21{n: raw.n, w: dim * iw, dim: dim, fixed: make([]byte, 0, raw.n*dim*iw), itemValid: make([]byte, (raw.n*dim+7)/8)}
	for i := uint64(0); i < raw.n; i++ {
		v := raw.fixed[i*raw.w : (i+1)*raw.w]
		copyBits(out.itemValid, i*dim, v[:vb], 0, dim, true)
		out.fixed = append(out.fixed, v[vb:]...)
	}
	return out, nil
}
