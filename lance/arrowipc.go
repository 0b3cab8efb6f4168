package lance

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// This file reads the one Arrow IPC file shape Lance uses for deletion vectors: a single
// non-nullable UInt32 column, in one or more record batches, optionally with ZSTD-compressed
// buffers (what the official engine writes). It is written by hand, with every flatbuffer
// offset and vector length checked against the bytes present, because a general IPC reader
// allocates from lengths it reads out of the file before checking them.

var errIPC = errors.New("arrow deletion file")

func ipcErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errIPC, fmt.Sprintf(format, args...))
}

// fb is a bounds-checked view of one flatbuffer table.
type fb struct {
	buf []byte
	pos int // table start
	vt  int // vtable start
	vtn int // vtable size in bytes
}

func u32(b []byte, off int) (uint32, bool) {
	if off < 0 || off+4 > len(b) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[off:]), true
}

func u16(b []byte, off int) (uint16, bool) {
	if off < 0 || off+2 > len(b) {
		return 0, false
	}
	return binary.LittleEndian.Uint16(b[off:]), true
}

func table(buf []byte, pos int) (fb, error) {
	so, ok := u32(buf, pos)
	if !ok {
		return fb{}, ipcErr("table at %d is outside the buffer", pos)
	}
	vt := pos - int(int32(so))
	n, ok := u16(buf, vt)
	if !ok || n < 4 || vt+int(n) > len(buf) {
		return fb{}, ipcErr("vtable of table at %d is malformed", pos)
	}
	return fb{buf: buf, pos: pos, vt: vt, vtn: int(n)}, nil
}

func root(buf []byte) (fb, error) {
	off, ok := u32(buf, 0)
	if !ok {
		return fb{}, ipcErr("empty flatbuffer")
	}
	return table(buf, int(off))
}

// field returns the absolute offset of field i, or -1 when absent.
func (t fb) field(i int) int {
	slot := 4 + 2*i
	if slot+2 > t.vtn {
		return -1
	}
	o, _ := u16(t.buf, t.vt+slot)
	if o == 0 {
		return -1
	}
	return t.pos + int(o)
}

func (t fb) int64At(i int) (int64, error) {
	at := t.field(i)
	if at < 0 {
		return 0, nil
	}
	if at+8 > len(t.buf) {
		return 0, ipcErr("field %d runs past the buffer", i)
	}
	return int64(binary.LittleEndian.Uint64(t.buf[at:])), nil
}

func (t fb) byteAt(i int) (byte, error) {
	at := t.field(i)
	if at < 0 {
		return 0, nil
	}
	if at >= len(t.buf) {
		return 0, ipcErr("field %d runs past the buffer", i)
	}
	return t.buf[at], nil
}

// ref follows an offset field to a table.
func (t fb) ref(i int) (fb, bool, error) {
	at := t.field(i)
	if at < 0 {
		return fb{}, false, nil
	}
	off, ok := u32(t.buf, at)
	if !ok {
		return fb{}, false, ipcErr("field %d runs past the buffer", i)
	}
	sub, err := table(t.buf, at+int(off))
	return sub, err == nil, err
}

// vector follows an offset field to a vector of elem-byte elements: (start, count).
func (t fb) vector(i, elem int) (int, int, error) {
	at := t.field(i)
	if at < 0 {
		return 0, 0, nil
	}
	off, ok := u32(t.buf, at)
	if !ok {
		return 0, 0, ipcErr("field %d runs past the buffer", i)
	}
	start := at + int(off)
	n, ok := u32(t.buf, start)
	if !ok || uint64(n)*uint64(elem) > uint64(len(t.buf)-start-4) {
		return 0, 0, ipcErr("vector field %d claims %d elements beyond the buffer", i, n)
	}
	return start + 4, int(n), nil
}

// decodeDeletionArrow returns the row offsets stored in an Arrow IPC deletion file.
func decodeDeletionArrow(data []byte) ([]uint32, error) {
	const magic = "ARROW1"
	if len(data) < 2*len(magic)+4 || string(data[:6]) != magic || string(data[len(data)-6:]) != magic {
		return nil, ipcErr("not an Arrow IPC file (bad magic)")
	}
	flen, _ := u32(data, len(data)-10)
	fstart := len(data) - 10 - int(flen)
	if int(flen) <= 0 || fstart < 8 {
		return nil, ipcErr("footer length %d does not fit", flen)
	}
	footer, err := root(data[fstart : len(data)-10])
	if err != nil {
		return nil, err
	}
	if err := checkDeletionSchema(footer); err != nil {
		return nil, err
	}
	// Footer: recordBatches (field 3) = vector of Block{offset i64, metaDataLength i32, pad, bodyLength i64}.
	bstart, nblocks, err := footer.vector(3, 24)
	if err != nil {
		return nil, err
	}
	var out []uint32
	for b := 0; b < nblocks; b++ {
		blk := footer.buf[bstart+24*b:]
		off := int64(binary.LittleEndian.Uint64(blk))
		metaLen := int64(int32(binary.LittleEndian.Uint32(blk[8:])))
		bodyLen := int64(binary.LittleEndian.Uint64(blk[16:]))
		if off < 8 || metaLen < 8 || !within(off, metaLen, int64(fstart)) || !within(off+metaLen, bodyLen, int64(fstart)) {
			return nil, ipcErr("record batch block %d points outside the file", b)
		}
		vals, err := decodeBatch(data[off:off+metaLen], data[off+metaLen:off+metaLen+bodyLen])
		if err != nil {
			return nil, fmt.Errorf("record batch %d: %w", b, err)
		}
		out = append(out, vals...)
	}
	return out, nil
}

