package file

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// Reading 2.1+ files. Structs and lists have no column of their own there: every leaf's column
// carries the repetition and definition levels of the lists and structs above it, and a
// dataset's DataFile lists only leaf field ids (a list field is read from its item's column).
// Pages are decoded whole (docs/lance-file-2.1.md); values are appended to Arrow builders, but
// strings and binary without nulls, made into their array in bulk (read21bulk.go).

func (r *Reader) readField21(st *readState, f *schema.Field, dt arrow.DataType, start, n uint64) (arrow.Array, error) {
	leaf := f
	switch dt.ID() {
	case arrow.LIST, arrow.LARGE_LIST:
		if len(f.Children) != 1 || len(f.Children[0].Children) != 0 {
			return nil, r.fail(-1, "field %q: only lists of primitive items are supported in 2.1 files", f.Name)
		}
		leaf = f.Children[0]
	}
	idx, ok, err := r.columnOf(st, f.Name, leaf.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return array.MakeArrayOfNull(st.mem, dt, int(n)), nil
	}
	col := &r.cols[idx]
	if col.rows != uint64(r.numRows) {
		return nil, r.fail(col.metaPos, "column %d (field %q) has %d rows, the file has %d", idx, f.Name, col.rows, r.numRows)
	}
	// The pages' rows making up [start, start+n): decoded all first for strings and binary,
	// which are read in bulk when none holds a null (readVarBinary21), else one at a time.
	bulk := isVarBinary(dt) && leaf == f
	var decoded []pageRows
	var b array.Builder // made when needed: a bulk read makes none
	builder := func() array.Builder {
		if b == nil {
			b = array.NewBuilder(st.mem, dt)
			b.Reserve(int(n))
			if fb, ok := b.(*array.FixedSizeListBuilder); ok {
				// A vector column's items too: grown vector by vector, its buffer was copied
				// about twice over. Bounded as a page's count is, the rows being the file's word.
				items := n * uint64(dt.(*arrow.FixedSizeListType).Len())
				fb.ValueBuilder().Reserve(int(min(items, maxSizeHint/8)))
			}
		}
		return b
	}
	defer func() {
		if b != nil {
			b.Release()
		}
	}()
	pages := col.pages
	i := sort.Search(len(pages), func(i int) bool { return pages[i].rowStart+pages[i].rows > start })
	for at := uint64(0); at < n; i++ {
		p := &pages[i]
		first := start + at - p.rowStart
		count := min(p.rows-first, n-at)
		if count == 0 {
			continue
		}
		pg, err := r.decodeRows21(st, idx, i, p, first, count)
		if err != nil {
			return nil, err
		}
		if bulk {
			decoded = append(decoded, pageRows{pg: pg, pi: i, first: first - pg.base, count: count})
		} else if err := r.pageError(idx, i, pg.emit(builder(), dt, first-pg.base, count)); err != nil {
			return nil, err
		}
		at += count
	}
	if bulk {
		if arr, ok, err := readVarBinary21(dt, decoded, n); ok || err != nil {
			return arr, err
		}
		for _, d := range decoded {
			if err := r.pageError(idx, d.pi, d.pg.emit(builder(), dt, d.first, d.count)); err != nil {
				return nil, err
			}
		}
	}
	return builder().NewArray(), nil
}

// pageError names the column and page of err, a failure to read page pi of column idx.
func (r *Reader) pageError(idx, pi int, err error) error {
	if err == nil {
		return nil
	}
	return asFormatError(err, r.name, r.cols[idx].metaPos, fmt.Sprintf("column %d page %d: ", idx, pi))
}

