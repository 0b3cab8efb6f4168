package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/pierrec/lz4/v4"
)

// Builders of encodings_v2_1 messages for hand-made pages.

type pbf = func(*pb.Encoder)

func ce(kind int, body pbf) pbf {
	return func(e *pb.Encoder) { e.Message(pb.Number(kind), body) }
}
func flatCE(bits uint64) pbf { return ce(ceFlat, func(e *pb.Encoder) { e.Uint(1, bits) }) }
func varCE(bits uint64) pbf {
	return ce(ceVariable, func(e *pb.Encoder) { e.Message(1, flatCE(bits)) })
}
func msg(f pbf) []byte { var e pb.Encoder; f(&e); return e.B }

func miniLayout(value pbf, extra func(*pb.Encoder), layers ...uint64) []byte {
	return msg(func(e *pb.Encoder) {
		e.Message(layoutMiniBlock, func(m *pb.Encoder) {
			m.Message(3, value)
			m.PackedUints(6, layers)
			m.Uint(7, 1)
			if extra != nil {
				extra(m)
			}
		})
	})
}

// chunk21 builds a 2.1 mini-block chunk (u16 sizes) and its metadata word.
func chunk21(nlev uint16, rep, def []byte, vals ...[]byte) ([]byte, uint16) {
	c := binary.LittleEndian.AppendUint16(nil, nlev)
	for _, b := range [][]byte{rep, def} {
		if b != nil {
			c = binary.LittleEndian.AppendUint16(c, uint16(len(b)))
		}
	}
	for _, v := range vals {
		c = binary.LittleEndian.AppendUint16(c, uint16(len(v)))
	}
	pad := func() {
		for len(c)%8 != 0 {
			c = append(c, 0xfe)
		}
	}
	pad()
	for _, b := range append([][]byte{rep, def}, vals...) {
		if b != nil {
			c = append(c, b...)
			pad()
		}
	}
	return c, uint16((len(c)/8 - 1) << 4)
}

