package file

import "encoding/binary"

// Lance's bitpacking (inline and out-of-line) packs blocks of 1024 values with the FastLanes
// layout: a block of T-bit words is read as 1024/T lanes; lane l's row r holds the value at
// index flOrder[r/8]*16 + (r%8)*128 + l, its bits packed row after row into the lane's words.
var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

const flBlock = 1024

// flWords is how many T-bit words one block of 1024 values packed at w bits takes.
func flWords(t, w uint64) uint64 { return flBlock * w / t }

// wordAt reads the i-th little-endian word of t bits from b.
func wordAt(b []byte, t uint64, i uint64) uint64 {
	switch t {
	case 8:
		return uint64(b[i])
	case 16:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 32:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return binary.LittleEndian.Uint64(b[8*i:])
}

// unpackFL unpacks one block (flWords(t, w) words of t bits in packed) into out[0:1024].
// The caller checks that packed holds the block and that 0 <= w <= t.
func unpackFL(t, w uint64, packed []byte, out []uint64) {
	if w == 0 {
		clear(out[:flBlock])
		return
	}
	lanes := flBlock / t
	mask := ^uint64(0)
	if w < 64 {
		mask = 1<<w - 1
	}
	for lane := uint64(0); lane < lanes; lane++ {
		for row := uint64(0); row < t; row++ {
			idx := uint64(flOrder[row/8])*16 + (row%8)*128 + lane
			pos := row * w
			word, shift := pos/t, pos%t
			v := wordAt(packed, t, lanes*word+lane) >> shift
			if shift+w > t {
				v |= wordAt(packed, t, lanes*(word+1)+lane) << (t - shift)
			}
			out[idx] = v & mask
		}
	}
}

// putWord stores v as a t-bit little-endian value at index i of b.
func putWord(b []byte, t uint64, i uint64, v uint64) {
	switch t {
	case 8:
		b[i] = byte(v)
	case 16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	case 32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	default:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}