// checkDeletionSchema requires exactly one field, a non-nullable 32-bit unsigned integer.
func checkDeletionSchema(footer fb) error {
	schema, ok, err := footer.ref(1)
	if err != nil || !ok {
		return ipcErr("footer has no schema")
	}
	fstart, nfields, err := schema.vector(1, 4)
	if err != nil {
		return err
	}
	if nfields != 1 {
		return ipcErr("deletion file schema has %d fields, want one row_id: uint32", nfields)
	}
	off, _ := u32(schema.buf, fstart)
	field, err := table(schema.buf, fstart+int(off))
	if err != nil {
		return err
	}
	nullable, err := field.byteAt(1)
	if err != nil {
		return err
	}
	typeType, err := field.byteAt(2)
	if err != nil {
		return err
	}
	const typeInt = 2
	if typeType != typeInt || nullable != 0 {
		return ipcErr("deletion file column must be a non-nullable integer (type %d, nullable %d)", typeType, nullable)
	}
	intType, ok, err := field.ref(3)
	if err != nil || !ok {
		return ipcErr("deletion file column has no integer type")
	}
	var bits int32 // Int{bitWidth: int32, is_signed: bool}
	if at := intType.field(0); at >= 0 {
		v, ok := u32(intType.buf, at)
		if !ok {
			return ipcErr("integer width runs past the buffer")
		}
		bits = int32(v)
	}
	signed, err := intType.byteAt(1)
	if err != nil {
		return err
	}
	if bits != 32 || signed != 0 {
		return ipcErr("deletion file column is int%d signed=%d, want uint32", bits, signed)
	}
	return nil
}

// within says [off, off+n) lies in [0, size), without the overflow of adding two lengths a
// file claims (a block at offset 2^62 of length 2^62 summed to a negative end).
func within(off, n, size int64) bool {
	return off >= 0 && n >= 0 && off <= size && n <= size-off
}

// decodeBatch reads one encapsulated RecordBatch message and its body.
func decodeBatch(meta, body []byte) ([]uint32, error) {
	// Encapsulation: 0xFFFFFFFF continuation, int32 flatbuffer length, flatbuffer.
	if c, _ := u32(meta, 0); c == 0xFFFFFFFF {
		meta = meta[4:]
	}
	n, ok := u32(meta, 0)
	if !ok || int(n)+4 > len(meta) {
		return nil, ipcErr("message length %d does not fit", n)
	}
	msg, err := root(meta[4 : 4+n])
	if err != nil {
		return nil, err
	}
	const headerRecordBatch = 3
	if ht, err := msg.byteAt(1); err != nil || ht != headerRecordBatch {
		return nil, ipcErr("message is not a record batch")
	}
	rb, ok, err := msg.ref(2)
	if err != nil || !ok {
		return nil, ipcErr("record batch header missing")
	}
	length, err := rb.int64At(0)
	if err != nil || length < 0 || length > 1<<32 {
		return nil, ipcErr("record batch length %d is out of range", length)
	}
	nstart, nnodes, err := rb.vector(1, 16)
	if err != nil {
		return nil, err
	}
	if nnodes != 1 {
		return nil, ipcErr("record batch has %d field nodes, want 1", nnodes)
	}
	if nulls := int64(binary.LittleEndian.Uint64(rb.buf[nstart+8:])); nulls != 0 {
		return nil, ipcErr("deletion file has %d nulls", nulls)
	}
	bstart, nbufs, err := rb.vector(2, 16)
	if err != nil {
		return nil, err
	}
	if nbufs != 2 {
		return nil, ipcErr("record batch has %d buffers, want 2", nbufs)
	}
	boff := int64(binary.LittleEndian.Uint64(rb.buf[bstart+16:]))
	blen := int64(binary.LittleEndian.Uint64(rb.buf[bstart+24:]))
	if !within(boff, blen, int64(len(body))) {
		return nil, ipcErr("values buffer [%d, +%d) is outside the body of %d bytes", boff, blen, len(body))
	}
	raw := body[boff : boff+blen]
	if comp, ok, err := rb.ref(3); err != nil {
		return nil, err
	} else if ok {
		codec, err := comp.byteAt(0)
		if err != nil {
			return nil, err
		}
		if raw, err = decompressBuffer(codec, raw, length*4); err != nil {
			return nil, err
		}
	}
	if int64(len(raw)) < length*4 {
		return nil, ipcErr("values buffer holds %d bytes, %d rows need %d", len(raw), length, length*4)
	}
	out := make([]uint32, length)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	return out, nil
}

// decompressBuffer undoes Arrow IPC buffer compression: an int64 uncompressed length (-1: the
// bytes follow uncompressed), then the compressed bytes.
func decompressBuffer(codec byte, raw []byte, want int64) ([]byte, error) {
	if len(raw) == 0 {
		return raw, nil
	}
	if len(raw) < 8 {
		return nil, ipcErr("compressed buffer shorter than its length prefix")
	}
	size := int64(binary.LittleEndian.Uint64(raw))
	if size == -1 {
		return raw[8:], nil
	}
	const codecZSTD = 1
	if codec != codecZSTD {
		return nil, ipcErr("buffer compression codec %d is not supported", codec)
	}
	if size != want {
		return nil, ipcErr("compressed buffer says %d bytes, the batch needs %d", size, want)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(want)+1<<10))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	out, err := dec.DecodeAll(raw[8:], make([]byte, 0, size))
	if err != nil {
		return nil, ipcErr("zstd: %v", err)
	}
	if int64(len(out)) != size {
		return nil, ipcErr("zstd buffer decompressed to %d bytes, want %d", len(out), size)
	}
	return out, nil
}
