package file

import (
	"encoding/binary"
)

// page21 is one 2.1+ page decoded whole: its repetition and definition levels (nil when the
// layout has none) and the values of its visible items, in order.
type page21 struct {
	rows     uint64
	rep, def []uint16
	vals     *vals21
	constant bool // vals holds one value that every visible valid item takes
	allNull  bool // no values at all: every item is null
	levels   levelInfo
	// base is the page row that row 0 of the decoded data is; wantFirst and wantEnd are the
	// rows the caller needs (chunks outside them may be skipped).
	base, wantFirst, wantEnd uint64
	// window: the chunk buffer given is bytes [dataAt, dataAt+len) of a dataLen-byte buffer.
	window          bool
	dataAt, dataLen uint64
	// For a window of a list page: the chunks decoded, and whether the first of them starts
	// inside a list (a row begun in an earlier chunk, which the caller does not ask for).
	chunkLo, chunkHi int
	preamble         bool
}

// levelInfo interprets definition levels for the layer stacks this reader supports: an item
// layer, optionally under one list layer.
type levelInfo struct {
	list                  bool
	itemNullable          bool
	itemLevels            uint16 // levels 1..itemLevels are null items (visible)
	nullList, emptyList   uint16 // 0 when the list cannot be null / empty
	listNullable, listAll bool
}

func parseLevels(layers []uint64) (levelInfo, error) {
	var li levelInfo
	switch len(layers) {
	case 1, 2:
	default:
		return li, errf("%d rep/def layers; only an item under at most one list is supported", len(layers))
	}
	switch layers[0] {
	case layerAllValidItem:
	case layerNullableItem:
		li.itemNullable, li.itemLevels = true, 1
	default:
		return li, errf("rep/def layer %d where an item layer belongs", layers[0])
	}
	if len(layers) == 2 {
		li.list = true
		next := li.itemLevels + 1
		switch layers[1] {
		case layerAllValidList:
		case layerNullableList:
			li.nullList = next
		case layerEmptyableList:
			li.emptyList = next
		case layerNullEmptyList:
			li.nullList, li.emptyList = next, next+1
		default:
			return li, errf("rep/def layer %d where a list layer belongs", layers[1])
		}
	}
	return li, nil
}

func (li levelInfo) maxDef() uint16 { return max(li.itemLevels, li.nullList, li.emptyList) }

func levelsOf(v *vals21, n uint64) ([]uint16, error) {
	if v.variable || v.w != 2 || v.n != n {
		return nil, errf("levels decode to %d values of %d bytes, want %d of 2", v.n, v.w, n)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(v.fixed[2*i:])
	}
	return out, nil
}

// decodePage21 decodes a page from its layout and buffers.
func decodePage21(l *layout21, bufs [][]byte, rows uint64) (*page21, error) {
	return decodePageRange21(l, bufs, rows, 0, rows)
}

// decodePageRange21 decodes at least rows [first, first+count) of a page. A mini-block page
// without lists decodes only the chunks holding them (pg.base is then the first row decoded);
// other pages are decoded whole.
func decodePageRange21(l *layout21, bufs [][]byte, rows, first, count uint64) (*page21, error) {
	return decodePage21At(l, bufs, &page21{rows: rows, wantFirst: first, wantEnd: first + count})
}

// decodeWindow21 decodes rows [first, first+count) of a mini-block page whose chunk buffer
// (dataLen bytes) is given only from byte dataAt on.
func decodeWindow21(l *layout21, bufs [][]byte, rows, first, count, dataAt, dataLen uint64) (*page21, error) {
	return decodePage21At(l, bufs, &page21{rows: rows, wantFirst: first, wantEnd: first + count,
		window: true, dataAt: dataAt, dataLen: dataLen})
}