// decodeRows21 decodes what rows [first, first+count) of page pi of column idx need: their
// page row first is the decoded data's row first-pg.base.
func (r *Reader) decodeRows21(st *readState, idx, pi int, p *pageInfo, first, count uint64) (*page21, error) {
	wrap := func(err error) error { return r.pageError(idx, pi, err) }
	l, err := parseLayout21(p.encoding)
	if err != nil {
		return nil, wrap(err)
	}
	var pg *page21
	part := first > 0 || count < p.rows
	switch {
	case part && l.kind == layoutMiniBlock && l.rep == nil && len(p.offsets) >= 2:
		pg, err = r.readMiniBlockRange(st, p, l, first, count)
		if err != nil {
			return nil, wrap(err)
		}
	case part && l.kind == layoutMiniBlock && l.rep != nil && l.repIndexDepth > 0 && len(p.offsets) >= 3:
		pg, err = r.readMiniBlockListRange(st, p, l, first, count)
		if err != nil {
			return nil, wrap(err)
		}
	case part && l.kind == layoutFullZip && !l.variable && l.bitsRep == 0 && len(p.offsets) >= 1:
		pg, err = r.readFullZipRange(st, p, l, first, count)
		if err != nil {
			return nil, wrap(err)
		}
	default:
		fp, err := r.fetchPage(st.ctx, p)
		if err != nil {
			return nil, err
		}
		if pg, err = decodePageRange21(l, fp.bufs, p.rows, first, count); err != nil {
			return nil, wrap(err)
		}
	}
	// pg.base <= first (only chunks before the wanted rows are skipped); emit checks the range.
	return pg, nil
}

// readMiniBlockRange fetches of a mini-block page without lists only the chunk metadata, the
// dictionary and the chunks holding rows [first, first+count): a batched scan of a large page
// then reads each chunk once instead of the whole page per batch.
func (r *Reader) readMiniBlockRange(st *readState, p *pageInfo, l *layout21, first, count uint64) (*page21, error) {
	bufs, err := r.pageBuffersButChunks(st, p)
	if err != nil {
		return nil, err
	}
	spans, err := chunkSpans(l, bufs[0])
	if err != nil {
		return nil, err
	}
	lo, hi, items := uint64(0), uint64(0), uint64(0)
	found := false
	for _, c := range spans {
		if items+c.items > first && items < first+count {
			if !found {
				lo, found = c.pos, true
			}
			hi = c.pos + c.size
		}
		items += c.items
	}
	if hi > p.sizes[1] || lo > hi {
		return nil, errf("chunks [%d, %d) run past the %d-byte chunk buffer", lo, hi, p.sizes[1])
	}
	b, err := r.read(st.ctx, int64(p.offsets[1]+lo), int64(hi-lo))
	if err != nil {
		return nil, err
	}
	bufs[1] = b
	return decodeWindow21(l, bufs, p.rows, first, count, lo, p.sizes[1])
}

// pageBuffersButChunks fetches every buffer of a mini-block page except buffer 1, the chunks,
// which a ranged read fetches only in part.
func (r *Reader) pageBuffersButChunks(st *readState, p *pageInfo) ([][]byte, error) {
	bufs := make([][]byte, len(p.offsets))
	for i := range bufs {
		if i == 1 {
			continue
		}
		b, err := r.read(st.ctx, int64(p.offsets[i]), int64(p.sizes[i]))
		if err != nil {
			return nil, err
		}
		bufs[i] = b
	}
	return bufs, nil
}

