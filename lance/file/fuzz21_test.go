package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
)

// lowerDecodeLimits21 keeps fuzzed pages from asking for gigabytes.
func lowerDecodeLimits21(f *testing.F) {
	lowerDecodeLimit(f)
	oldD, oldZ := maxDecoded21, maxDecompressed
	maxDecoded21, maxDecompressed = 1<<22, 1<<22
	f.Cleanup(func() { maxDecoded21, maxDecompressed = oldD, oldZ })
}

// FuzzOpen21 opens mutated 2.1/2.2 files and reads every column: anything wrong must come back
// as a FormatError, never a panic.
func FuzzOpen21(f *testing.F) {
	lowerDecodeLimits21(f)
	for _, fx := range loadFixtures21(f) {
		if b := filepath.Base(fx.name); b == "vec" || b == "tiny" {
			f.Add(fx.file)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx := context.Background()
		r, err := Open(ctx, BytesSource(b), "fuzz")
		if err != nil {
			if !isFormatError(err) {
				t.Fatalf("Open: %v is not a FormatError", err)
			}
			return
		}
		for _, fld := range r.Schema().Fields {
			if _, err := fld.ToArrow(); err != nil {
				return // a schema the reader cannot type is refused by Read's callers
			}
		}
		// everything, then a range from the middle (the chunk-skipping path)
		n := min(r.NumRows(), 1<<12)
		for _, rg := range [][2]int64{{0, n}, {n / 2, n - n/2}} {
			rec, err := r.Read(ctx, r.Schema().Fields, nil, rg[0], rg[1], nil)
			if err != nil {
				if !isFormatError(err) {
					t.Fatalf("Read: %v is not a FormatError", err)
				}
				return
			}
			rec.Release()
		}
	})
}

// page21Types are the Arrow types FuzzReadPage21 decodes a page as (its byte picks one).
var page21Types = []arrow.DataType{
	arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.FixedWidthTypes.Boolean,
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
	arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64,
	&arrow.TimestampType{Unit: arrow.Microsecond}, arrow.ListOf(arrow.BinaryTypes.String), arrow.ListOf(arrow.PrimitiveTypes.Int64),
	arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), arrow.FixedSizeListOf(128, arrow.PrimitiveTypes.Float32),
}

// packBufs and unpackBufs carry a page's buffers in one fuzz argument: a count byte, a u32
// length per buffer, the buffers.
func packBufs(bufs [][]byte) []byte {
	out := []byte{byte(len(bufs))}
	for _, b := range bufs {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
	}
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out
}

func unpackBufs(b []byte) ([][]byte, bool) {
	if len(b) < 1 || len(b) < 1+4*int(b[0]) {
		return nil, false
	}
	n := int(b[0])
	bufs := make([][]byte, n)
	pos := 1 + 4*n
	for i := range bufs {
		sz := int(binary.LittleEndian.Uint32(b[1+4*i:]))
		if sz > len(b)-pos {
			return nil, false
		}
		bufs[i], pos = b[pos:pos+sz], pos+sz
	}
	return bufs, true
}

// fixturePages21 are the pages of the fixtures as (layout, buffers, rows, type) seeds.
func fixturePages21(t testing.TB) [][4]any {
	typeOf := map[string]int{}
	for i, dt := range page21Types {
		typeOf[dt.String()] = i
	}
	var out [][4]any
	seen := map[string]bool{}
	for _, fx := range loadFixtures21(t) {
		r, err := Open(context.Background(), BytesSource(fx.file), fx.name)
		if err != nil {
			t.Fatal(err)
		}
		leaves := 0
		for _, fld := range r.Schema().Flatten() {
			if len(fld.Children) > 0 {
				continue
			}
			col := r.cols[leaves]
			leaves++
			dt, err := fld.ToArrow()
			if err != nil {
				t.Fatal(err)
			}
			typ := byte(typeOf[dt.Type.String()])
			if dt.Type.ID() == arrow.STRING && fld.Name == "item" {
				typ = byte(typeOf[arrow.ListOf(arrow.BinaryTypes.String).String()])
			}
			for _, p := range col.pages {
				pg, err := r.fetchPage(context.Background(), &p)
				if err != nil {
					t.Fatal(err)
				}
				blob := packBufs(pg.bufs)
				if len(blob) > 1<<12 || seen[string(p.encoding)+string(blob)] {
					continue
				}
				seen[string(p.encoding)+string(blob)] = true
				out = append(out, [4]any{p.encoding, blob, uint16(p.rows), typ})
			}
		}
	}
	return out
}

// FuzzReadPage21 decodes arbitrary page layouts and buffers as a page of some type: anything
// wrong must be a decoding error (a FormatError once the reader attaches the location).
func FuzzReadPage21(f *testing.F) {
	lowerDecodeLimits21(f)
	for _, s := range fixturePages21(f) {
		f.Add(s[0].([]byte), s[1].([]byte), s[2].(uint16), s[3].(byte))
	}
	f.Fuzz(func(t *testing.T, layout, blob []byte, rows uint16, typ byte) {
		bufs, ok := unpackBufs(blob)
		if !ok {
			return
		}
		// Emitting costs what the caller asks for; a few thousand rows keep executions quick.
		err := decodeAndEmit21(layout, bufs, uint64(rows%4096), page21Types[int(typ)%len(page21Types)])
		if err != nil && !isDecodeError21(err) {
			t.Fatalf("%v is not a decoding error", err)
		}
	})
}

func decodeAndEmit21(layout []byte, bufs [][]byte, rows uint64, dt arrow.DataType) error {
	l, err := parseLayout21(layout)
	if err != nil {
		return err
	}
	pg, err := decodePage21(l, bufs, rows)
	if err != nil {
		return err
	}
	b := array.NewBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	emitErr := pg.emit(b, dt, 0, rows)
	if isVarBinary(dt) {
		// The bulk read must agree with the builder's: the same values, or an error both ways.
		bulk, ok, err := readVarBinary21(dt, []pageRows{{pg: pg, count: rows}}, rows)
		switch {
		case err != nil && emitErr == nil:
			return fmt.Errorf("the bulk read refused what the builder read: %w", err)
		case ok && err == nil:
			if emitErr != nil {
				bulk.Release()
				return fmt.Errorf("the bulk read took what the builder refused (%v)", emitErr)
			}
			built := b.NewArray()
			same := array.Equal(bulk, built)
			built.Release()
			bulk.Release()
			if !same {
				return fmt.Errorf("the bulk read differs from the builder's")
			}
			if err := pg.emit(b, dt, 0, rows); err != nil {
				return err
			}
		}
	}
	if emitErr != nil {
		return emitErr
	}
	if rows > 2 {
		if err := pg.emit(b, dt, rows/2, rows-rows/2); err != nil {
			return err
		}
	}
	b.NewArray().Release()
	return nil
}

func isDecodeError21(err error) bool {
	var de *decodeError
	return asDecodeError(err, &de) || bytes.Contains([]byte(err.Error()), []byte(pb.ErrMalformed.Error()))
}

func asDecodeError(err error, de **decodeError) bool {
	for err != nil {
		if d, ok := err.(*decodeError); ok {
			*de = d
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}
