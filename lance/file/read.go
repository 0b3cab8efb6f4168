package file

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// maxDecodeValues bounds the values one Read decodes for one column. Pages of all nulls carry no
// buffer their length could be checked against; this keeps a lying length from turning into an
// absurd allocation. (A variable so that the fuzz tests can lower it.)
var maxDecodeValues uint64 = maxPageRows

type readState struct {
	ctx    context.Context
	mem    memory.Allocator
	column func(fieldID int32) (int, bool)
}

// Read decodes rows [offset, offset+length) of the given top-level fields into a record. The
// fields come from the caller's schema (a dataset's manifest, which is authoritative) and column
// maps a field id to its column in this file (the manifest DataFile's fields / column_indices;
// in 2.0 files every field, list and struct parents included, has a column). A field without a
// column reads as all nulls, Lance's rule for columns added after the file was written. A nil
// column uses the file's own schema (columns in pre-order). mem nil means the default allocator.
//
// Only the pages overlapping the range are fetched. Fixed-width columns without nulls whose
// range lies in one page are returned without copying: the arrays share the Source's bytes.
func (r *Reader) Read(ctx context.Context, fields []*schema.Field, column func(fieldID int32) (int, bool),
	offset, length int64, mem memory.Allocator) (arrow.Record, error) {
	if offset < 0 || length < 0 || offset > r.numRows || length > r.numRows-offset {
		return nil, fmt.Errorf("lance file %s: rows [%d, %d) outside the file's %d rows", r.name, offset, offset+length, r.numRows)
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if column == nil {
		column = r.fileColumn()
	}
	st := &readState{ctx: ctx, mem: mem, column: column}
	afs := make([]arrow.Field, len(fields))
	cols := make([]arrow.Array, 0, len(fields))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for i, f := range fields {
		af, err := f.ToArrow()
		if err != nil {
			return nil, fmt.Errorf("lance file %s: field %q: %w", r.name, f.Name, err)
		}
		afs[i] = af
		arr, err := r.readField(st, f, af.Type, uint64(offset), uint64(length), true)
		if err != nil {
			return nil, err
		}
		cols = append(cols, arr)
	}
	return array.NewRecord(arrow.NewSchema(afs, nil), cols, length), nil
}

// columnOf is the file column of field id (named name, for errors): ok false when the file has
// none, which reads as all nulls; an error when the map points outside the file.
func (r *Reader) columnOf(st *readState, name string, id int32) (int, bool, error) {
	idx, ok := st.column(id)
	if !ok {
		return 0, false, nil
	}
	if idx < 0 || idx >= len(r.cols) {
		return 0, false, r.fail(-1, "field %q (id %d) maps to column %d, the file has %d columns", name, id, idx, len(r.cols))
	}
	return idx, true, nil
}

// fileColumn maps field ids to columns by the file's own schema.
func (r *Reader) fileColumn() func(int32) (int, bool) {
	idx := map[int32]int{}
	i := 0
	for _, f := range r.schema.Flatten() {
		// In 2.1+ files only leaves have columns (lance's ReaderProjection::from_whole_schema).
		if r.version != V2_0 && len(f.Children) > 0 {
			continue
		}
		idx[f.ID] = i
		i++
	}
	return func(id int32) (int, bool) { i, ok := idx[id]; return i, ok }
}

// readField decodes n values of field f from value start. top says f is a row-level column
// (top-level or a struct child), whose value count must be the file's row count.
func (r *Reader) readField(st *readState, f *schema.Field, dt arrow.DataType, start, n uint64, top bool) (arrow.Array, error) {
	lay, err := layoutOf(dt)
	if err != nil {
		return nil, fmt.Errorf("lance file %s: field %q: %w", r.name, f.Name, err)
	}
	values := n * uint64(max(lay.dim, 1)) // cannot overflow: n <= 2^32 and dim < 2^31 once n is checked
	if _, ok := mulU64(values, uint64(max(lay.bits, 8))); n > maxDecodeValues || values > maxDecodeValues || !ok {
		return nil, r.fail(-1, "field %q: %d values to decode, more than the limit of %d", f.Name, values, maxDecodeValues)
	}
	if lay.kind == kindStruct { // the header column holds no data in 2.0
		return r.readStruct(st, f, dt.(*arrow.StructType), start, n, top)
	}
	if r.version != V2_0 {
		return r.readField21(st, f, dt, start, n)
	}
	idx, ok, err := r.columnOf(st, f.Name, f.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return array.MakeArrayOfNull(st.mem, dt, int(n)), nil
	}
	col := &r.cols[idx]
	if top && col.rows != uint64(r.numRows) {
		return nil, r.fail(col.metaPos, "column %d (field %q) has %d rows, the file has %d", idx, f.Name, col.rows, r.numRows)
	}
	if start+n > col.rows {
		return nil, r.fail(col.metaPos, "column %d (field %q) has %d values, [%d, %d) needed", idx, f.Name, col.rows, start, start+n)
	}
	switch lay.kind {
	case kindFixed:
		return r.readFixed(st, idx, lay, dt, start, n)
	case kindBinary:
		return r.readBinary(st, idx, lay, dt, start, n)
	default:
		return r.readList(st, f, idx, lay, dt, start, n)
	}
}

// forPages calls fn for each page of column idx overlapping values [start, start+n), with the
// page's parsed encoding and buffers, the range inside the page and the output position.
func (r *Reader) forPages(st *readState, idx int, start, n uint64,
	fn func(pi int, enc *encNode, pg *page, first, count, at uint64) error) error {
	col := &r.cols[idx]
	pages := col.pages
	i := sort.Search(len(pages), func(i int) bool { return pages[i].rowStart+pages[i].rows > start })
	for at := uint64(0); at < n; i++ {
		p := &pages[i]
		first := start + at - p.rowStart
		count := min(p.rows-first, n-at)
		if count == 0 {
			continue
		}
		enc, err := parseEncoding(p.encoding, 0)
		if err == nil {
			var pg *page
			if pg, err = r.fetchPage(st.ctx, p); err != nil {
				return err // I/O, not format
			}
			err = fn(i, enc, pg, first, count, at)
		}
		if err != nil {
			return asFormatError(err, r.name, col.metaPos, fmt.Sprintf("column %d page %d: ", idx, i))
		}
		at += count
	}
	return nil
}

// newBuffer allocates n bytes from mem.
func newBuffer(mem memory.Allocator, n uint64) *memory.Buffer {
	b := memory.NewResizableBuffer(mem)
	b.Resize(int(n))
	return b
}

// validityBuffer returns b as the validity buffer of an array with nulls, else releases it.
func validityBuffer(b *memory.Buffer, nulls int) *memory.Buffer {
	if nulls > 0 {
		return b
	}
	b.Release()
	return nil
}

func makeArray(dt arrow.DataType, n uint64, bufs []*memory.Buffer, kids []arrow.ArrayData, nulls int) arrow.Array {
	d := array.NewData(dt, int(n), bufs, kids, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	defer d.Release()
	return array.MakeFromData(d)
}

func (r *Reader) readFixed(st *readState, idx int, lay layout, dt arrow.DataType, start, n uint64) (arrow.Array, error) {
	if arr := r.readFixedDirect(st, idx, lay, dt, start, n); arr != nil {
		return arr, nil
	}
	dim := uint64(max(lay.dim, 1))
	items := n * dim
	out := &fixedOut{bits: uint64(lay.bits), dim: uint64(lay.dim)}
	validBuf := newBuffer(st.mem, (n+7)/8)
	valuesBuf := newBuffer(st.mem, (items*out.bits+7)/8)
	var itemValidBuf *memory.Buffer
	out.valid, out.values = validBuf.Bytes(), valuesBuf.Bytes()
	if lay.dim > 0 {
		itemValidBuf = newBuffer(st.mem, (items+7)/8)
		out.itemValid = itemValidBuf.Bytes()
	}
	err := r.forPages(st, idx, start, n, func(_ int, enc *encNode, pg *page, first, count, at uint64) error {
		bitutil.SetBitsTo(out.valid, int64(at), int64(count), true)
		return decodeFixed(enc, pg, first, count, pg.rows, at, out, false)
	})
	if err != nil {
		for _, b := range []*memory.Buffer{validBuf, valuesBuf, itemValidBuf} {
			if b != nil {
				b.Release()
			}
		}
		return nil, err
	}
	validBuf = validityBuffer(validBuf, out.nulls)
	if lay.dim == 0 {
		return makeArray(dt, n, []*memory.Buffer{validBuf, valuesBuf}, nil, out.nulls), nil
	}
	elem := dt.(*arrow.FixedSizeListType).Elem()
	child := array.NewData(elem, int(items), []*memory.Buffer{validityBuffer(itemValidBuf, out.itemNulls), valuesBuf}, nil, out.itemNulls, 0)
	if b := child.Buffers()[0]; b != nil {
		b.Release()
	}
	valuesBuf.Release()
	defer child.Release()
	return makeArray(dt, n, []*memory.Buffer{validBuf}, []arrow.ArrayData{child}, out.nulls), nil
}

// readFixedDirect returns the values without copying when [start, start+n) lies in one page whose
// encoding has no nulls (nullable.no_nulls, possibly around a fixed_size_list of no_nulls, around
// flat) and whole bytes per value; otherwise nil, and the copying decoder takes over (it also
// reports whatever is wrong with the page).
func (r *Reader) readFixedDirect(st *readState, idx int, lay layout, dt arrow.DataType, start, n uint64) arrow.Array {
	col := &r.cols[idx]
	if lay.bits%8 != 0 || n == 0 {
		return nil
	}
	i := sort.Search(len(col.pages), func(i int) bool { return col.pages[i].rowStart+col.pages[i].rows > start })
	if i == len(col.pages) || col.pages[i].rowStart+col.pages[i].rows < start+n {
		return nil
	}
	p := &col.pages[i]
	enc, err := parseEncoding(p.encoding, 0)
	if err != nil {
		return nil
	}
	unwrap := func(e *encNode) *encNode {
		if e.kind == nodeNullable && e.mode == noNulls {
			return e.b
		}
		return e
	}
	enc = unwrap(enc)
	dim := uint64(1)
	if lay.dim > 0 {
		if enc.kind != nodeFSL || enc.dim != uint64(lay.dim) {
			return nil
		}
		enc, dim = unwrap(enc.a), enc.dim
	}
	if enc.kind != nodeFlat || enc.bits != uint64(lay.bits) {
		return nil
	}
	w := uint64(lay.bits/8) * dim
	size, ok := mulU64(p.rows, w)
	if !ok {
		return nil
	}
	pg, err := r.fetchPage(st.ctx, p)
	if err != nil {
		return nil
	}
	buf, err := pg.buffer(enc.buffer, size)
	if err != nil {
		return nil
	}
	first := start - p.rowStart
	values := memory.NewBufferBytes(buf[first*w : (first+n)*w])
	if lay.dim == 0 {
		return makeArray(dt, n, []*memory.Buffer{nil, values}, nil, 0)
	}
	elem := dt.(*arrow.FixedSizeListType).Elem()
	child := array.NewData(elem, int(n*dim), []*memory.Buffer{nil, values}, nil, 0, 0)
	values.Release()
	defer child.Release()
	return makeArray(dt, n, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0)
}

func (r *Reader) readBinary(st *readState, idx int, lay layout, dt arrow.DataType, start, n uint64) (arrow.Array, error) {
	out, offsetsBuf, validBuf := newOffsetsOut(st.mem, lay.large, n)
	out.data = memory.NewResizableBuffer(st.mem)
	out.utf8 = dt.ID() == arrow.STRING || dt.ID() == arrow.LARGE_STRING
	err := r.forPages(st, idx, start, n, func(_ int, enc *encNode, pg *page, first, count, at uint64) error {
		bitutil.SetBitsTo(out.valid, int64(at), int64(count), true)
		return decodeBinary(enc, pg, first, count, pg.rows, at, out)
	})
	if err != nil {
		offsetsBuf.Release()
		validBuf.Release()
		out.data.Release()
		return nil, err
	}
	return makeArray(dt, n, []*memory.Buffer{validityBuffer(validBuf, out.nulls), offsetsBuf, out.data}, nil, out.nulls), nil
}

// newOffsetsOut allocates Arrow offsets (n+1, the first 0) and validity for n rows.
func newOffsetsOut(mem memory.Allocator, large bool, n uint64) (*binaryOut, *memory.Buffer, *memory.Buffer) {
	w := uint64(4)
	if large {
		w = 8
	}
	offsetsBuf, validBuf := newBuffer(mem, (n+1)*w), newBuffer(mem, (n+7)/8)
	out := &binaryOut{large: large, offsets: offsetsBuf.Bytes(), valid: validBuf.Bytes()}
	out.setOffset(0, 0)
	return out, offsetsBuf, validBuf
}

func (r *Reader) readList(st *readState, f *schema.Field, idx int, lay layout, dt arrow.DataType, start, n uint64) (arrow.Array, error) {
	out, offsetsBuf, validBuf := newOffsetsOut(st.mem, lay.large, n)
	release := func() { offsetsBuf.Release(); validBuf.Release() }
	pages := r.cols[idx].pages
	// Items of page i start after the items of every earlier page (lance's list.rs); they must
	// be contiguous across the pages read so that one item range serves all rows.
	var itemLo, itemHi, pageBase, pageItems uint64
	prev := -1
	err := r.forPages(st, idx, start, n, func(i int, enc *encNode, pg *page, first, count, at uint64) error {
		from, base := 0, uint64(0)
		if prev >= 0 {
			from, base = prev, pageBase
		}
		for j := from; j < i; j++ {
			k := pageItems
			if j != prev {
				var err error
				if k, err = listPageItems(pages[j].encoding); err != nil {
					return err
				}
			}
			if base+k < base {
				return errf("list item counts overflow")
			}
			base += k
		}
		if prev >= 0 && itemHi != base {
			return errf("list offsets of page %d end at item %d, its successor's items start at %d", prev, itemHi, base)
		}
		bitutil.SetBitsTo(out.valid, int64(at), int64(count), true)
		lo, hi, err := decodeListPage(enc, pg, first, count, pg.rows, at, out)
		if err != nil {
			return err
		}
		if prev < 0 {
			itemLo = base + lo
		}
		if base+hi < base {
			return errf("list item counts overflow")
		}
		itemHi, pageBase, pageItems, prev = base+hi, base, enc.numItems, i
		return nil
	})
	if err != nil {
		release()
		return nil, err
	}
	if !lay.large && itemHi-itemLo > math.MaxInt32 {
		release()
		return nil, r.fail(r.cols[idx].metaPos, "list column %d: %d items overflow 32-bit list offsets", idx, itemHi-itemLo)
	}
	elemType := dt.(arrow.ListLikeType).Elem()
	child, err := r.readField(st, f.Children[0], elemType, itemLo, itemHi-itemLo, false)
	if err != nil {
		release()
		return nil, err
	}
	defer child.Release()
	return makeArray(dt, n, []*memory.Buffer{validityBuffer(validBuf, out.nulls), offsetsBuf}, []arrow.ArrayData{child.Data()}, out.nulls), nil
}

// listPageItems is the num_items of a list page's encoding.
func listPageItems(encoding []byte) (uint64, error) {
	enc, err := parseEncoding(encoding, 0)
	if err != nil {
		return 0, err
	}
	if enc.kind != nodeList {
		return 0, errf("%s encoding for a list column", enc.kind)
	}
	return enc.numItems, nil
}

func (r *Reader) readStruct(st *readState, f *schema.Field, dt *arrow.StructType, start, n uint64, top bool) (arrow.Array, error) {
	kids := make([]arrow.ArrayData, 0, len(f.Children))
	defer func() {
		for _, k := range kids {
			k.Release()
		}
	}()
	for i, kf := range f.Children {
		arr, err := r.readField(st, kf, dt.Field(i).Type, start, n, top)
		if err != nil {
			return nil, err
		}
		d := arr.Data()
		d.Retain()
		arr.Release()
		kids = append(kids, d)
	}
	return makeArray(dt, n, []*memory.Buffer{nil}, kids, 0), nil
}