// readMiniBlockListRange fetches of a mini-block list page only the chunks holding rows
// [first, first+count), found through the repetition index: per chunk, repetition_index_depth+1
// u64s, the first the number of lists that end in the chunk, the second the number of items
// after the last of them (a list that goes on into the next chunk).
func (r *Reader) readMiniBlockListRange(st *readState, p *pageInfo, l *layout21, first, count uint64) (*page21, error) {
	bufs, err := r.pageBuffersButChunks(st, p)
	if err != nil {
		return nil, err
	}
	spans, err := chunkSpans(l, bufs[0])
	if err != nil {
		return nil, err
	}
	ri := bufs[len(bufs)-1]
	stride := 8 * (l.repIndexDepth + 1)
	if l.repIndexDepth > 16 || uint64(len(ri)) != stride*uint64(len(spans)) {
		return nil, errf("repetition index of %d bytes for %d chunks at depth %d", len(ri), len(spans), l.repIndexDepth)
	}
	// rowStart[i]: the rows that start before chunk i.
	rowStart := make([]uint64, len(spans)+1)
	trailing := false
	for i := range spans {
		ends, partial := binary.LittleEndian.Uint64(ri[stride*uint64(i):]), binary.LittleEndian.Uint64(ri[stride*uint64(i)+8:])
		starts := ends
		if partial > 0 {
			starts++
		}
		if trailing {
			if starts == 0 {
				return nil, errf("repetition index: chunk %d ends no list but continues one", i)
			}
			starts--
		}
		if starts > p.rows-rowStart[i] {
			return nil, errf("repetition index: more rows than the page's %d", p.rows)
		}
		rowStart[i+1] = rowStart[i] + starts
		trailing = partial > 0
	}
	if rowStart[len(spans)] != p.rows {
		return nil, errf("repetition index counts %d rows, the page has %d", rowStart[len(spans)], p.rows)
	}
	// chunks a..c: from the one where row first starts to the one where row first+count starts
	// (or the last), so that every wanted row is whole.
	a := sort.Search(len(spans), func(i int) bool { return rowStart[i+1] > first })
	c := len(spans) - 1
	if end := first + count; end < p.rows {
		c = sort.Search(len(spans), func(i int) bool { return rowStart[i+1] > end })
	}
	lo, hi := spans[a].pos, spans[c].pos+spans[c].size
	if hi > p.sizes[1] {
		return nil, errf("chunks [%d, %d) run past the %d-byte chunk buffer", lo, hi, p.sizes[1])
	}
	b, err := r.read(st.ctx, int64(p.offsets[1]+lo), int64(hi-lo))
	if err != nil {
		return nil, err
	}
	bufs[1] = b
	pre := a > 0 && binary.LittleEndian.Uint64(ri[stride*uint64(a-1)+8:]) > 0
	pg := &page21{rows: rowStart[c+1] - rowStart[a], base: rowStart[a], wantEnd: ^uint64(0),
		window: true, dataAt: lo, dataLen: p.sizes[1], chunkLo: a, chunkHi: c, preamble: pre}
	return decodePage21At(l, bufs, pg)
}

// readFullZipRange fetches and decodes rows [first, first+count) of a full-zip page of
// fixed-width values without lists: every row is a control word (if any) and a value, so row i
// starts at i times their size. (Vector pages are large; a batch reads only its rows.)
func (r *Reader) readFullZipRange(st *readState, p *pageInfo, l *layout21, first, count uint64) (*page21, error) {
	if l.bitsPerValue == 0 || l.bitsPerValue%8 != 0 || l.bitsDef > 16 {
		return nil, errf("full-zip values of %d bits, control words of %d bits", l.bitsPerValue, l.bitsDef)
	}
	per := l.bitsPerValue / 8
	switch {
	case l.bitsDef > 8:
		per += 2
	case l.bitsDef > 0:
		per++
	}
	if l.numItems != p.rows || p.rows > p.sizes[0]/per || p.sizes[0] != p.rows*per {
		return nil, errf("full-zip page of %d rows, %d items and %d bytes at %d bytes per row", p.rows, l.numItems, p.sizes[0], per)
	}
	b, err := r.read(st.ctx, int64(p.offsets[0]+first*per), int64(count*per))
	if err != nil {
		return nil, err
	}
	part := *l
	part.numItems = count
	pg, err := decodePageRange21(&part, [][]byte{b}, count, 0, count)
	if err != nil {
		return nil, err
	}
	pg.base = first
	return pg, nil
}

// reserve sizes b for rows [first, first+count) of a page without list levels: grown value by
// value, a builder's doubled buffers were copied and zeroed about twice over per column read.
func reserve(b array.Builder, pg *page21, first, count uint64) {
	b.Reserve(int(min(count, maxSizeHint/8))) // a page's row count is the file's word
	v := pg.vals
	if v == nil || !v.variable || pg.constant || first+count > v.n || first+count >= uint64(len(v.offs)) {
		return
	}
	if v.offs[first+count] >= v.offs[first] {
		reserveData(b, int(v.offs[first+count]-v.offs[first]))
	}
}

