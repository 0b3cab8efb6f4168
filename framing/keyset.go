package framing

import (
	"bytes"
	"hash/maphash"
)

// keySet detects a repeated member name in one object: a short list, then an
// open-addressing table of indexes into that list (seeded hashing, reused between objects,
// so wide objects cost no allocation per name and adversarial names cannot force collisions).
type keySet struct {
	keys  [][]byte
	table []int32 // 0: empty; otherwise 1 + index into keys
	seed  maphash.Seed
}

const keySetListMax = 16

func newKeySet() *keySet { return &keySet{seed: maphash.MakeSeed()} }

func (s *keySet) reset() {
	if len(s.keys) > keySetListMax {
		clear(s.table)
	}
	s.keys = s.keys[:0]
}

// release drops every name, so that a kept set holds no memory of the object it checked.
func (s *keySet) release() {
	clear(s.keys[:cap(s.keys)])
	s.keys = s.keys[:0]
	clear(s.table)
}

// add records k and reports false when k was already present.
func (s *keySet) add(k []byte) bool {
	if len(s.keys) < keySetListMax {
		for _, e := range s.keys {
			if bytes.Equal(e, k) {
				return false
			}
		}
		s.keys = append(s.keys, k)
		return true
	}
	if len(s.keys) == keySetListMax || 2*(len(s.keys)+1) > len(s.table) {
		s.rehash(4 * (len(s.keys) + 1))
	}
	mask := len(s.table) - 1
	for i := int(maphash.Bytes(s.seed, k)) & mask; ; i = (i + 1) & mask {
		slot := s.table[i]
		if slot == 0 {
			s.keys = append(s.keys, k)
			s.table[i] = int32(len(s.keys))
			return true
		}
		if bytes.Equal(s.keys[slot-1], k) {
			return false
		}
	}
}

// rehash sizes the table to a power of two of at least n slots and indexes every key.
func (s *keySet) rehash(n int) {
	size := 64
	for size < n {
		size *= 2
	}
	if size > len(s.table) {
		s.table = make([]int32, size)
	} else {
		s.table = s.table[:size]
		clear(s.table)
	}
	mask := size - 1
	for idx, k := range s.keys {
		i := int(maphash.Bytes(s.seed, k)) & mask
		for s.table[i] != 0 {
			i = (i + 1) & mask
		}
		s.table[i] = int32(idx + 1)
	}
}
