package file

import (
	"encoding/binary"
	"math"
	mbits "math/bits"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/endian"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Page decoders. Each decodes rows [first, first+count) of one page (which holds total rows)
// into an output at position at. Every buffer is checked against what the page's row count
// requires before it is touched, so a lying length fails here rather than slicing out of range.

// page is one fetched page: its buffers in page order and its row count.
type page struct {
	bufs [][]byte
	rows uint64
}

func (pg *page) buffer(i uint32, need uint64) ([]byte, error) {
	if int(i) >= len(pg.bufs) {
		return nil, errf("encoding names buffer %d of a page with %d buffers", i, len(pg.bufs))
	}
	b := pg.bufs[i]
	if uint64(len(b)) < need {
		return nil, errf("buffer %d holds %d bytes, the page's %d rows need %d", i, len(b), pg.rows, need)
	}
	return b, nil
}

// bitmap returns the validity bitmap of a some_nulls encoding covering total values.
func (pg *page) bitmap(n *encNode, total uint64) ([]byte, error) {
	if n.kind != nodeFlat || n.bits != 1 {
		return nil, errf("validity is not a flat bitmap")
	}
	return pg.buffer(n.buffer, (total+7)/8)
}

// uints returns the buffer of a plain unsigned integer array (flat, possibly wrapped in
// nullable.no_nulls, as lance writes string indices, list offsets and dictionary indices) and its
// width in bytes.
func (pg *page) uints(n *encNode, total uint64) ([]byte, int, error) {
	if n.kind == nodeNullable && n.mode == noNulls {
		n = n.b
	}
	if n.kind != nodeFlat || (n.bits != 8 && n.bits != 16 && n.bits != 32 && n.bits != 64) {
		return nil, 0, errf("offsets or indices are not plain integers")
	}
	w := int(n.bits / 8)
	need, ok := mulU64(total, uint64(w))
	if !ok {
		return nil, 0, errf("page of %d rows is too large", total)
	}
	b, err := pg.buffer(n.buffer, need)
	return b, w, err
}

func uintAt(b []byte, w int, i uint64) uint64 {
	switch w {
	case 8:
		return binary.LittleEndian.Uint64(b[8*i:])
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return uint64(b[i])
}

func mulU64(a, b uint64) (uint64, bool) {
	hi, lo := mbits.Mul64(a, b)
	return lo, hi == 0
}

// ---- fixed width ----

// fixedOut receives fixed-width values: a row validity bitmap, and for fixed size lists an item
// validity bitmap; values hold dim values of bits each per row.
type fixedOut struct {
	bits, dim        uint64 // dim 0: not a list
	valid, itemValid []byte
	nulls, itemNulls int
	values           []byte
}

// decodeFixed decodes a nullable / fixed_size_list / flat encoding. items says the node applies
// to the items of a fixed size list (all counts are then in items).
func decodeFixed(n *encNode, pg *page, first, count, total, at uint64, out *fixedOut, items bool) error {
	valid, nulls := out.valid, &out.nulls
	if items {
		valid, nulls = out.itemValid, &out.itemNulls
	}
	switch n.kind {
	case nodeNullable:
		switch n.mode {
		case noNulls:
			return decodeFixed(n.b, pg, first, count, total, at, out, items)
		case someNulls:
			bm, err := pg.bitmap(n.a, total)
			if err != nil {
				return err
			}
			bitutil.CopyBitmap(bm, int(first), int(count), valid, int(at))
			*nulls += int(count) - bitutil.CountSetBits(valid, int(at), int(count))
			return decodeFixed(n.b, pg, first, count, total, at, out, items)
		default:
			bitutil.SetBitsTo(valid, int64(at), int64(count), false)
			*nulls += int(count)
			if out.dim > 0 && !items { // the items of null rows are null too
				bitutil.SetBitsTo(out.itemValid, int64(at*out.dim), int64(count*out.dim), false)
				out.itemNulls += int(count * out.dim)
				at, count = at*out.dim, count*out.dim
			}
			out.zero(at, count)
			return nil
		}
	case nodeFSL:
		if items || out.dim == 0 {
			return errf("fixed_size_list encoding for a column that is not a fixed size list")
		}
		if n.dim != out.dim {
			return errf("fixed_size_list of dimension %d, the schema says %d", n.dim, out.dim)
		}
		d := out.dim
		// items without a nullable wrapper are all valid
		bitutil.SetBitsTo(out.itemValid, int64(at*d), int64(count*d), true)
		return decodeFixed(n.a, pg, first*d, count*d, total*d, at*d, out, true)
	case nodeFlat:
		if out.dim > 0 && !items {
			return errf("flat values for a fixed size list column without a fixed_size_list encoding")
		}
		if n.bits != out.bits {
			return errf("values of %d bits, the schema's type has %d", n.bits, out.bits)
		}
		need, ok := mulU64(total, n.bits)
		if !ok {
			return errf("page of %d values is too large", total)
		}
		src, err := pg.buffer(n.buffer, (need+7)/8)
		if err != nil {
			return err
		}
		if n.bits == 1 {
			bitutil.CopyBitmap(src, int(first), int(count), out.values, int(at))
		} else {
			w := n.bits / 8
			copy(out.values[at*w:(at+count)*w], src[first*w:(first+count)*w])
		}
		return nil
	}
	return errf("%s encoding for a fixed-width column", n.kind)
}

// zero clears count leaf values from at (the values of null slots are unspecified in Arrow,
// but leaving allocator garbage there would make output depend on memory reuse).
func (o *fixedOut) zero(at, count uint64) {
	if o.bits == 1 {
		bitutil.SetBitsTo(o.values, int64(at), int64(count), false)
		return
	}
	w := o.bits / 8
	clear(o.values[at*w : (at+count)*w])
}

// ---- strings and binaries ----

// binaryOut receives variable-width values: Arrow offsets (32 or 64 bit), bytes and validity.
type binaryOut struct {
	large   bool
	utf8    bool   // Utf8 / LargeUtf8: the bytes must be valid UTF-8, string by string
	offsets []byte // n+1 entries
	data    *memory.Buffer
	valid   []byte
	nulls   int
}

func (o *binaryOut) setOffset(i, v uint64) {
	if o.large {
		binary.LittleEndian.PutUint64(o.offsets[8*i:], v)
	} else {
		binary.LittleEndian.PutUint32(o.offsets[4*i:], uint32(v))
	}
}

func (o *binaryOut) offsetAt(i uint64) uint64 {
	if o.large {
		return binary.LittleEndian.Uint64(o.offsets[8*i:])
	}
	return uint64(binary.LittleEndian.Uint32(o.offsets[4*i:]))
}

// reserve checks that n more bytes fit the offset width and grows the data buffer for them.
func (o *binaryOut) reserve(n uint64) error {
	have := uint64(o.data.Len())
	limit := uint64(math.MaxInt32)
	if o.large {
		limit = math.MaxInt64
	}
	if n > limit-have {
		return errf("%d bytes of strings overflow the column's Arrow offsets", have+n)
	}
	if need := int(have + n); need > o.data.Cap() {
		o.data.Reserve(max(need, 2*o.data.Cap()))
	}
	return nil
}

func (o *binaryOut) append(b []byte) {
	l := o.data.Len()
	o.data.ResizeNoShrink(l + len(b))
	copy(o.data.Bytes()[l:], b)
}

// decodeBinary decodes a Binary or Dictionary page, possibly wrapped in a Nullable.
func decodeBinary(n *encNode, pg *page, first, count, total, at uint64, out *binaryOut) error {
	switch n.kind {
	case nodeBinary:
		return decodeBinaryPage(n, pg, first, count, total, at, out)
	case nodeDict:
		return decodeDictPage(n, pg, first, count, total, at, out)
	case nodeNullable:
		switch n.mode {
		case noNulls:
			return decodeBinary(n.b, pg, first, count, total, at, out)
		case allNulls:
			end := out.offsetAt(at)
			for i := uint64(1); i <= count; i++ {
				out.setOffset(at+i, end)
			}
			bitutil.SetBitsTo(out.valid, int64(at), int64(count), false)
			out.nulls += int(count)
			return nil
		}
		bm, err := pg.bitmap(n.a, total)
		if err != nil {
			return err
		}
		if err := decodeBinary(n.b, pg, first, count, total, at, out); err != nil {
			return err
		}
		for i := uint64(0); i < count; i++ {
			if !bitutil.BitIsSet(bm, int(first+i)) && bitutil.BitIsSet(out.valid, int(at+i)) {
				bitutil.ClearBit(out.valid, int(at+i))
				out.nulls++
			}
		}
		return nil
	}
	return errf("%s encoding for a string or binary column", n.kind)
}

// decodeBinaryPage: indices are end offsets from the page start; an entry >= null_adjustment A
// is a null whose end is entry - A. Row i's bytes start at the previous row's end.
func decodeBinaryPage(n *encNode, pg *page, first, count, total, at uint64, out *binaryOut) error {
	idx, w, err := pg.uints(n.a, total)
	if err != nil {
		return err
	}
	if w != 8 {
		return errf("string indices of %d bits, want 64", 8*w)
	}
	data, err := flatBytes(n.b, pg)
	if err != nil {
		return err
	}
	adj := n.nullAdj
	if adj == 0 {
		return errf("binary encoding with null_adjustment 0")
	}
	base := uint64(0)
	if first > 0 {
		base = binary.LittleEndian.Uint64(idx[8*(first-1):])
		if base >= adj {
			base -= adj
		}
	}
	outBase := out.offsetAt(at)
	var prev uint64
	if prev, err = binaryEnds(idx, first, count, at, adj, base, outBase, out); err != nil {
		return err
	}
	if prev > uint64(len(data)) {
		return errf("strings end at byte %d, the bytes buffer holds %d", prev, len(data))
	}
	if err := out.reserve(prev - base); err != nil {
		return err
	}
	if out.utf8 {
		if err := checkUTF8(data[base:prev], out, at, count, outBase); err != nil {
			return err
		}
	}
	out.append(data[base:prev])
	return nil
}

// checkUTF8 checks that the strings of rows [at, at+count), which are piece split at their Arrow
// offsets (relative to outBase), are each valid UTF-8: the whole is valid and no string starts
// inside a multi-byte sequence.
func checkUTF8(piece []byte, out *binaryOut, at, count, outBase uint64) error {
	if !utf8.Valid(piece) {
		return errf("string bytes are not valid UTF-8")
	}
	for i := at + 1; i < at+count; i++ {
		if p := out.offsetAt(i) - outBase; p < uint64(len(piece)) && !utf8.RuneStart(piece[p]) {
			return errf("string at row %d is not valid UTF-8", i)
		}
	}
	return nil
}

// binaryEnds turns the indices of rows [first, first+count) into Arrow offsets at out[at+1...],
// marking nulls; it returns the last end. The typed loops are the hot path of string reads.
func binaryEnds(idx []byte, first, count, at, adj, base, outBase uint64, out *binaryOut) (uint64, error) {
	prev := base
	in, ok := viewLE[uint64](idx)
	if !ok {
		for i := uint64(0); i < count; i++ {
			end := binary.LittleEndian.Uint64(idx[8*(first+i):])
			if end >= adj {
				end -= adj
				bitutil.ClearBit(out.valid, int(at+i))
				out.nulls++
			}
			if end < prev {
				return 0, errf("string end offsets decrease at row %d", first+i)
			}
			prev = end
			out.setOffset(at+i+1, outBase+end-base)
		}
		return prev, nil
	}
	in = in[first : first+count]
	shift := outBase - base
	if out.large {
		dst := arrow.Int64Traits.CastFromBytes(out.offsets)[at+1 : at+1+count]
		for i, end := range in {
			if end >= adj {
				end -= adj
				bitutil.ClearBit(out.valid, int(at)+i)
				out.nulls++
			}
			if end < prev {
				return 0, errf("string end offsets decrease at row %d", first+uint64(i))
			}
			prev = end
			dst[i] = int64(end + shift)
		}
		return prev, nil
	}
	dst := arrow.Int32Traits.CastFromBytes(out.offsets)[at+1 : at+1+count]
	for i, end := range in {
		if end >= adj {
			end -= adj
			bitutil.ClearBit(out.valid, int(at)+i)
			out.nulls++
		}
		if end < prev {
			return 0, errf("string end offsets decrease at row %d", first+uint64(i))
		}
		prev = end
		dst[i] = int32(end + shift) // range checked by the caller's reserve
	}
	return prev, nil
}

// viewLE views b as little-endian values of T without copying, when the host and the
// alignment allow it (unaligned views would trip checkptr).
func viewLE[T uint64 | float32](b []byte) ([]T, bool) {
	size := int(unsafe.Sizeof(T(0)))
	if endian.IsBigEndian || len(b) < size || uintptr(unsafe.Pointer(&b[0]))%uintptr(size) != 0 {
		return nil, false
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/size), true
}

// flatBytes returns the whole buffer of a flat 8-bit encoding (the bytes of a Binary).
func flatBytes(n *encNode, pg *page) ([]byte, error) {
	if n.kind == nodeNullable && n.mode == noNulls {
		n = n.b
	}
	if n.kind != nodeFlat || n.bits != 8 {
		return nil, errf("binary bytes are not a flat byte buffer")
	}
	return pg.buffer(n.buffer, 0)
}

// decodeDictPage: indices are 1-based into the dictionary items (a Binary of
// num_dictionary_items values); index 0 is a null (lance's dictionary.rs).
func decodeDictPage(n *encNode, pg *page, first, count, total, at uint64, out *binaryOut) error {
	idx, w, err := pg.uints(n.a, total)
	if err != nil {
		return err
	}
	if n.b.kind != nodeBinary {
		return errf("dictionary items are not a binary encoding")
	}
	ends, valid, data, err := binaryItems(n.b, pg, n.numItems)
	if err != nil {
		return err
	}
	if out.utf8 {
		for k := range valid {
			if valid[k] && !utf8.Valid(data[ends[k]:ends[k+1]]) {
				return errf("dictionary item %d is not valid UTF-8", k)
			}
		}
	}
	// First pass: validate and size; second: copy.
	size := uint64(0)
	for i := uint64(0); i < count; i++ {
		k := uintAt(idx, w, first+i)
		if k > n.numItems {
			return errf("dictionary index %d at row %d, the dictionary has %d items", k, first+i, n.numItems)
		}
		if k > 0 && valid[k-1] {
			size += ends[k] - ends[k-1]
		}
	}
	if err := out.reserve(size); err != nil {
		return err
	}
	end := out.offsetAt(at)
	for i := uint64(0); i < count; i++ {
		if k := uintAt(idx, w, first+i); k > 0 && valid[k-1] {
			out.append(data[ends[k-1]:ends[k]])
			end += ends[k] - ends[k-1]
		} else {
			bitutil.ClearBit(out.valid, int(at+i))
			out.nulls++
		}
		out.setOffset(at+i+1, end)
	}
	return nil
}

// binaryItems decodes a whole small Binary (the dictionary items): item i is
// data[ends[i]:ends[i+1]] when valid[i].
func binaryItems(n *encNode, pg *page, count uint64) (ends []uint64, valid []bool, data []byte, err error) {
	idx, w, err := pg.uints(n.a, count) // checks count against the buffer before allocating
	if err != nil {
		return nil, nil, nil, err
	}
	if w != 8 {
		return nil, nil, nil, errf("dictionary item indices of %d bits, want 64", 8*w)
	}
	if data, err = flatBytes(n.b, pg); err != nil {
		return nil, nil, nil, err
	}
	if n.nullAdj == 0 {
		return nil, nil, nil, errf("binary encoding with null_adjustment 0")
	}
	ends, valid = make([]uint64, count+1), make([]bool, count)
	for i := uint64(0); i < count; i++ {
		e := binary.LittleEndian.Uint64(idx[8*i:])
		valid[i] = e < n.nullAdj
		if !valid[i] {
			e -= n.nullAdj
		}
		if e < ends[i] || e > uint64(len(data)) {
			return nil, nil, nil, errf("dictionary item %d ends at %d (previous %d, %d bytes)", i, e, ends[i], len(data))
		}
		ends[i+1] = e
	}
	return ends, valid, data, nil
}

// ---- lists ----

// decodeListPage decodes list rows [first, first+count) of an offsets page into out (whose
// data is unused). Entries are end item indices relative to the page's first item; an entry
// >= null_offset_adjustment A is a null list, its end being entry % A (lance's list.rs). It
// returns the page-relative item range [lo, hi) the rows span.
func decodeListPage(n *encNode, pg *page, first, count, total, at uint64, out *binaryOut) (lo, hi uint64, err error) {
	if n.kind != nodeList {
		return 0, 0, errf("%s encoding for a list column", n.kind)
	}
	idx, w, err := pg.uints(n.a, total)
	if err != nil {
		return 0, 0, err
	}
	if w != 8 {
		return 0, 0, errf("list offsets of %d bits, want 64", 8*w)
	}
	adj := n.nullAdj
	if adj == 0 {
		return 0, 0, errf("list encoding with null_offset_adjustment 0")
	}
	if first > 0 {
		lo = binary.LittleEndian.Uint64(idx[8*(first-1):]) % adj
	}
	outBase := out.offsetAt(at)
	hi = lo
	for i := uint64(0); i < count; i++ {
		v := binary.LittleEndian.Uint64(idx[8*(first+i):])
		if v >= adj {
			bitutil.ClearBit(out.valid, int(at+i))
			out.nulls++
		}
		end := v % adj
		if end < hi || end > n.numItems {
			return 0, 0, errf("list end offset %d at row %d (previous %d, page has %d items)", end, first+i, hi, n.numItems)
		}
		hi = end
		out.setOffset(at+i+1, outBase+end-lo)
	}
	return lo, hi, nil
}

func (k nodeKind) String() string {
	switch k {
	case nodeFlat:
		return "flat"
	case nodeNullable:
		return "nullable"
	case nodeFSL:
		return "fixed_size_list"
	case nodeList:
		return "list"
	case nodeStruct:
		return "struct"
	case nodeBinary:
		return "binary"
	case nodeDict:
		return "dictionary"
	}
	return "unknown"
}
