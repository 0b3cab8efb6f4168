package file

import (
	"bytes"
	"encoding/binary"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// vals21 is a run of decoded values: fixed-width (w bytes each; booleans one byte each) or
// variable-width (offs has n+1 entries into data). itemValid, for fixed size lists whose items
// can be null, is a bitmap of n*dim bits.
type vals21 struct {
	n         uint64
	w         uint64
	bool      bool
	fixed     []byte
	variable  bool
	offs      []uint64
	data      []byte
	dim       uint64
	itemValid []byte
	// hintItems and hintBytes, set before the first appendVals, size the buffers it makes.
	hintItems, hintBytes uint64
}

// maxChunkValues bounds the values of one mini-block chunk: the chunk metadata stores their log2
// in 4 bits and lance writes at most 4096.
const maxChunkValues = 1 << 15

// appendVals appends the values of another chunk of the same page (so of the same kind: every
// chunk is decoded by the same compression).
func (v *vals21) appendVals(o *vals21) {
	if v.n == 0 && v.fixed == nil && v.offs == nil {
		items, bytes := v.hintItems, v.hintBytes
		*v = vals21{w: o.w, bool: o.bool, variable: o.variable, dim: o.dim}
		if v.variable {
			v.offs = make([]uint64, 1, max(items, o.n)+1)
			v.data = make([]byte, 0, max(bytes, uint64(len(o.data))))
		} else if o.w > 0 && items <= maxSizeHint/o.w {
			v.fixed = make([]byte, 0, max(items*o.w, uint64(len(o.fixed))))
		}
	}
	if v.variable {
		base := v.offs[len(v.offs)-1] - o.offs[0]
		for _, x := range o.offs[1:] {
			v.offs = append(v.offs, x+base)
		}
		v.data = append(v.data, o.data[o.offs[0]:o.offs[o.n]]...)
	} else {
		if o.itemValid != nil || v.itemValid != nil {
			nv := make([]byte, ((v.n+o.n)*v.dim+7)/8)
			copyBits(nv, 0, v.itemValid, 0, v.n*v.dim, true)
			copyBits(nv, v.n*v.dim, o.itemValid, 0, o.n*o.dim, true)
			v.itemValid = nv
		}
		v.fixed = append(v.fixed, o.fixed[:o.n*o.w]...)
	}
	v.n += o.n
}

// copyBits copies n bits from src at si to dst at di; a nil src stands for all set when ones.
func copyBits(dst []byte, di uint64, src []byte, si, n uint64, ones bool) {
	for i := uint64(0); i < n; i++ {
		set := ones
		if src != nil {
			set = src[(si+i)/8]&(1<<((si+i)%8)) != 0
		}
		if set {
			dst[(di+i)/8] |= 1 << ((di + i) % 8)
		}
	}
}

// decodeMini decodes one mini-block chunk's value buffers holding n values.
func decodeMini(c *ce21, bufs [][]byte, n uint64) (*vals21, error) {
	switch c.kind {
	case ceFlat:
		if len(bufs) != 1 {
			return nil, errf("flat values in %d chunk buffers, want 1", len(bufs))
		}
		return decodeFlat(c, bufs[0], n)
	case ceInlineBP:
		if len(bufs) != 1 {
			return nil, errf("bitpacked values in %d chunk buffers, want 1", len(bufs))
		}
		b, err := decompressBuffer(c.scheme, bufs[0])
		if err != nil {
			return nil, err
		}
		return decodeInlineBP(c.bits, b, n)
	case ceVariable:
		if len(bufs) != 1 {
			return nil, errf("variable values in %d chunk buffers, want 1", len(bufs))
		}
		return decodeMiniVariable(c, bufs[0], n)
	case ceFsst:
		v, err := decodeMini(c.a, bufs, n)
		if err != nil {
			return nil, err
		}
		return fsstDecode(c.symtab, v)
	case ceRle:
		if len(bufs) != 2 {
			return nil, errf("rle values in %d chunk buffers, want 2", len(bufs))
		}
		return decodeRle(c, bufs[0], bufs[1], n)
	case ceFixedSizeList:
		return decodeMiniFSL(c, bufs, n)
	case ceGeneral:
		if len(bufs) == 0 {
			return nil, errf("compressed values without a buffer")
		}
		b, err := decompressBuffer(c.scheme, bufs[0])
		if err != nil {
			return nil, err
		}
		inner := append([][]byte{b}, bufs[1:]...)
		return decodeMini(c.a, inner, n)
	case ceByteStream:
		if len(bufs) != 1 {
			return nil, errf("byte stream split values in %d chunk buffers, want 1", len(bufs))
		}
		return decodeByteStreamSplit(c, bufs[0], n)
	}
	return nil, errf("%s compression of mini-block values is not supported", c.name())
}

// decodeBlock decodes a whole buffer holding n values (levels, dictionaries).
func decodeBlock(c *ce21, b []byte, n uint64) (*vals21, error) {
	switch c.kind {
	case ceFlat:
		return decodeFlat(c, b, n)
	case ceInlineBP:
		return decodeInlineBP(c.bits, b, n)
	case ceOutOfLineBP:
		return decodeOutOfLineBP(c, b, n)
	case ceVariable:
		return decodeBlockVariable(b, n)
	case ceRle:
		if len(b) < 8 {
			return nil, errf("rle block of %d bytes has no length prefix", len(b))
		}
		vl := binary.LittleEndian.Uint64(b)
		if vl > uint64(len(b)-8) {
			return nil, errf("rle block says %d value bytes, %d remain", vl, len(b)-8)
		}
		return decodeRle(c, b[8:8+vl], b[8+vl:], n)
	case ceFixedSizeList:
		return decodeMiniFSL(c, [][]byte{b}, n)
	case ceGeneral:
		d, err := decompressBuffer(c.scheme, b)
		if err != nil {
			return nil, err
		}
		return decodeBlock(c.a, d, n)
	case ceConstant:
		return decodeConstantBlock(c.value, n)
	}
	return nil, errf("%s compression of a block is not supported", c.name())
}

func fixedWidth(bits uint64) (uint64, bool, error) {
	switch bits {
	case 1:
		return 1, true, nil
	case 8, 16, 32, 64, 128, 256:
		return bits / 8, false, nil
	}
	if bits%8 == 0 && bits > 0 && bits <= 1<<20 {
		return bits / 8, false, nil
	}
	return 0, false, errf("%d bits per value is not supported", bits)
}

func decodeFlat(c *ce21, b []byte, n uint64) (*vals21, error) {
	b, err := decompressBuffer(c.scheme, b)
	if err != nil {
		return nil, err
	}
	w, isBool, err := fixedWidth(c.bits)
	if err != nil {
		return nil, err
	}
	if isBool {
		if uint64(len(b)) < (n+7)/8 {
			return nil, errf("%d boolean values need %d bytes, the buffer has %d", n, (n+7)/8, len(b))
		}
		out := make([]byte, n)
		for i := range out {
			out[i] = (b[i/8] >> (i % 8)) & 1
		}
		return &vals21{n: n, w: 1, bool: true, fixed: out}, nil
	}
	need, ok := mulU64(n, w)
	if !ok || uint64(len(b)) < need {
		return nil, errf("%d values of %d bytes do not fit the %d-byte buffer", n, w, len(b))
	}
	return &vals21{n: n, w: w, fixed: b[:need]}, nil
}

// decodeInlineBP decodes chunks of [bit width word][packed block], 1024 values each.
func decodeInlineBP(t uint64, b []byte, n uint64) (*vals21, error) {
	if t != 8 && t != 16 && t != 32 && t != 64 {
		return nil, errf("bitpacking of %d-bit values is not supported", t)
	}
	wb := t / 8
	blocks := (n + flBlock - 1) / flBlock
	if blocks > uint64(len(b))/wb { // every block has at least its width word
		return nil, errf("%d bitpacked values need %d blocks, the %d-byte buffer cannot hold them", n, blocks, len(b))
	}
	out := make([]byte, n*wb)
	tmp := make([]uint64, flBlock)
	pos := uint64(0)
	for k := uint64(0); k < blocks; k++ {
		if uint64(len(b))-pos < wb {
			return nil, errf("bitpacked block %d is cut short", k)
		}
		w := wordAt(b[pos:], t, 0)
		if w > t {
			return nil, errf("bitpacked block %d claims %d bits per %d-bit value", k, w, t)
		}
		pos += wb
		size := flWords(t, w) * wb
		if uint64(len(b))-pos < size {
			return nil, errf("bitpacked block %d needs %d bytes, %d remain", k, size, uint64(len(b))-pos)
		}
		unpackFL(t, w, b[pos:pos+size], tmp)
		pos += size
		for i := uint64(0); i < flBlock && k*flBlock+i < n; i++ {
			putWord(out, t, k*flBlock+i, tmp[i])
		}
	}
	return &vals21{n: n, w: wb, fixed: out}, nil
}

// decodeOutOfLineBP: whole blocks of 1024 values packed at the inner flat's width, then a tail
// that is either packed as a whole block or stored raw (lance keeps whichever is smaller).
func decodeOutOfLineBP(c *ce21, b []byte, n uint64) (*vals21, error) {
	t := c.bits
	if t != 8 && t != 16 && t != 32 && t != 64 {
		return nil, errf("bitpacking of %d-bit values is not supported", t)
	}
	if c.a.kind != ceFlat || c.a.bits > t {
		return nil, errf("out-of-line bitpacking with %s values of %d bits", c.a.name(), c.a.bits)
	}
	w, wb := c.a.bits, t/8
	words := uint64(len(b)) / wb
	whole, tail := n/flBlock, n%flBlock
	per := flWords(t, w)
	need := whole * per
	if n/flBlock > words || need > words {
		return nil, errf("%d bitpacked values do not fit %d words", n, words)
	}
	raw := tail > 0 && words == need+tail
	if tail > 0 && !raw && words < need+per {
		return nil, errf("%d bitpacked values do not fit %d words", n, words)
	}
	out := make([]byte, n*wb)
	tmp := make([]uint64, flBlock)
	for k := uint64(0); k < whole; k++ {
		unpackFL(t, w, b[k*per*wb:], tmp)
		for i := uint64(0); i < flBlock; i++ {
			putWord(out, t, k*flBlock+i, tmp[i])
		}
	}
	if tail > 0 {
		at := need * wb
		if raw {
			copy(out[whole*flBlock*wb:], b[at:at+tail*wb])
		} else {
			unpackFL(t, w, b[at:], tmp)
			for i := uint64(0); i < tail; i++ {
				putWord(out, t, whole*flBlock+i, tmp[i])
			}
		}
	}
	return &vals21{n: n, w: wb, fixed: out}, nil
}

// decodeMiniVariable: the chunk holds n+1 offsets (relative to the chunk buffer) then the bytes.
func decodeMiniVariable(c *ce21, b []byte, n uint64) (*vals21, error) {
	if c.a.kind != ceFlat || (c.a.bits != 32 && c.a.bits != 64) {
		return nil, errf("variable offsets as %s of %d bits are not supported", c.a.name(), c.a.bits)
	}
	b, err := decompressBuffer(c.scheme, b)
	if err != nil {
		return nil, err
	}
	ow := c.a.bits / 8
	if n >= uint64(len(b))/ow {
		return nil, errf("%d offsets do not fit the %d-byte chunk", n+1, len(b))
	}
	offs := make([]uint64, n+1)
	for i := range offs {
		offs[i] = wordAt(b, c.a.bits, uint64(i))
		if offs[i] > uint64(len(b)) || (i > 0 && offs[i] < offs[i-1]) {
			return nil, errf("offset %d (%d) is out of order or past the %d-byte chunk", i, offs[i], len(b))
		}
	}
	return &vals21{n: n, variable: true, offs: offs, data: b}, nil
}

// decodeBlockVariable: u32 (or u64) bits per offset, the start of the bytes, offsets, bytes.
func decodeBlockVariable(b []byte, n uint64) (*vals21, error) {
	if len(b) < 8 {
		return nil, errf("variable block of %d bytes has no header", len(b))
	}
	bits := uint64(binary.LittleEndian.Uint32(b))
	var start, hdr uint64
	switch bits {
	case 32:
		start, hdr = uint64(binary.LittleEndian.Uint32(b[4:])), 8
	case 64:
		if len(b) < 16 {
			return nil, errf("variable block of %d bytes has no header", len(b))
		}
		start, hdr = binary.LittleEndian.Uint64(b[8:]), 16
	default:
		return nil, errf("variable block with %d-bit offsets", bits)
	}
	ow := bits / 8
	if start < hdr || start > uint64(len(b)) || (start-hdr)/ow < n+1 {
		return nil, errf("variable block: %d offsets do not fit before byte %d of %d", n+1, start, len(b))
	}
	data := b[start:]
	offs := make([]uint64, n+1)
	for i := range offs {
		offs[i] = wordAt(b[hdr:], bits, uint64(i))
		if offs[i] > uint64(len(data)) || (i > 0 && offs[i] < offs[i-1]) {
			return nil, errf("offset %d (%d) is out of order or past the %d bytes", i, offs[i], len(data))
		}
	}
	return &vals21{n: n, variable: true, offs: offs, data: data}, nil
}

func decodeRle(c *ce21, values, runs []byte, n uint64) (*vals21, error) {
	if c.a.kind != ceFlat || c.b.kind != ceFlat || c.b.bits != 8 {
		return nil, errf("rle of %s values and %s run lengths is not supported", c.a.name(), c.b.name())
	}
	w, isBool, err := fixedWidth(c.a.bits)
	if err != nil || isBool || w > 8 {
		return nil, errf("rle of %d-bit values is not supported", c.a.bits)
	}
	if uint64(len(values)) != uint64(len(runs))*w {
		return nil, errf("rle has %d value bytes for %d runs of %d-byte values", len(values), len(runs), w)
	}
	total := uint64(0)
	for _, r := range runs {
		total += uint64(r)
	}
	if total < n {
		return nil, errf("rle runs cover %d values, %d needed", total, n)
	}
	out := make([]byte, 0, n*w)
	for i, r := range runs {
		for k := 0; k < int(r) && uint64(len(out)) < n*w; k++ {
			out = append(out, values[uint64(i)*w:uint64(i+1)*w]...)
		}
	}
	return &vals21{n: n, w: w, fixed: out}, nil
}

// decodeMiniFSL: optional item validity bitmap buffer, then the flat items.
func decodeMiniFSL(c *ce21, bufs [][]byte, n uint64) (*vals21, error) {
	dim := c.bits
	if dim == 0 || dim > 1<<20 {
		return nil, errf("fixed size list of %d items", dim)
	}
	if c.a.kind != ceFlat {
		return nil, errf("fixed size list of %s items is not supported", c.a.name())
	}
	want := 1
	if c.valid {
		want = 2
	}
	if len(bufs) != want {
		return nil, errf("fixed size list in %d buffers, want %d", len(bufs), want)
	}
	items := n * dim // n is bounded by a chunk or a page's bytes and dim by 2^20: no overflow
	v, err := decodeFlat(c.a, bufs[want-1], items)
	if err != nil {
		return nil, err
	}
	if v.bool {
		return nil, errf("fixed size lists of booleans are not supported")
	}
	out := &vals21{n: n, w: v.w * dim, fixed: v.fixed, dim: dim}
	if c.valid {
		if uint64(len(bufs[0])) < (items+7)/8 {
			return nil, errf("item validity of %d bytes for %d items", len(bufs[0]), items)
		}
		out.itemValid = bufs[0][:(items+7)/8]
	}
	return out, nil
}

func decodeByteStreamSplit(c *ce21, b []byte, n uint64) (*vals21, error) {
	if c.a.kind != ceFlat {
		return nil, errf("byte stream split of %s values", c.a.name())
	}
	w, isBool, err := fixedWidth(c.a.bits)
	if err != nil || isBool {
		return nil, errf("byte stream split of %d-bit values", c.a.bits)
	}
	need, ok := mulU64(n, w)
	if !ok || uint64(len(b)) < need {
		return nil, errf("byte stream split: %d values of %d bytes in %d bytes", n, w, len(b))
	}
	out := make([]byte, need)
	for i := uint64(0); i < n; i++ {
		for k := uint64(0); k < w; k++ {
			out[i*w+k] = b[k*n+i]
		}
	}
	return &vals21{n: n, w: w, fixed: out}, nil
}

func decodeConstantBlock(value []byte, n uint64) (*vals21, error) {
	if len(value) == 0 || len(value) > 32 {
		return nil, errf("constant of %d bytes", len(value))
	}
	if n > maxChunkValues {
		return nil, errf("%d constant values in one block", n)
	}
	out := make([]byte, 0, n*uint64(len(value)))
	for i := uint64(0); i < n; i++ {
		out = append(out, value...)
	}
	return &vals21{n: n, w: uint64(len(value)), fixed: out}, nil
}

// maxDecoded21 bounds the bytes one page may decode to (dictionaries and RLE expand): a
// hostile page must not become an allocation out of proportion to the file. (A variable so that
// the fuzz tests can lower it.)
var maxDecoded21 uint64 = 1 << 30

// maxSizeHint bounds the capacity a reader allocates ahead of the values it decodes (64 MiB):
// a page larger than that still decodes, growing as it goes.
const maxSizeHint = 64 << 20

// maxDecompressed bounds what one compressed buffer may expand to: zstd and lz4 state their
// output size, and a hostile size must not become an allocation.
var maxDecompressed uint64 = 1 << 30

// decompressBuffer undoes a BufferCompression: lz4 blocks carry a u32 uncompressed size; zstd
// buffers carry a u64 size before the frame (older writers: the bare frame).
func decompressBuffer(scheme int, b []byte) ([]byte, error) {
	switch scheme {
	case schemeNone:
		return b, nil
	case schemeLZ4:
		if len(b) < 4 {
			return nil, errf("lz4 buffer of %d bytes", len(b))
		}
		size := uint64(binary.LittleEndian.Uint32(b))
		if size > maxDecompressed || size > 255*uint64(len(b))+64 {
			return nil, errf("lz4 buffer claims %d bytes from %d", size, len(b))
		}
		out := make([]byte, size)
		m, err := lz4.UncompressBlock(b[4:], out)
		if err != nil || uint64(m) != size {
			return nil, errf("lz4 buffer does not decompress to its %d bytes", size)
		}
		return out, nil
	case schemeZstd:
		if len(b) == 0 {
			return b, nil
		}
		frame := b
		limit := maxDecompressed
		if len(b) >= 8 && !(binary.LittleEndian.Uint32(b) == 0xFD2FB528 && b[4]&0x10 == 0) {
			size := binary.LittleEndian.Uint64(b)
			if size > maxDecompressed {
				return nil, errf("zstd buffer claims %d bytes", size)
			}
			frame, limit = b[8:], size
		}
		d, err := zstd.NewReader(bytes.NewReader(frame), zstd.WithDecoderMaxMemory(max(limit+1, 1<<20)), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, errf("zstd: %v", err)
		}
		defer d.Close()
		out, err := io.ReadAll(io.LimitReader(d, int64(limit)+1))
		if err != nil {
			return nil, errf("zstd buffer does not decompress: %v", err)
		}
		if uint64(len(out)) > limit || (limit != maxDecompressed && uint64(len(out)) != limit) {
			return nil, errf("zstd buffer decompresses to %d bytes, want %d", len(out), limit)
		}
		return out, nil
	}
	return nil, errf("buffer compression %d is not supported", scheme)
}

// fsstDecode expands FSST-compressed strings: a code byte c < 255 stands for symbol c, 255
// escapes the next byte. The symbol table is an 8-byte header (symbol count in the low byte,
// bit 24 set when the data is compressed at all), 256 8-byte symbols, 256 lengths.
func fsstDecode(symtab []byte, v *vals21) (*vals21, error) {
	if !v.variable {
		return nil, errf("fsst over fixed-width values")
	}
	const tableSize = 8 + 256*8 + 256
	if len(symtab) != tableSize {
		return nil, errf("fsst symbol table of %d bytes, want %d", len(symtab), tableSize)
	}
	info := binary.LittleEndian.Uint64(symtab)
	if info>>32 != 0x46535354 {
		return nil, errf("fsst symbol table without its magic")
	}
	if info&(1<<24) == 0 {
		return v, nil
	}
	nsym := int(info & 255)
	lens := symtab[8+8*nsym:] // the lengths follow the nsym symbols
	out := &vals21{n: v.n, variable: true, offs: make([]uint64, v.n+1)}
	data := make([]byte, 0, 3*(v.offs[v.n]-v.offs[0]))
	for i := uint64(0); i < v.n; i++ {
		in := v.data[v.offs[i]:v.offs[i+1]]
		for k := 0; k < len(in); k++ {
			c := in[k]
			if c == 255 {
				if k+1 >= len(in) {
					return nil, errf("fsst escape at the end of value %d", i)
				}
				k++
				data = append(data, in[k])
				continue
			}
			if int(c) >= nsym || lens[c] == 0 || lens[c] > 8 {
				return nil, errf("fsst code %d is not in the %d-symbol table", c, nsym)
			}
			data = append(data, symtab[8+8*int(c):8+8*int(c)+int(lens[c])]...)
		}
		out.offs[i+1] = uint64(len(data))
	}
	out.data = data
	return out, nil
}