// binaryBuilderOf is the BinaryBuilder under a string or binary builder, or nil.
func binaryBuilderOf(b array.Builder) *array.BinaryBuilder {
	switch x := b.(type) {
	case *array.StringBuilder:
		return x.BinaryBuilder
	case *array.LargeStringBuilder:
		return x.BinaryBuilder
	case *array.BinaryBuilder:
		return x
	}
	return nil
}

// reserveData makes room in b, a builder of variable-width values, for n more bytes of them,
// growing its buffer at least twofold. The builders' own ReserveData grows it to exactly what
// is asked: a read across many pages, each reserving its own bytes, copied the values read so
// far once per page (quadratic in the pages: 53 MB allocated to read 262,144 keys of 32
// pages).
func reserveData(b array.Builder, n int) {
	bb := binaryBuilderOf(b)
	if bb == nil {
		return
	}
	if free := bb.DataCap() - bb.DataLen(); free < n {
		bb.ReserveData(max(n, bb.DataCap()))
	}
}

// emitStrings appends rows [first, first+count) of a page of strings or binary without nulls,
// checked by plainValues (as UTF-8 for strings only). ok is false for any other page: emit
// goes value by value.
func emitStrings(b array.Builder, pg *page21, first, count uint64) (ok bool, err error) {
	bb := binaryBuilderOf(b)
	if bb == nil {
		return false, nil
	}
	_, binary := b.(*array.BinaryBuilder) // binary and large binary; strings have builders of their own
	offs, ok, err := plainValues(pg, first, count, !binary)
	if !ok || err != nil {
		return ok, err
	}
	v := pg.vals
	// Sized once for the page's values, rather than grown, and copied, value by value.
	bb.Reserve(int(count))
	reserveData(bb, int(offs[count]-offs[0]))
	for k := range count {
		bb.UnsafeAppend(v.data[offs[k]:offs[k+1]])
	}
	return true, nil
}

// emit appends rows [first, first+count) of the page to b.
func (pg *page21) emit(b array.Builder, dt arrow.DataType, first, count uint64) error {
	li := pg.levels
	if first > pg.rows || count > pg.rows-first {
		return errf("rows [%d, %d) of a page holding %d", first, first+count, pg.rows)
	}
	defAt := func(i uint64) uint16 {
		if pg.def == nil {
			if pg.allNull {
				return 1
			}
			return 0
		}
		return pg.def[i]
	}
	valAt := func(vi uint64) uint64 {
		if pg.constant {
			return 0
		}
		return vi
	}
	if !li.list {
		reserve(b, pg, first, count)
		if ok, err := emitStrings(b, pg, first, count); ok || err != nil {
			return err
		}
		vi := first
		for i := first; i < first+count; i++ {
			if defAt(i) != 0 || pg.allNull {
				b.AppendNull()
			} else if err := appendValue(b, dt, pg.vals, valAt(vi)); err != nil {
				return err
			}
			vi++
		}
		return nil
	}
	lb, ok := b.(array.ListLikeBuilder)
	if !ok {
		return errf("list levels for a %s field", dt)
	}
	elem := dt.(arrow.ListLikeType).Elem()
	vb := lb.ValueBuilder()
	// Find the level where row `first` starts, counting the visible items before it.
	lev, row, vi := uint64(0), uint64(0), uint64(0)
	for ; lev < uint64(len(pg.rep)); lev++ {
		if pg.rep[lev] == 1 {
			if row == first {
				break
			}
			row++
		}
		if defAt(lev) <= li.itemLevels {
			vi++
		}
	}
	for k := uint64(0); k < count; k++ {
		d := defAt(lev)
		switch {
		case pg.allNull && d == 0:
			return errf("all-null page with a valid item")
		case li.nullList != 0 && d == li.nullList:
			lb.AppendNull()
			lev++
			continue
		case li.emptyList != 0 && d == li.emptyList:
			lb.Append(true)
			lev++
			continue
		}
		lb.Append(true)
		for {
			d := defAt(lev)
			if d <= li.itemLevels {
				if d != 0 || pg.allNull {
					vb.AppendNull()
				} else if err := appendValue(vb, elem, pg.vals, valAt(vi)); err != nil {
					return err
				}
				vi++
			}
			lev++
			if lev >= uint64(len(pg.rep)) || pg.rep[lev] == 1 {
				break
			}
		}
	}
	return nil
}

