package lance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// deletionSchema is the exact schema the official reader requires of an .arrow deletion file.
var deletionSchema = arrow.NewSchema([]arrow.Field{{Name: "row_id", Type: arrow.PrimitiveTypes.Uint32}}, nil)

func deletionKey(fragID uint64, d *DeletionFile) string {
	ext := "arrow"
	if d.FileType == DeletionBitmap {
		ext = "bin"
	}
	return fmt.Sprintf("_deletions/%d-%d-%d.%s", fragID, d.ReadVersion, d.ID, ext)
}

// encodeDeletionArrow writes the sorted row offsets as an Arrow IPC file with one UInt32 column.
func encodeDeletionArrow(offsets []uint32) ([]byte, error) {
	b := array.NewUint32Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(offsets, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecord(deletionSchema, []arrow.Array{col}, int64(len(offsets)))
	defer rec.Release()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(deletionSchema))
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeDeletionFile returns the deleted row offsets of a fragment, sorted.
func decodeDeletionFile(name string, fileType int32, data []byte, physicalRows uint64) ([]uint32, error) {
	var offs []uint32
	var err error
	if fileType == DeletionBitmap {
		offs, err = decodePortableRoaring(data, physicalRows)
	} else {
		offs, err = decodeDeletionArrow(data)
	}
	if err != nil {
		return nil, &FormatError{File: name, Offset: -1, Reason: err.Error()}
	}
	slices.Sort(offs)
	offs = slices.Compact(offs) // an .arrow file may name a row twice
	for _, o := range offs {
		if uint64(o) >= physicalRows {
			return nil, &FormatError{File: name, Offset: -1, Reason: fmt.Sprintf("deleted row %d is past the fragment's %d rows", o, physicalRows)}
		}
	}
	return offs, nil
}

// decodePortableRoaring reads a 32-bit RoaringBitmap in the portable serialization. A run
// container can describe 65,536 values in four bytes, so the output is capped at limit values
// (a fragment's row count) before anything is allocated for them.
func decodePortableRoaring(b []byte, limit uint64) ([]uint32, error) {
	const cookieNoRun, cookieRun = 12346, 12347
	r := &byteReader{b: b}
	cookie, err := r.u32()
	if err != nil {
		return nil, err
	}
	var n int
	var runFlags []byte
	hasOffsets := true
	switch {
	case cookie == cookieNoRun:
		c, err := r.u32()
		if err != nil {
			return nil, err
		}
		n = int(c)
	case cookie&0xffff == cookieRun:
		n = int(cookie>>16) + 1
		runFlags, err = r.take((n + 7) / 8)
		if err != nil {
			return nil, err
		}
		hasOffsets = n >= 4
	default:
		return nil, fmt.Errorf("roaring: bad cookie %d", cookie)
	}
	if n > 1<<16 || n*4 > len(b) {
		return nil, fmt.Errorf("roaring: %d containers do not fit in %d bytes", n, len(b))
	}
	keys := make([]uint16, n)
	cards := make([]int, n)
	for i := 0; i < n; i++ {
		k, err := r.u16()
		if err != nil {
			return nil, err
		}
		c, err := r.u16()
		if err != nil {
			return nil, err
		}
		keys[i], cards[i] = k, int(c)+1
	}
	if hasOffsets {
		if _, err := r.take(4 * n); err != nil {
			return nil, err
		}
	}
	var out []uint32
	for i := 0; i < n; i++ {
		hi := uint32(keys[i]) << 16
		isRun := runFlags != nil && runFlags[i/8]&(1<<(i%8)) != 0
		switch {
		case isRun:
			runs, err := r.u16()
			if err != nil {
				return nil, err
			}
			for j := 0; j < int(runs); j++ {
				start, err := r.u16()
				if err != nil {
					return nil, err
				}
				length, err := r.u16()
				if err != nil {
					return nil, err
				}
				if uint64(len(out))+uint64(length)+1 > limit {
					return nil, fmt.Errorf("roaring: more values than the fragment's %d rows", limit)
				}
				for v := uint32(start); v <= uint32(start)+uint32(length); v++ {
					out = append(out, hi|v)
				}
			}
		case cards[i] <= 4096:
			vals, err := r.take(2 * cards[i])
			if err != nil {
				return nil, err
			}
			for j := 0; j < cards[i]; j++ {
				out = append(out, hi|uint32(binary.LittleEndian.Uint16(vals[2*j:])))
			}
		default:
			if uint64(len(out))+uint64(cards[i]) > limit {
				return nil, fmt.Errorf("roaring: more values than the fragment's %d rows", limit)
			}
			words, err := r.take(8192)
			if err != nil {
				return nil, err
			}
			for w := 0; w < 1024; w++ {
				x := binary.LittleEndian.Uint64(words[8*w:])
				for x != 0 {
					bit := uint32(bits.TrailingZeros64(x))
					out = append(out, hi|uint32(w*64)+bit)
					x &= x - 1
				}
			}
		}
	}
	return out, nil
}

type byteReader struct {
	b   []byte
	off int
}

func (r *byteReader) take(n int) ([]byte, error) {
	if n < 0 || r.off+n > len(r.b) {
		return nil, fmt.Errorf("roaring: truncated at byte %d (need %d more)", r.off, n)
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s, nil
}

func (r *byteReader) u32() (uint32, error) {
	s, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(s), nil
}

func (r *byteReader) u16() (uint16, error) {
	s, err := r.take(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(s), nil
}