func decodePage21At(l *layout21, bufs [][]byte, pg *page21) (*page21, error) {
	li, err := parseLevels(l.layers)
	if err != nil {
		return nil, err
	}
	pg.levels = li
	switch l.kind {
	case layoutMiniBlock:
		err = pg.miniBlock(l, bufs)
	case layoutConstant:
		err = pg.constantPage(l, bufs)
	default: // parseLayout21 admits no other layout
		err = pg.fullZip(l, bufs)
	}
	if err != nil {
		return nil, err
	}
	return pg, pg.check()
}

// check verifies that levels, rows and values agree, so that the row walk cannot run off them.
func (pg *page21) check() error {
	li := pg.levels
	nlev := uint64(len(pg.def))
	if pg.rep != nil {
		nlev = uint64(len(pg.rep))
		if pg.def != nil && len(pg.def) != len(pg.rep) {
			return errf("%d repetition levels but %d definition levels", len(pg.rep), len(pg.def))
		}
	}
	if li.list != (pg.rep != nil) {
		return errf("list layers and repetition levels disagree")
	}
	if !li.list && pg.def != nil && nlev != pg.rows {
		return errf("%d definition levels for %d rows", nlev, pg.rows)
	}
	if pg.def == nil && (li.itemNullable || li.nullList != 0 || li.emptyList != 0) && !pg.allNull {
		return errf("nullable layers without definition levels")
	}
	rowsSeen, visible := uint64(0), uint64(0)
	for i := uint64(0); i < nlev; i++ {
		if pg.rep != nil {
			if pg.rep[i] > 1 {
				return errf("repetition level %d in a single list", pg.rep[i])
			}
			if pg.rep[i] == 1 {
				rowsSeen++
			} else if i == 0 && !pg.preamble {
				return errf("levels start inside a list")
			}
		}
		d := uint16(0)
		if pg.def != nil {
			d = pg.def[i]
			if d > li.maxDef() {
				return errf("definition level %d above the maximum %d", d, li.maxDef())
			}
		}
		if d <= li.itemLevels {
			visible++
		}
	}
	if pg.rep != nil && rowsSeen != pg.rows {
		return errf("repetition levels start %d rows, the page has %d", rowsSeen, pg.rows)
	}
	if pg.rep == nil && pg.def == nil {
		visible = pg.rows
	}
	if pg.allNull {
		return nil
	}
	if pg.constant {
		if pg.vals.n != 1 {
			return errf("constant page with %d values", pg.vals.n)
		}
		return nil
	}
	if pg.vals.n != visible {
		return errf("%d values for %d visible items", pg.vals.n, visible)
	}
	return nil
}