// appendValue appends value i of v to b, as the Arrow type dt wants it.
func appendValue(b array.Builder, dt arrow.DataType, v *vals21, i uint64) error {
	if i >= v.n {
		return errf("value %d of %d", i, v.n)
	}
	if v.variable {
		s := v.data[v.offs[i]:v.offs[i+1]]
		switch bb := b.(type) {
		case *array.StringBuilder:
			if !utf8.Valid(s) {
				return errf("value %d is not UTF-8", i)
			}
			bb.BinaryBuilder.Append(s)
		case *array.LargeStringBuilder:
			if !utf8.Valid(s) {
				return errf("value %d is not UTF-8", i)
			}
			bb.BinaryBuilder.Append(s)
		case *array.BinaryBuilder:
			bb.Append(s)
		default:
			return errf("variable-width values for a %s field", dt)
		}
		return nil
	}
	raw := v.fixed[i*v.w : (i+1)*v.w]
	if fb, ok := b.(*array.FixedSizeListBuilder); ok {
		ft := dt.(*arrow.FixedSizeListType)
		if v.dim != uint64(ft.Len()) {
			return errf("fixed size list of %d items for a %s field", v.dim, dt)
		}
		fb.Append(true)
		vb := fb.ValueBuilder()
		iw := v.w / v.dim
		if f32, ok := vb.(*array.Float32Builder); ok && iw == 4 && v.itemValid == nil {
			// A vector without null items (the usual one): its floats in one append, not one
			// type switch and one append each, where the file's floats can be read in place.
			if vals, ok := viewLE[float32](raw); ok {
				f32.AppendValues(vals, nil)
				return nil
			}
		}
		for k := uint64(0); k < v.dim; k++ {
			item := i*v.dim + k
			if v.itemValid != nil && v.itemValid[item/8]&(1<<(item%8)) == 0 {
				vb.AppendNull()
				continue
			}
			if err := appendFixed(vb, ft.Elem(), raw[k*iw:(k+1)*iw]); err != nil {
				return err
			}
		}
		return nil
	}
	if v.dim != 0 {
		return errf("fixed size list values for a %s field", dt)
	}
	return appendFixed(b, dt, raw)
}

func appendFixed(b array.Builder, dt arrow.DataType, raw []byte) error {
	want := 0
	if fw, ok := dt.(arrow.FixedWidthDataType); ok {
		want = fw.BitWidth() / 8
	}
	if dt.ID() == arrow.BOOL {
		want = 1
	}
	if want == 0 || len(raw) != want {
		return errf("%d-byte values for a %s field", len(raw), dt)
	}
	le := binary.LittleEndian
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		bb.Append(raw[0] != 0)
	case *array.Int8Builder:
		bb.Append(int8(raw[0]))
	case *array.Uint8Builder:
		bb.Append(raw[0])
	case *array.Int16Builder:
		bb.Append(int16(le.Uint16(raw)))
	case *array.Uint16Builder:
		bb.Append(le.Uint16(raw))
	case *array.Int32Builder:
		bb.Append(int32(le.Uint32(raw)))
	case *array.Uint32Builder:
		bb.Append(le.Uint32(raw))
	case *array.Int64Builder:
		bb.Append(int64(le.Uint64(raw)))
	case *array.Uint64Builder:
		bb.Append(le.Uint64(raw))
	case *array.Float32Builder:
		bb.Append(math.Float32frombits(le.Uint32(raw)))
	case *array.Float64Builder:
		bb.Append(math.Float64frombits(le.Uint64(raw)))
	case *array.Date32Builder:
		bb.Append(arrow.Date32(int32(le.Uint32(raw))))
	case *array.Date64Builder:
		bb.Append(arrow.Date64(int64(le.Uint64(raw))))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(int64(le.Uint64(raw))))
	default:
		return errf("fixed-width values for a %s field are not supported", dt)
	}
	return nil
}
