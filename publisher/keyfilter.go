package publisher

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// keyFilter is a scalable Bloom filter over object ids: it answers "certainly never written"
// or "maybe written". A "no" is exact (Bloom filters have no false negatives), which is what
// lets the writer decide that a new message's receipt key is new without touching storage; a
// "maybe" is settled by an exact lookup in __manifest.
//
// It grows as a series of plain Bloom filters (Almeida et al., "Scalable Bloom Filters"): when
// the newest is full, a new one of twice the capacity and half the false-positive rate is
// added, so the overall false-positive rate stays below 2*firstFPR however many keys arrive.
// Memory is O(keys) with a small constant: about 16 bits a key at first, 20 at a million keys.
// The hash is fixed (xxhash64, not seeded per process) because the bits are stored in
// checkpoints and read back by other processes.
type keyFilter struct {
	parts []bloom
}

type bloom struct {
	capacity uint64 // keys it takes before the next part is added
	count    uint64
	k        uint32 // probes per key
	bits     []uint64
}

const (
	filterFirstCapacity = 1 << 16
	filterFirstFPR      = 0.0005
)

func newBloom(capacity uint64, fpr float64) bloom {
	m := uint64(math.Ceil(-float64(capacity) * math.Log(fpr) / (math.Ln2 * math.Ln2)))
	k := uint32(math.Round(float64(m) / float64(capacity) * math.Ln2))
	if k < 1 {
		k = 1
	}
	words := (m + 63) / 64
	return bloom{capacity: capacity, k: k, bits: make([]uint64, words)}
}

// probes derives the bit positions of a key by double hashing (Kirsch and Mitzenmacher).
func (b *bloom) each(h1, h2 uint64, fn func(word uint64, mask uint64) bool) {
	m := uint64(len(b.bits)) * 64
	for i := uint64(0); i < uint64(b.k); i++ {
		bit := (h1 + i*h2) % m
		if !fn(bit/64, 1<<(bit%64)) {
			return
		}
	}
}

func hashes(key string) (uint64, uint64) {
	h := xxhash.Sum64String(key)
	// splitmix64's finaliser gives the second, independent-enough hash from the first.
	z := h + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return h, (z ^ (z >> 31)) | 1
}

func (f *keyFilter) add(key string) {
	if len(f.parts) == 0 || f.parts[len(f.parts)-1].count >= f.parts[len(f.parts)-1].capacity {
		capacity, fpr := uint64(filterFirstCapacity), filterFirstFPR
		if n := len(f.parts); n > 0 {
			capacity = f.parts[n-1].capacity * 2
			fpr = filterFirstFPR / math.Pow(2, float64(n))
		}
		f.parts = append(f.parts, newBloom(capacity, fpr))
	}
	h1, h2 := hashes(key)
	b := &f.parts[len(f.parts)-1]
	b.each(h1, h2, func(w, mask uint64) bool { b.bits[w] |= mask; return true })
	b.count++
}

// mayContain is false only for a key never added.
func (f *keyFilter) mayContain(key string) bool {
	h1, h2 := hashes(key)
	for i := range f.parts {
		b := &f.parts[i]
		all := true
		b.each(h1, h2, func(w, mask uint64) bool {
			all = b.bits[w]&mask != 0
			return all
		})
		if all {
			return true
		}
	}
	return false
}

// count is the number of keys added.
func (f *keyFilter) count() uint64 {
	var n uint64
	for _, b := range f.parts {
		n += b.count
	}
	return n
}

// bytes is the filter's memory.
func (f *keyFilter) bytes() int {
	n := 0
	for _, b := range f.parts {
		n += 8 * len(b.bits)
	}
	return n
}

// marshal appends the filter: a part count, then per part capacity, count, k, word count and
// the words, all little-endian.
func (f *keyFilter) marshal(out []byte) []byte {
	out = binary.LittleEndian.AppendUint32(out, uint32(len(f.parts)))
	for _, b := range f.parts {
		out = binary.LittleEndian.AppendUint64(out, b.capacity)
		out = binary.LittleEndian.AppendUint64(out, b.count)
		out = binary.LittleEndian.AppendUint32(out, b.k)
		out = binary.LittleEndian.AppendUint64(out, uint64(len(b.bits)))
		// The words start 8-aligned in the file, so that a reader may use them in place.
		pad := (8 - (len(out)+1)%8) % 8
		out = append(out, byte(pad))
		out = append(out, make([]byte, pad)...)
		for _, w := range b.bits {
			out = binary.LittleEndian.AppendUint64(out, w)
		}
	}
	return out
}

var errShortFilter = errors.New("key filter truncated")

// unmarshalFilter reads a filter marshal wrote and returns the bytes after it.
func unmarshalFilter(in []byte) (*keyFilter, []byte, error) {
	if len(in) < 4 {
		return nil, nil, errShortFilter
	}
	n := binary.LittleEndian.Uint32(in)
	in = in[4:]
	if n > 64 {
		return nil, nil, fmt.Errorf("key filter of %d parts", n)
	}
	f := &keyFilter{}
	for i := uint32(0); i < n; i++ {
		if len(in) < 29 {
			return nil, nil, errShortFilter
		}
		b := bloom{capacity: binary.LittleEndian.Uint64(in), count: binary.LittleEndian.Uint64(in[8:]), k: binary.LittleEndian.Uint32(in[16:])}
		words := binary.LittleEndian.Uint64(in[20:])
		pad := int(in[28])
		if pad > 7 || len(in) < 29+pad {
			return nil, nil, fmt.Errorf("key filter part %d: padding %d", i, pad)
		}
		in = in[29+pad:]
		if b.k == 0 || b.k > 64 || words == 0 || words > uint64(len(in))/8 {
			return nil, nil, fmt.Errorf("key filter part %d: %d probes, %d words in %d bytes", i, b.k, words, len(in))
		}
		b.bits = decodeWords(in[:8*words])
		in = in[8*words:]
		f.parts = append(f.parts, b)
	}
	return f, in, nil
}

// littleEndian is whether this machine stores a uint64 as the file does.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// decodeWords returns the words of their little-endian bytes in src. On a little-endian
// machine with src 8-aligned (a checkpoint read whole, whose writer aligned them) that is src
// itself, reused in place: a million messages' filters are megabytes, read at every open.
// Otherwise it is a copy.
func decodeWords(src []byte) []uint64 {
	n := len(src) / 8
	if littleEndian && n > 0 && uintptr(unsafe.Pointer(&src[0]))%8 == 0 {
		return unsafe.Slice((*uint64)(unsafe.Pointer(&src[0])), n)
	}
	words := make([]uint64, n)
	for j := range words {
		words[j] = binary.LittleEndian.Uint64(src[8*j:])
	}
	return words
}