func (pg *page21) miniBlock(l *layout21, bufs [][]byte) error {
	if l.value == nil {
		return errf("mini-block layout without a value compression")
	}
	want := 2
	if l.dict != nil {
		want++
	}
	if l.repIndexDepth > 0 {
		want++
	}
	if len(bufs) != want {
		return errf("mini-block page with %d buffers, want %d", len(bufs), want)
	}
	if l.numBuffers == 0 || l.numBuffers > 16 {
		return errf("mini-block chunks of %d buffers", l.numBuffers)
	}
	spans, err := chunkSpans(l, bufs[0])
	if err != nil {
		return err
	}
	data := bufs[1]
	dataLen := uint64(len(data))
	if pg.window {
		dataLen = pg.dataLen
	}
	var vals vals21
	// skipped says whether chunk k, whose first item is item first, is left undecoded: with
	// lists through a window, a chunk outside it; without lists, a chunk whose items (its rows)
	// are all outside the wanted rows (read through a window, it was not even fetched).
	skipped := func(k int, first uint64, c chunkSpan) bool {
		if pg.window && l.rep != nil {
			return k < pg.chunkLo || k > pg.chunkHi
		}
		return l.rep == nil && (first+c.items <= pg.wantFirst || first >= pg.wantEnd) && c.items > 0
	}
	// Sized for the chunks decoded below, up front (growing chunk by chunk copied the page's
	// values about twice over): counts and sizes from the chunk metadata, which the loop
	// checks. A hint is only a capacity: bounded by the page's own bytes and maxSizeHint, a
	// hostile count gets no large allocation before its values are decoded.
	for k, first := 0, uint64(0); k < len(spans); k++ {
		if !skipped(k, first, spans[k]) {
			vals.hintItems += spans[k].items
			vals.hintBytes += spans[k].size
		}
		first += spans[k].items
	}
	vals.hintItems, vals.hintBytes = min(vals.hintItems, maxSizeHint/8), min(vals.hintBytes, dataLen, maxSizeHint)
	var rep, def []uint16
	items := uint64(0)
	for k, c := range spans {
		if c.size > dataLen || c.pos > dataLen-c.size {
			return errf("chunk %d of %d bytes at %d runs past the %d-byte chunk buffer", k, c.size, c.pos, dataLen)
		}
		n := c.items
		if skipped(k, items, c) {
			if !(pg.window && l.rep != nil) && vals.n == 0 && len(def) == 0 {
				pg.base = items + n
			}
			items += n
			continue
		}
		at := c.pos
		if pg.window {
			if at < pg.dataAt || at-pg.dataAt+c.size > uint64(len(data)) {
				return errf("chunk %d lies outside the fetched chunk bytes", k)
			}
			at -= pg.dataAt
		}
		cv, cr, cd, err := decodeChunk(l, data[at:at+c.size], n)
		if err != nil {
			return errf("chunk %d: %v", k, err)
		}
		vals.appendVals(cv)
		if uint64(len(vals.fixed)+len(vals.data)) > maxDecoded21 {
			return errf("page values expand past %d bytes", maxDecoded21)
		}
		rep, def = append(rep, cr...), append(def, cd...)
		items += n
	}
	if items != l.numItems {
		return errf("chunks hold %d items, the layout says %d", items, l.numItems)
	}
	if l.rep == nil {
		if pg.rows != l.numItems {
			return errf("%d items in a page of %d rows without lists", l.numItems, pg.rows)
		}
		pg.rows = vals.n // the decoded rows, from pg.base on
		if l.def != nil {
			pg.rows = uint64(len(def))
		}
	}
	if l.rep != nil {
		pg.rep = rep
	}
	if l.def != nil {
		pg.def = def
	}
	if l.dict != nil {
		d, err := decodeBlock(l.dict, bufs[2], l.dictItems)
		if err != nil {
			return errf("dictionary: %v", err)
		}
		if vals.n > 0 {
			if vals, err = gather(d, &vals); err != nil {
				return err
			}
		}
	}
	if vals.n == 0 && vals.fixed == nil && vals.offs == nil {
		vals.offs = []uint64{0}
		vals.variable = true
	}
	pg.vals = &vals
	return nil
}

// decodeChunk decodes one mini-block chunk holding n values:
//
//	u16 levels, [u16 rep bytes], [u16 def bytes], value buffer sizes (u16, u32 in large chunks),
//	padding to 8, rep, padding, def, padding, each value buffer followed by padding.
func decodeChunk(l *layout21, c []byte, n uint64) (*vals21, []uint16, []uint16, error) {
	pos := uint64(0)
	read := func(w uint64) (uint64, error) {
		if uint64(len(c))-pos < w {
			return 0, errf("chunk header is cut short")
		}
		v := wordAt(c[pos:], w*8, 0)
		pos += w
		return v, nil
	}
	nlev, err := read(2)
	if err != nil {
		return nil, nil, nil, err
	}
	var repSize, defSize uint64
	if l.rep != nil {
		if repSize, err = read(2); err != nil {
			return nil, nil, nil, err
		}
	}
	if l.def != nil {
		if defSize, err = read(2); err != nil {
			return nil, nil, nil, err
		}
	}
	bw := uint64(2)
	if l.largeChunk {
		bw = 4
	}
	sizes := make([]uint64, l.numBuffers)
	for i := range sizes {
		if sizes[i], err = read(bw); err != nil {
			return nil, nil, nil, err
		}
	}
	take := func(size uint64) ([]byte, error) {
		pos = (pos + 7) &^ 7
		if pos > uint64(len(c)) || size > uint64(len(c))-pos {
			return nil, errf("chunk buffer of %d bytes at %d runs past the %d-byte chunk", size, pos, len(c))
		}
		b := c[pos : pos+size]
		pos += size
		return b, nil
	}
	var rep, def []uint16
	if l.rep != nil {
		b, err := take(repSize)
		if err != nil {
			return nil, nil, nil, err
		}
		v, err := decodeBlock(l.rep, b, nlev)
		if err != nil {
			return nil, nil, nil, errf("repetition levels: %v", err)
		}
		if rep, err = levelsOf(v, nlev); err != nil {
			return nil, nil, nil, err
		}
	}
	if l.def != nil {
		b, err := take(defSize)
		if err != nil {
			return nil, nil, nil, err
		}
		v, err := decodeBlock(l.def, b, nlev)
		if err != nil {
			return nil, nil, nil, errf("definition levels: %v", err)
		}
		if def, err = levelsOf(v, nlev); err != nil {
			return nil, nil, nil, err
		}
	}
	vb := make([][]byte, len(sizes))
	for i, s := range sizes {
		if vb[i], err = take(s); err != nil {
			return nil, nil, nil, err
		}
	}
	v, err := decodeMini(l.value, vb, n)
	return v, rep, def, err
}