func u16s(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func u32s(v ...uint32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}

func readPage21(t *testing.T, layout []byte, bufs [][]byte, rows uint64, dt arrow.DataType) (arrow.Array, error) {
	t.Helper()
	l, err := parseLayout21(layout)
	if err != nil {
		return nil, err
	}
	pg, err := decodePage21(l, bufs, rows)
	if err != nil {
		return nil, err
	}
	b := array.NewBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	if err := pg.emit(b, dt, 0, rows); err != nil {
		return nil, err
	}
	return b.NewArray(), nil
}

func TestMiniBlockHandMade(t *testing.T) {
	c, w := chunk21(0, nil, nil, u32s(7, 8, 9))
	arr, err := readPage21(t, miniLayout(flatCE(32), func(m *pb.Encoder) { m.Uint(9, 3) }, layerAllValidItem),
		[][]byte{u16s(w), c}, 3, arrow.PrimitiveTypes.Int32)
	if err != nil {
		t.Fatal(err)
	}
	defer arr.Release()
	if got := arr.(*array.Int32).Int32Values(); got[0] != 7 || got[2] != 9 {
		t.Fatalf("got %v", got)
	}
	// a list<int32> with a null list, an empty list and a null item: [[1, null], null, [], [4]]
	// levels: def 0 valid, 1 null item, 2 null list, 3 empty list
	rep := u16s(1, 0, 1, 1, 1)
	def := u16s(0, 1, 2, 3, 0)
	flat16 := func(e *pb.Encoder) { flatCE(16)(e) }
	c, w = chunk21(5, rep, def, u32s(1, 0, 4))
	lay := msg(func(e *pb.Encoder) {
		e.Message(layoutMiniBlock, func(m *pb.Encoder) {
			m.Message(1, flat16)
			m.Message(2, flat16)
			m.Message(3, flatCE(32))
			m.PackedUints(6, []uint64{layerNullableItem, layerNullEmptyList})
			m.Uint(7, 1)
			m.Uint(9, 3)
		})
	})
	arr, err = readPage21(t, lay, [][]byte{u16s(w), c}, 4, arrow.ListOf(arrow.PrimitiveTypes.Int32))
	if err != nil {
		t.Fatal(err)
	}
	defer arr.Release()
	if s := arr.String(); s != "[[1 (null)] (null) [] [4]]" {
		t.Fatalf("got %s", s)
	}
}

// Every structural check of the page decoders, each forced by a hand-made page.
func TestPage21Refusals(t *testing.T) {
	good, w := chunk21(0, nil, nil, u32s(7, 8, 9))
	items3 := func(m *pb.Encoder) { m.Uint(9, 3) }
	lay := miniLayout(flatCE(32), items3, layerAllValidItem)
	i32 := arrow.PrimitiveTypes.Int32
	cases := []struct {
		name   string
		layout []byte
		bufs   [][]byte
		rows   uint64
		dt     arrow.DataType
		want   string
	}{
		{"no layout", nil, nil, 1, i32, "names 0 layouts"},
		{"blob layout", msg(func(e *pb.Encoder) { e.Message(layoutBlob, func(*pb.Encoder) {}) }), nil, 1, i32, "blob"},
		{"three item layers", miniLayout(flatCE(32), items3, 1, 1, 1), [][]byte{u16s(w), good}, 3, i32, "rep/def layers"},
		{"list layer first", miniLayout(flatCE(32), items3, layerNullableList), [][]byte{u16s(w), good}, 3, i32, "item layer"},
		{"item layer second", miniLayout(flatCE(32), items3, 1, 1), [][]byte{u16s(w), good}, 3, i32, "list layer"},
		{"missing buffer", lay, [][]byte{u16s(w)}, 3, i32, "buffers, want 2"},
		{"odd metadata", lay, [][]byte{u16s(w)[:1], good}, 3, i32, "whole 2-byte words"},
		{"chunk past buffer", lay, [][]byte{u16s(w + 0x100), good}, 3, i32, "runs past"},
		{"item count", miniLayout(flatCE(32), func(m *pb.Encoder) { m.Uint(9, 1<<20) }, 1), [][]byte{u16s(w), good}, 3, i32, "last chunk holds"},
		{"rows", lay, [][]byte{u16s(w), good}, 4, i32, "3 items in a page of 4 rows"},
		{"value too short", miniLayout(flatCE(64), items3, 1), [][]byte{u16s(w), good}, 3, i32, "do not fit"},
		{"wrong arrow type", lay, [][]byte{u16s(w), good}, 3, arrow.PrimitiveTypes.Int64, "4-byte values"},
		{"list type for flat page", lay, [][]byte{u16s(w), good}, 3, arrow.ListOf(i32), "values for a list"},
		{"no value compression", msg(func(e *pb.Encoder) { e.Message(layoutMiniBlock, func(m *pb.Encoder) { m.PackedUints(6, []uint64{1}) }) }), nil, 1, i32, "without a value"},
		{"zero chunk buffers", msg(func(e *pb.Encoder) {
			e.Message(layoutMiniBlock, func(m *pb.Encoder) { m.Message(3, flatCE(32)); m.PackedUints(6, []uint64{1}) })
		}), [][]byte{u16s(w), good}, 3, i32, "chunks of 0 buffers"},
		{"chunk header cut", lay, [][]byte{u16s(0), []byte{0, 0, 12, 0, 0, 0, 0, 0}}, 3, i32, "runs past"},
		{"unknown compression", miniLayout(ce(cePackedStruct, func(*pb.Encoder) {}), items3, 1), [][]byte{u16s(w), good}, 3, i32, "not supported"},
		{"nullable without def", miniLayout(flatCE(32), items3, layerNullableItem), [][]byte{u16s(w), good}, 3, i32, "without definition levels"},
		{"full-zip buffers", msg(func(e *pb.Encoder) {
			e.Message(layoutFullZip, func(m *pb.Encoder) { m.Message(7, flatCE(32)); m.PackedUints(8, []uint64{1}) })
		}), nil, 1, i32, "full-zip page with 0"},
		{"full-zip items", fullZip(3, 32, 9, flatCE(32)), [][]byte{u32s(1, 2)}, 9, i32, "claims 9 items"},
		{"full-zip trailing bytes", fullZip(3, 32, 1, flatCE(32)), [][]byte{u32s(1, 2)}, 1, i32, "bytes after"},
		{"full-zip odd width", fullZip(3, 12, 1, flatCE(12)), [][]byte{u32s(1)}, 1, i32, "values of 12 bits"},
		{"full-zip length past end", fullZip(4, 32, 1, varCE(32)), [][]byte{u32s(100)}, 1, arrow.BinaryTypes.String, "past the end"},
		{"constant buffers", msg(func(e *pb.Encoder) {
			e.Message(layoutConstant, func(m *pb.Encoder) { m.PackedUints(5, []uint64{1}); m.BytesAlways(6, u32s(5)) })
		}), [][]byte{nil}, 1, i32, "constant layout with 1 buffers"},
		{"constant too wide", msg(func(e *pb.Encoder) {
			e.Message(layoutConstant, func(m *pb.Encoder) { m.PackedUints(5, []uint64{1}); m.BytesAlways(6, make([]byte, 33)) })
		}), nil, 1, i32, "constant of 33 bytes"},
		{"scalar buffer", msg(func(e *pb.Encoder) { e.Message(layoutConstant, func(m *pb.Encoder) { m.PackedUints(5, []uint64{1}) }) }),
			[][]byte{u32s(3, 1, 1, 1)}, 1, i32, "scalar of 3 buffers"},
		{"odd raw levels", msg(func(e *pb.Encoder) { e.Message(layoutConstant, func(m *pb.Encoder) { m.PackedUints(5, []uint64{3}) }) }),
			[][]byte{nil, []byte{1}}, 1, i32, "bytes of u16 levels"},
	}
	for _, c := range cases {
		_, err := readPage21(t, c.layout, c.bufs, c.rows, c.dt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
		var de *decodeError
		if err != nil && !asDecodeError(err, &de) && !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s: %T is not a decoding error", c.name, err)
		}
	}
}

func TestCompressions21(t *testing.T) {
	// FastLanes: pack 1024 values with the reference ordering and unpack them.
	for _, tw := range [][2]uint64{{8, 3}, {16, 9}, {32, 17}, {64, 33}, {64, 64}, {32, 0}} {
		tt, w := tw[0], tw[1]
		vals := make([]uint64, flBlock)
		for i := range vals {
			if w > 0 {
				vals[i] = (uint64(i) * 2654435761) & (1<<w - 1 | (^uint64(0) * (w / 64)))
			}
		}
		packed := make([]byte, flWords(tt, w)*tt/8)
		lanes := flBlock / tt
		for lane := uint64(0); lane < lanes; lane++ {
			for row := uint64(0); row < tt; row++ {
				v := vals[uint64(flOrder[row/8])*16+(row%8)*128+lane]
				for bit := uint64(0); bit < w; bit++ {
					if v>>bit&1 == 0 {
						continue
					}
					pos := row*w + bit
					word, sh := pos/tt, pos%tt
					at := (lanes*word + lane) * tt / 8
					packed[at+sh/8] |= 1 << (sh % 8)
				}
			}
		}
		got := make([]uint64, flBlock)
		unpackFL(tt, w, packed, got)
		for i := range vals {
			if got[i] != vals[i] {
				t.Fatalf("T=%d w=%d: value %d = %d, want %d", tt, w, i, got[i], vals[i])
			}
		}
	}
	src := bytes.Repeat([]byte("lance file 2.1 "), 100)
	lzb := make([]byte, lz4.CompressBlockBound(len(src)))
	n, err := lz4.CompressBlock(src, lzb, nil)
	if err != nil {
		t.Fatal(err)
	}
	lzBuf := append(u32s(uint32(len(src))), lzb[:n]...)
	if got, err := decompressBuffer(schemeLZ4, lzBuf); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("lz4: %v", err)
	}
	enc, _ := zstd.NewWriter(nil)
	frame := enc.EncodeAll(src, nil)
	prefixed := append(binary.LittleEndian.AppendUint64(nil, uint64(len(src))), frame...)
	for _, b := range [][]byte{frame, prefixed} {
		if got, err := decompressBuffer(schemeZstd, b); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("zstd: %v", err)
		}
	}
	bss, err := decodeByteStreamSplit(&ce21{kind: ceByteStream, a: &ce21{kind: ceFlat, bits: 16}}, []byte{1, 2, 3, 4}, 2)
	if err != nil || !bytes.Equal(bss.fixed, []byte{1, 3, 2, 4}) {
		t.Fatalf("byte stream split: %v %v", bss, err)
	}

	flat := func(bits uint64) *ce21 { return &ce21{kind: ceFlat, bits: bits} }
	st := make([]byte, 8+256*8+256)
	binary.LittleEndian.PutUint64(st, 0x46535354<<32|1<<24|1)
	copy(st[8:], "ab")
	st[16] = 2
	fsstIn := &vals21{n: 1, variable: true, offs: []uint64{0, 3}, data: []byte{0, 255, 'z'}}
	if v, err := fsstDecode(st, fsstIn); err != nil || string(v.data) != "abz" {
		t.Fatalf("fsst: %v %v", v, err)
	}
	refusals := []struct {
		name string
		err  error
	}{
		{"lz4 short", second(decompressBuffer(schemeLZ4, []byte{1}))},
		{"lz4 claims", second(decompressBuffer(schemeLZ4, u32s(1<<31)))},
		{"lz4 corrupt", second(decompressBuffer(schemeLZ4, append(u32s(100), 0xff, 0xff)))},
		{"zstd claims", second(decompressBuffer(schemeZstd, binary.LittleEndian.AppendUint64(nil, 1<<40)))},
		{"zstd corrupt", second(decompressBuffer(schemeZstd, append(binary.LittleEndian.AppendUint64(nil, 10), 1, 2, 3)))},
		{"zstd short", second(decompressBuffer(schemeZstd, append(binary.LittleEndian.AppendUint64(nil, uint64(len(src)+1)), frame...)))},
		{"scheme", second(decompressBuffer(7, nil))},
		{"inline width", second(decodeInlineBP(12, nil, 1))},
		{"inline blocks", second(decodeInlineBP(32, nil, 1))},
		{"inline bit width", second(decodeInlineBP(8, []byte{9}, 1))},
		{"inline cut", second(decodeInlineBP(8, []byte{8}, 1))},
		{"ool width", second(decodeOutOfLineBP(&ce21{bits: 12, a: flat(1)}, nil, 1))},
		{"ool inner", second(decodeOutOfLineBP(&ce21{bits: 16, a: flat(17)}, nil, 1))},
		{"ool short", second(decodeOutOfLineBP(&ce21{bits: 16, a: flat(2)}, u16s(1), 1025))},
		{"ool tail", second(decodeOutOfLineBP(&ce21{bits: 16, a: flat(2)}, u16s(1, 2), 3))},
		{"variable offsets", second(decodeMiniVariable(&ce21{a: flat(16)}, nil, 1))},
		{"variable short", second(decodeMiniVariable(&ce21{a: flat(32)}, u32s(8), 1))},
		{"variable order", second(decodeMiniVariable(&ce21{a: flat(32)}, u32s(8, 4), 1))},
		{"block variable header", second(decodeBlockVariable([]byte{32}, 1))},
		{"block variable width", second(decodeBlockVariable(u32s(16, 8), 1))},
		{"block variable 64 header", second(decodeBlockVariable(u32s(64, 0), 1))},
		{"block variable offsets", second(decodeBlockVariable(u32s(32, 8), 1))},
		{"block variable order", second(decodeBlockVariable(u32s(32, 16, 4, 0), 1))},
		{"rle kinds", second(decodeRle(&ce21{a: flat(32), b: flat(16)}, nil, nil, 1))},
		{"rle width", second(decodeRle(&ce21{a: flat(1), b: flat(8)}, nil, nil, 1))},
		{"rle sizes", second(decodeRle(&ce21{a: flat(32), b: flat(8)}, []byte{1}, []byte{1}, 1))},
		{"rle runs", second(decodeRle(&ce21{a: flat(8), b: flat(8)}, []byte{1}, []byte{1}, 2))},
		{"rle block prefix", second(decodeBlock(&ce21{kind: ceRle, a: flat(8), b: flat(8)}, []byte{1}, 1))},
		{"rle block length", second(decodeBlock(&ce21{kind: ceRle, a: flat(8), b: flat(8)}, binary.LittleEndian.AppendUint64(nil, 9), 1))},
		{"fsl dim", second(decodeMiniFSL(&ce21{bits: 0, a: flat(32)}, nil, 1))},
		{"fsl items", second(decodeMiniFSL(&ce21{bits: 2, a: &ce21{kind: ceRle}}, nil, 1))},
		{"fsl buffers", second(decodeMiniFSL(&ce21{bits: 2, a: flat(32), valid: true}, [][]byte{nil}, 1))},
		{"fsl bools", second(decodeMiniFSL(&ce21{bits: 2, a: flat(1)}, [][]byte{{3}}, 1))},
		{"fsl validity", second(decodeMiniFSL(&ce21{bits: 16, a: flat(8), valid: true}, [][]byte{{1}, make([]byte, 16)}, 1))},
		{"bss inner", second(decodeByteStreamSplit(&ce21{a: &ce21{kind: ceRle}}, nil, 1))},
		{"bss width", second(decodeByteStreamSplit(&ce21{a: flat(1)}, nil, 1))},
		{"bss short", second(decodeByteStreamSplit(&ce21{a: flat(32)}, nil, 1))},
		{"constant many", second(decodeConstantBlock([]byte{1}, maxChunkValues+1))},
		{"flat width", second(decodeFlat(flat(12), nil, 1))},
		{"flat bools", second(decodeFlat(flat(1), nil, 9))},
		{"fsst fixed", second(fsstDecode(st, &vals21{}))},
		{"fsst table", second(fsstDecode(st[:10], fsstIn))},
		{"fsst magic", second(fsstDecode(make([]byte, len(st)), fsstIn))},
		{"fsst escape", second(fsstDecode(st, &vals21{n: 1, variable: true, offs: []uint64{0, 1}, data: []byte{255}}))},
		{"fsst code", second(fsstDecode(st, &vals21{n: 1, variable: true, offs: []uint64{0, 1}, data: []byte{7}}))},
		{"mini flat buffers", second(decodeMini(flat(8), nil, 1))},
		{"mini inline buffers", second(decodeMini(&ce21{kind: ceInlineBP, bits: 8}, nil, 1))},
		{"mini variable buffers", second(decodeMini(&ce21{kind: ceVariable, a: flat(32)}, nil, 1))},
		{"mini rle buffers", second(decodeMini(&ce21{kind: ceRle, a: flat(8), b: flat(8)}, nil, 1))},
		{"mini general buffers", second(decodeMini(&ce21{kind: ceGeneral, a: flat(8)}, nil, 1))},
		{"mini bss buffers", second(decodeMini(&ce21{kind: ceByteStream, a: flat(8)}, nil, 1))},
		{"block kind", second(decodeBlock(&ce21{kind: cePackedStruct}, nil, 1))},
		{"levels width", second(levelsOf(&vals21{n: 1, w: 4, fixed: make([]byte, 4)}, 1))},
		{"gather indices", second(gather(&vals21{}, &vals21{variable: true}))},
		{"gather empty dictionary", second(gather(&vals21{}, &vals21{n: 1, w: 1, fixed: []byte{3}}))},
		{"scalar short", second(decodeScalarBuffer([]byte{1}))},
		{"scalar size", second(decodeScalarBuffer(u32s(1, 9)))},
		{"scalar empty", second(decodeScalarBuffer(u32s(1, 0)))},
		{"scalar offsets", second(decodeScalarBuffer(append(u32s(2, 4, 0), 1, 2, 3, 4)))},
		{"scalar range", second(decodeScalarBuffer(append(u32s(2, 8, 0), u32s(0, 5)...)))},
		{"constant levels", second(constantLevels(&ce21{kind: ceFlat, bits: 16}, []byte{1}, 1<<20))},
		{"encoding depth", second(parseCE(bytes.Repeat([]byte{0x5a, 0}, 1), maxCE21Depth+1))},
		{"two compressions", second(parseCE(append(msg(flatCE(8)), msg(flatCE(8))...), 0))},
		{"missing inner", second(parseCE(msg(ce(ceVariable, func(*pb.Encoder) {})), 0))},
		{"missing rle inner", second(parseCE(msg(ce(ceRle, func(e *pb.Encoder) { e.Message(1, flatCE(8)) })), 0))},
		{"buffer scheme", second(parseCE(msg(ce(ceFlat, func(e *pb.Encoder) { e.Message(2, func(b *pb.Encoder) { b.Uint(1, 9) }) })), 0))},
		{"wire type", second(parseCE([]byte{0x08, 1}, 0))},
	}
	for _, r := range refusals {
		var de *decodeError
		if r.err == nil || !(asDecodeError(r.err, &de) || errors.Is(r.err, pb.ErrMalformed)) {
			t.Errorf("%s: got %v, want a decoding error", r.name, r.err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func fullZipLayout(body func(m *pb.Encoder)) []byte {
	return msg(func(e *pb.Encoder) { e.Message(layoutFullZip, body) })
}

// More refusals: level consistency, full-zip items, constant pages with levels, dictionaries.
func TestPage21Refusals2(t *testing.T) {
	i32, str := arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String
	good, w := chunk21(0, nil, nil, u32s(7, 8, 9))
	fz := func(extra func(m *pb.Encoder), layers ...uint64) []byte {
		return fullZipLayout(func(m *pb.Encoder) {
			extra(m)
			m.PackedUints(8, layers)
		})
	}
	inlineBad := msg(func(e *pb.Encoder) {
		e.Message(layoutMiniBlock, func(m *pb.Encoder) {
			m.Message(3, ce(ceInlineBP, func(b *pb.Encoder) { b.Uint(1, 8) }))
			m.PackedUints(6, []uint64{1})
			m.Uint(7, 4)
			m.Uint(9, 3)
		})
	})
	cases := []struct {
		name   string
		layout []byte
		bufs   [][]byte
		rows   uint64
		dt     arrow.DataType
		want   string
	}{
		{"no chunks", miniLayout(flatCE(32), func(m *pb.Encoder) { m.Uint(9, 3) }, 1), [][]byte{nil, good}, 3, i32, "chunks hold 0 items"},
		{"chunk header cut", inlineBad, [][]byte{u16s(0), make([]byte, 8)}, 3, i32, "cut short"},
		{"dictionary", miniLayout(flatCE(8), func(m *pb.Encoder) { m.Uint(9, 3); m.Message(4, varCE(32)); m.Uint(5, 2) }, 1),
			[][]byte{u16s(w), good, []byte{1}}, 3, i32, "dictionary"},
		{"repetition levels", msg(func(e *pb.Encoder) {
			e.Message(layoutMiniBlock, func(m *pb.Encoder) {
				m.Message(1, flatCE(16))
				m.Message(3, flatCE(32))
				m.PackedUints(6, []uint64{1, 2})
				m.Uint(7, 1)
				m.Uint(9, 3)
				m.Uint(8, 1)
			})
		}), func() [][]byte { c, w := chunk21(3, []byte{1}, nil, u32s(1, 2, 3)); return [][]byte{u16s(w), c, nil} }(), 1, arrow.ListOf(i32), "repetition levels"},
		{"fz no values", fz(func(m *pb.Encoder) { m.Uint(3, 32); m.Uint(5, 1) }, 1), [][]byte{u32s(1)}, 1, i32, "without a value compression"},
		{"fz control word", fz(func(m *pb.Encoder) { m.Uint(1, 17); m.Uint(3, 32); m.Uint(5, 1); m.Message(7, flatCE(32)) }, 1), [][]byte{u32s(1)}, 1, i32, "control word of"},
		{"fz lengths", fz(func(m *pb.Encoder) { m.Uint(4, 16); m.Uint(5, 1); m.Message(7, varCE(16)) }, 1), [][]byte{u32s(1)}, 1, str, "lengths of 16"},
		{"fz control past end", fz(func(m *pb.Encoder) { m.Uint(2, 1); m.Uint(3, 32); m.Uint(5, 5); m.Message(7, flatCE(32)) }, 3), [][]byte{{0, 1, 2, 3, 4}}, 5, i32, "control word past the end"},
		{"fz value past end", fz(func(m *pb.Encoder) { m.Uint(2, 1); m.Uint(3, 32); m.Uint(5, 2); m.Message(7, flatCE(32)) }, 3), [][]byte{{0, 1, 2, 3, 4, 5, 6, 7, 8}}, 2, i32, "value past the end"},
		{"fz length past end", fz(func(m *pb.Encoder) { m.Uint(2, 1); m.Uint(4, 32); m.Uint(5, 2); m.Message(7, varCE(32)) }, 3), [][]byte{{0, 0, 0, 0, 0, 0}}, 2, str, "length past the end"},
		{"fz per-value zstd", fz(func(m *pb.Encoder) {
			m.Uint(4, 32)
			m.Uint(5, 1)
			m.Message(7, ce(ceGeneral, func(g *pb.Encoder) { g.Message(1, func(b *pb.Encoder) { b.Uint(1, 2) }); g.Message(3, varCE(32)) }))
		}, 1), [][]byte{append(u32s(9), 1, 0, 0, 0, 0, 0, 0, 0, 7)}, 1, str, "value 0"},
		{"fz compression", fz(func(m *pb.Encoder) { m.Uint(4, 32); m.Uint(5, 1); m.Message(7, flatCE(8)) }, 1), [][]byte{append(u32s(1), 'x')}, 1, str, "not supported"},
		{"fz fsl validity inner", fz(func(m *pb.Encoder) {
			m.Uint(3, 16)
			m.Uint(5, 1)
			m.Message(7, ce(ceFixedSizeList, func(f *pb.Encoder) { f.Uint(1, 1); f.Message(2, varCE(32)); f.Uint(3, 1) }))
		}, 1), [][]byte{{1, 0}}, 1, i32, "fixed size list of 1 variable"},
		{"fz fsl validity bools", fz(func(m *pb.Encoder) {
			m.Uint(3, 16)
			m.Uint(5, 1)
			m.Message(7, ce(ceFixedSizeList, func(f *pb.Encoder) { f.Uint(1, 1); f.Message(2, flatCE(1)); f.Uint(3, 1) }))
		}, 1), [][]byte{{1, 0}}, 1, i32, "1-bit items"},
		{"fz fsl validity width", fz(func(m *pb.Encoder) {
			m.Uint(3, 16)
			m.Uint(5, 1)
			m.Message(7, ce(ceFixedSizeList, func(f *pb.Encoder) { f.Uint(1, 1); f.Message(2, flatCE(32)); f.Uint(3, 1) }))
		}, 1), [][]byte{{1, 0}}, 1, i32, "with validity"},
		{"constant levels", msg(func(e *pb.Encoder) {
			e.Message(layoutConstant, func(m *pb.Encoder) { m.PackedUints(5, []uint64{1, 2}); m.Message(7, flatCE(16)); m.Uint(9, 5) })
		}), [][]byte{{1, 2}, nil}, 1, arrow.ListOf(i32), "repetition levels"},
		{"constant def levels", msg(func(e *pb.Encoder) {
			e.Message(layoutConstant, func(m *pb.Encoder) { m.PackedUints(5, []uint64{3}); m.Message(8, flatCE(16)); m.Uint(10, 5) })
		}), [][]byte{nil, {1, 2}}, 1, i32, "definition levels"},
		{"all-null valid item", msg(func(e *pb.Encoder) {
			e.Message(layoutConstant, func(m *pb.Encoder) { m.PackedUints(5, []uint64{3, 4}) })
		}), [][]byte{u16s(1), u16s(0)}, 1, arrow.ListOf(i32), "all-null page with a valid item"},
	}
	for _, c := range cases {
		_, err := readPage21(t, c.layout, c.bufs, c.rows, c.dt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	// inline bitpacking whose second block is missing
	if _, err := decodeInlineBP(8, append([]byte{1}, make([]byte, 128)...), 1025); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("inline second block: %v", err)
	}
}

// check refuses levels and values that disagree.
func TestPage21Check(t *testing.T) {
	item := levelInfo{itemNullable: true, itemLevels: 1}
	list := levelInfo{list: true, itemLevels: 0, nullList: 1}
	one := &vals21{n: 1, w: 1, fixed: []byte{1}}
	cases := []struct {
		name string
		pg   page21
		want string
	}{
		{"rep/def lengths", page21{rows: 1, levels: list, rep: []uint16{1}, def: []uint16{0, 0}, vals: one}, "repetition levels but"},
		{"list without rep", page21{rows: 1, levels: list, def: []uint16{0}, vals: one}, "disagree"},
		{"def per row", page21{rows: 2, levels: item, def: []uint16{0}, vals: one}, "definition levels for 2 rows"},
		{"deep rep", page21{rows: 1, levels: list, rep: []uint16{2}, def: []uint16{0}, vals: one}, "repetition level 2"},
		{"inside a list", page21{rows: 1, levels: list, rep: []uint16{0, 1}, def: []uint16{0, 0}, vals: one}, "inside a list"},
		{"def too high", page21{rows: 1, levels: item, def: []uint16{2}, vals: one}, "above the maximum"},
		{"row count", page21{rows: 2, levels: list, rep: []uint16{1}, def: []uint16{0}, vals: one}, "start 1 rows"},
		{"constant values", page21{rows: 1, levels: levelInfo{}, constant: true, vals: &vals21{n: 2}}, "constant page with 2"},
		{"value count", page21{rows: 2, levels: levelInfo{}, vals: one}, "1 values for 2 visible"},
	}
	for _, c := range cases {
		if err := c.pg.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	b := array.NewInt32Builder(memory.DefaultAllocator)
	defer b.Release()
	pg := page21{rows: 1, vals: &vals21{n: 1, w: 4, fixed: make([]byte, 4)}}
	if err := pg.emit(b, arrow.PrimitiveTypes.Int32, 1, 1); err == nil {
		t.Error("emit past the page's rows")
	}
	// appendValue's guards
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	defer sb.Release()
	lsb := array.NewLargeStringBuilder(memory.DefaultAllocator)
	defer lsb.Release()
	bad := &vals21{n: 1, variable: true, offs: []uint64{0, 1}, data: []byte{0xff}}
	hb := array.NewFloat16Builder(memory.DefaultAllocator)
	defer hb.Release()
	for name, err := range map[string]error{
		"index":          appendValue(b, arrow.PrimitiveTypes.Int32, one, 1),
		"utf8":           appendValue(sb, arrow.BinaryTypes.String, bad, 0),
		"large utf8":     appendValue(lsb, arrow.BinaryTypes.LargeString, bad, 0),
		"fsl for int":    appendValue(b, arrow.PrimitiveTypes.Int32, &vals21{n: 1, w: 4, dim: 1, fixed: make([]byte, 4)}, 0),
		"unsupported":    appendValue(hb, arrow.FixedWidthTypes.Float16, &vals21{n: 1, w: 2, fixed: make([]byte, 2)}, 0),
		"variable int":   appendValue(b, arrow.PrimitiveTypes.Int32, bad, 0),
		"fsl dimensions": appendValue(array.NewFixedSizeListBuilder(memory.DefaultAllocator, 2, arrow.PrimitiveTypes.Int32), arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), &vals21{n: 1, w: 4, dim: 1, fixed: make([]byte, 4)}, 0),
	} {
		var de *decodeError
		if err == nil || !asDecodeError(err, &de) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Reader-level refusals of 2.1 reads, and the caps on what a page may decode to.
func TestRead21Refusals(t *testing.T) {
	ctx := context.Background()
	var tiny, main fixture21
	for _, fx := range loadFixtures21(t) {
		switch fx.name {
		case "lance12-v2.2/tiny":
			tiny = fx
		case "lance12-v2.1/main":
			main = fx
		}
	}
	r, err := Open(ctx, BytesSource(tiny.file), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := schema.FromArrow(arrow.NewSchema([]arrow.Field{{Name: "ll", Type: arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int32)), Nullable: true}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	all := func(int32) (int, bool) { return 0, true }
	fields := r.Schema().Fields
	for name, read := range map[string]func() (arrow.Record, error){
		"list of lists": func() (arrow.Record, error) { return r.Read(ctx, ls.Fields, all, 0, 1, nil) },
		"column range": func() (arrow.Record, error) {
			return r.Read(ctx, fields[:1], func(int32) (int, bool) { return 999, true }, 0, 1, nil)
		},
	} {
		if _, err := read(); !isFormatError(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	r.cols[0].rows++
	if _, err := r.Read(ctx, fields[:1], nil, 0, 1, nil); !isFormatError(err) {
		t.Errorf("column rows: %v", err)
	}
	r.cols[0].rows--

	rm, err := Open(ctx, BytesSource(main.file), "main")
	if err != nil {
		t.Fatal(err)
	}
	var lowcard []*schema.Field
	for _, f := range rm.Schema().Fields {
		if f.Name == "utf8_lowcard" {
			lowcard = append(lowcard, f)
		}
	}
	old := maxDecoded21
	defer func() { maxDecoded21 = old }()
	for _, limit := range []uint64{1000, 4500} { // the indices, then the strings they stand for
		maxDecoded21 = limit
		if _, err := rm.Read(ctx, lowcard, nil, 0, rm.NumRows(), nil); !isFormatError(err) || !strings.Contains(err.Error(), "expand past") {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
}

// Ranged reads of mini-block pages fetch only the chunks they need; a chunk size in the
// metadata that runs past the chunk buffer is refused before anything is fetched.
func TestMiniBlockWindow(t *testing.T) {
	ctx := context.Background()
	var fx fixture21
	for _, f := range loadFixtures21(t) {
		if f.name == "lance12-v2.1/main" {
			fx = f
		}
	}
	r, err := Open(ctx, BytesSource(fx.file), "main")
	if err != nil {
		t.Fatal(err)
	}
	var seq []*schema.Field
	col := -1
	leaves := 0
	for _, f := range r.Schema().Flatten() {
		if len(f.Children) > 0 {
			continue
		}
		if f.Name == "i64_seq" {
			seq, col = []*schema.Field{f}, leaves
		}
		leaves++
	}
	p := r.cols[col].pages[0]
	rec, err := r.Read(ctx, seq, nil, 1030, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRows21(t, "window", fx, rec, 1030)
	rec.Release()

	// the window's contract: chunks outside the bytes given are refused
	l, err := parseLayout21(p.encoding)
	if err != nil {
		t.Fatal(err)
	}
	meta := fx.file[p.offsets[0] : p.offsets[0]+p.sizes[0]]
	if _, err := decodeWindow21(l, [][]byte{meta, nil}, p.rows, 0, 1, 8, p.sizes[1]); err == nil || !strings.Contains(err.Error(), "outside the fetched") {
		t.Errorf("window: %v", err)
	}

	bad := bytes.Clone(fx.file)
	bad[p.offsets[0]+1] = 0xff // chunk 0: 0xff.. words of 8 bytes, far past the chunk buffer
	rb, err := Open(ctx, BytesSource(bad), "bad")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rb.Read(ctx, seq, nil, 10, 5, nil); !isFormatError(err) || !strings.Contains(err.Error(), "past the") {
		t.Errorf("chunk past the buffer: %v", err)
	}
}

// Ranged reads of fixed-width full-zip pages fetch only their rows; a page whose size does not
// match its rows is refused.
func TestFullZipWindow(t *testing.T) {
	ctx := context.Background()
	for _, fx := range loadFixtures21(t) {
		if filepath.Base(fx.name) != "vec" {
			continue
		}
		r, err := Open(ctx, BytesSource(fx.file), fx.name)
		if err != nil {
			t.Fatal(err)
		}
		p := &r.cols[1].pages[0]
		l, err := parseLayout21(p.encoding)
		if err != nil || l.kind != layoutFullZip {
			t.Fatalf("%s: %v, layout %d", fx.name, err, l.kind)
		}
		for _, rg := range [][2]uint64{{3, 1}, {6, 30}, {39, 1}} {
			pg, err := r.readFullZipRange(&readState{ctx: ctx}, p, l, rg[0], rg[1])
			if err != nil || pg.vals.n != rg[1] || pg.base != rg[0] {
				t.Fatalf("%s %v: %v", fx.name, rg, err)
			}
		}
		bad := *l
		bad.numItems++
		if _, err := r.readFullZipRange(&readState{ctx: ctx}, p, &bad, 0, 1); err == nil {
			t.Fatalf("%s: a full-zip page with more items than rows read", fx.name)
		}
		bad = *l
		bad.bitsPerValue = 12
		if _, err := r.readFullZipRange(&readState{ctx: ctx}, p, &bad, 0, 1); err == nil {
			t.Fatalf("%s: 12-bit full-zip values read", fx.name)
		}
	}
}

// Ranged reads of list pages find their chunks through the repetition index; an index that
// disagrees with the page is refused.
func TestMiniBlockListWindow(t *testing.T) {
	ctx := context.Background()
	var fx fixture21
	for _, f := range loadFixtures21(t) {
		if f.name == "lance12-v2.1/main" {
			fx = f
		}
	}
	var list []*schema.Field
	r, err := Open(ctx, BytesSource(fx.file), "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Schema().Fields {
		if f.Name == "list_i64" {
			list = []*schema.Field{f}
		}
	}
	p := r.cols[29].pages[0] // the column of list_i64's item (28 is list_utf8's)
	l, err := parseLayout21(p.encoding)
	if err != nil || l.repIndexDepth != 1 {
		t.Fatalf("layout %v depth %d", err, l.repIndexDepth)
	}
	rec, err := r.Read(ctx, list, nil, 700, 400, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRows21(t, "list window", fx, rec, 700)
	rec.Release()

	ri := p.offsets[len(p.offsets)-1]
	put := func(b []byte, at uint64, v uint64) { binary.LittleEndian.PutUint64(b[at:], v) }
	cases := map[string]func(b []byte){
		"more rows than the page": func(b []byte) { put(b, ri, 1<<40) },
		"counts":                  func(b []byte) { put(b, ri, 0); put(b, ri+8, 0) },
		"ends no list":            func(b []byte) { put(b, ri+8, 5); put(b, ri+16, 0); put(b, ri+24, 0) },
		"chunks [":                func(b []byte) { b[p.offsets[0]+p.sizes[0]-1] = 0xff },
	}
	for want, mutate := range cases {
		bad := bytes.Clone(fx.file)
		mutate(bad)
		rb, err := Open(ctx, BytesSource(bad), "bad")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rb.Read(ctx, list, nil, rb.NumRows()-2, 2, nil); !isFormatError(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	deep := *l
	deep.repIndexDepth = 2
	if _, err := r.readMiniBlockListRange(&readState{ctx: ctx}, &p, &deep, 1, 2); err == nil {
		t.Error("repetition index of the wrong depth accepted")
	}
}

// fullZip is a full-zip layout of items values with one repetition/definition layer;
// widthField is 3 (bits per value, fixed width) or 4 (bits per offset, variable width).
func fullZip(widthField pb.Number, bits, items uint64, values pbf) []byte {
	return msg(func(e *pb.Encoder) {
		e.Message(layoutFullZip, func(m *pb.Encoder) {
			m.Uint(widthField, bits)
			m.Uint(5, items)
			m.Message(7, values)
			m.PackedUints(8, []uint64{1})
		})
	})
}

// Binary values are bytes, not text: a page of binary without nulls whose values split a rune
// between them is read as it is (the string check refused it, naming value 1).
func TestEmitBinaryIsNotCheckedAsUTF8(t *testing.T) {
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary} {
		pg := &page21{rows: 2, vals: &vals21{n: 2, variable: true, offs: []uint64{0, 1, 2}, data: []byte("é")}}
		b := array.NewBuilder(memory.DefaultAllocator, dt)
		if err := pg.emit(b, dt, 0, 2); err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		a := b.NewArray()
		got := fmt.Sprintf("%q", a.(interface{ Value(int) []byte }).Value(1))
		a.Release()
		b.Release()
		if got != `"\xa9"` {
			t.Fatalf("%s: value 1 = %s", dt, got)
		}
	}
}

// Strings without nulls are checked as UTF-8 in one pass: a value that splits a rune is still
// refused, though the bytes of the page are valid together, and an invalid page names its value.
func TestEmitStringsChecksEachValue(t *testing.T) {
	for _, c := range []struct {
		name string
		offs []uint64
		data string
		want []string
		err  string
	}{
		{"valid", []uint64{0, 2, 2, 4}, "abé", []string{"ab", "", "é"}, ""},
		{"a rune split between values", []uint64{0, 1, 2}, "é", nil, "value 1 is not UTF-8"},
		{"bytes that are no UTF-8", []uint64{0, 1, 2}, "a\xff", nil, "value 1 is not UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := uint64(len(c.offs) - 1)
			pg := &page21{rows: n, vals: &vals21{n: n, variable: true, offs: c.offs, data: []byte(c.data)}}
			sb := array.NewStringBuilder(memory.DefaultAllocator)
			defer sb.Release()
			err := pg.emit(sb, arrow.BinaryTypes.String, 0, n)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := sb.NewStringArray()
			defer a.Release()
			for i, w := range c.want {
				if a.Value(i) != w {
					t.Fatalf("value %d = %q, want %q", i, a.Value(i), w)
				}
			}
		})
	}
}