// gather replaces dictionary indices by the dictionary's values.
func gather(dict, idx *vals21) (vals21, error) {
	if idx.variable || idx.bool || (idx.w != 1 && idx.w != 2 && idx.w != 4 && idx.w != 8) {
		return vals21{}, errf("dictionary indices are not integers")
	}
	out := vals21{n: idx.n, w: dict.w, bool: dict.bool, variable: dict.variable, dim: dict.dim}
	if dict.variable {
		out.offs = make([]uint64, 1, idx.n+1)
	}
	for i := uint64(0); i < idx.n; i++ {
		if uint64(len(out.data)+len(out.fixed)) > maxDecoded21 {
			return vals21{}, errf("dictionary values expand past %d bytes", maxDecoded21)
		}
		k := wordAt(idx.fixed, idx.w*8, i)
		if k >= dict.n {
			// A null item's index may point anywhere; its slot is never read.
			k = 0
			if dict.n == 0 {
				return vals21{}, errf("dictionary index %d into an empty dictionary", i)
			}
		}
		if dict.variable {
			out.data = append(out.data, dict.data[dict.offs[k]:dict.offs[k+1]]...)
			out.offs = append(out.offs, uint64(len(out.data)))
		} else {
			out.fixed = append(out.fixed, dict.fixed[k*dict.w:(k+1)*dict.w]...)
		}
	}
	return out, nil
}

// chunkSpan is a mini-block chunk's place in the chunk buffer and its value count.
type chunkSpan struct{ pos, size, items uint64 }

// chunkSpans reads the chunk metadata words: u16 (u32 with has_large_chunk), the low 4 bits
// log2 of the chunk's values (the last chunk holds what remains of num_items), the rest the
// chunk's size in 8-byte words minus one.
func chunkSpans(l *layout21, meta []byte) ([]chunkSpan, error) {
	ww := uint64(2)
	if l.largeChunk {
		ww = 4
	}
	if uint64(len(meta))%ww != 0 {
		return nil, errf("chunk metadata of %d bytes is not whole %d-byte words", len(meta), ww)
	}
	nchunks := uint64(len(meta)) / ww
	spans := make([]chunkSpan, nchunks)
	pos, items := uint64(0), uint64(0)
	for k := range spans {
		word := wordAt(meta, ww*8, uint64(k))
		size := (word>>4 + 1) * 8
		n := uint64(1) << (word & 15)
		if uint64(k) == nchunks-1 {
			if l.numItems < items || l.numItems-items > maxChunkValues {
				return nil, errf("last chunk holds %d of the page's %d items", l.numItems-items, l.numItems)
			}
			n = l.numItems - items
		}
		spans[k] = chunkSpan{pos: pos, size: size, items: n}
		pos += size // at most 2^29 per word: no overflow
		items += n
	}
	return spans, nil
}
