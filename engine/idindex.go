package engine

import (
	"hash/maphash"
	"math"
	"math/bits"
	"slices"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// idIndex maps the live row ids of a table to their row addresses. A writer keeps one per
// table for the life of the process, millions of ids for a large graph, so it holds no pointer
// per entry (the ids live in one byte arena, entries are plain structs) and the collector skips
// it entirely, where a map[string]RowAddress would have it trace every key on every cycle
// (measured: loads on a graph of a million rows slowed by a third).
//
// The hash table is open addressing with linear probing over one flat slice. Each slot packs
// the low 32 bits of the id's hash with 1 + its entry number, so a probe that meets another
// id's slot is settled by the slot alone, and a lookup at a million ids costs about one cache
// miss for the slot plus the entry it finds (a Go map from hash to entry cost two or three).
type idIndex struct {
	seed  maphash.Seed
	slots []uint64 // hash32<<32 | (1 + entry); 0 is empty; len is a power of two or 0
	ents  []idEntry
	arena []byte
	live  int // entries not gone, each in one slot
}

// idEntry is one id: arena[off:off+n].
type idEntry struct {
	off  uint64
	addr lance.RowAddress
	n    uint32
}

// gone marks an entry whose id was deleted; its arena bytes wait for the next compaction.
const gone = math.MaxUint64

// maxLoad is the occupancy, in eighths, past which the table doubles: short probe runs.
const maxLoad = 6

func newIDIndex(capacity int) *idIndex {
	x := &idIndex{seed: maphash.MakeSeed(), ents: make([]idEntry, 0, capacity)}
	x.resize(capacity)
	return x
}

func (x *idIndex) hash(id string) uint64 { return maphash.String(x.seed, id) }

func (x *idIndex) key(e *idEntry) string { return string(x.arena[e.off : e.off+uint64(e.n)]) }

// resize makes a table for at least n ids within maxLoad and moves the slots over.
func (x *idIndex) resize(n int) {
	size := 0
	if n > 0 {
		size = 1 << bits.Len(uint(n*8/maxLoad))
	}
	old := x.slots
	x.slots = make([]uint64, size)
	mask := uint64(size - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := (s >> 32) & mask
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// find returns the slot holding id and its entry number, or the empty slot where id would go
// and -1.
func (x *idIndex) find(h uint64, id string) (slot uint64, ent int) {
	if len(x.slots) == 0 {
		return 0, -1
	}
	mask := uint64(len(x.slots) - 1)
	tag := h & math.MaxUint32
	for i := tag & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		if s == 0 {
			return i, -1
		}
		if s>>32 != tag {
			continue
		}
		e := &x.ents[s&math.MaxUint32-1]
		if int(e.n) == len(id) && string(x.arena[e.off:e.off+uint64(e.n)]) == id {
			return i, int(s&math.MaxUint32 - 1)
		}
	}
}

// Get returns the row address of id. A nil index holds nothing.
func (x *idIndex) Get(id string) (lance.RowAddress, bool) {
	if x == nil {
		return 0, false
	}
	if _, i := x.find(x.hash(id), id); i >= 0 {
		return x.ents[i].addr, true
	}
	return 0, false
}

// Set records id at addr, replacing its previous address.
func (x *idIndex) Set(id string, addr lance.RowAddress) { x.setHashed(x.hash(id), id, addr) }

func (x *idIndex) setHashed(h uint64, id string, addr lance.RowAddress) {
	slot, i := x.find(h, id)
	if i >= 0 {
		x.ents[i].addr = addr
		return
	}
	if uint64(len(x.ents)) >= math.MaxUint32-1 {
		panic("engine: id index holds 2^32 entries") // a table of four billion rows
	}
	if (x.live+1)*8 > len(x.slots)*maxLoad {
		x.resize(x.live + 1)
		slot, _ = x.find(h, id)
	}
	off := uint64(len(x.arena))
	x.arena = append(x.arena, id...)
	x.ents = append(x.ents, idEntry{off: off, n: uint32(len(id)), addr: addr})
	x.slots[slot] = (h&math.MaxUint32)<<32 | uint64(len(x.ents))
	x.live++
}

// Delete drops id (absent is fine).
func (x *idIndex) Delete(id string) { x.deleteHashed(x.hash(id), id) }

func (x *idIndex) deleteHashed(h uint64, id string) {
	slot, i := x.find(h, id)
	if i < 0 {
		return
	}
	x.vacate(slot)
	x.ents[i].off = gone
	x.live--
	if dead := len(x.ents) - x.live; dead > 1024 && dead > x.live {
		x.compact()
	}
}

// vacate empties a slot and moves later slots of its probe run back over the hole, so every
// id stays reachable from its home slot without tombstones.
func (x *idIndex) vacate(hole uint64) {
	mask := uint64(len(x.slots) - 1)
	x.slots[hole] = 0
	for j := (hole + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		home := (x.slots[j] >> 32) & mask
		// The slot at j may fill the hole if its home is not in (hole, j], cyclically.
		if (j-home)&mask >= (j-hole)&mask {
			x.slots[hole], x.slots[j] = x.slots[j], 0
			hole = j
		}
	}
}

// Readdress gives every live id the address move returns for its current one, when moved says
// the row moved (a compaction rewrote its fragment). Slots hold hashes and entry numbers, not
// addresses, so no slot changes.
func (x *idIndex) Readdress(move func(lance.RowAddress) (lance.RowAddress, bool)) {
	for i := range x.ents {
		if e := &x.ents[i]; e.off != gone {
			if a, moved := move(e.addr); moved {
				e.addr = a
			}
		}
	}
}

// Len is the number of live ids.
func (x *idIndex) Len() int {
	if x == nil {
		return 0
	}
	return x.live
}

// Grow makes room for n more ids without rehashing on the way.
func (x *idIndex) Grow(n int) {
	x.ents = slices.Grow(x.ents, n)
	if (x.live+n)*8 > len(x.slots)*maxLoad {
		x.resize(x.live + n)
	}
}

// Clone copies the index (a fork starts as exactly its parent's rows).
func (x *idIndex) Clone() *idIndex {
	return &idIndex{seed: x.seed, slots: slices.Clone(x.slots), ents: slices.Clone(x.ents),
		arena: slices.Clone(x.arena), live: x.live}
}

// compact drops deleted entries and their arena bytes. Slots keep their hashes, so no id is
// hashed again; the table shrinks to fit the live ids.
func (x *idIndex) compact() {
	size := 0
	for _, s := range x.slots {
		if s != 0 {
			size += int(x.ents[s&math.MaxUint32-1].n)
		}
	}
	ents, arena := make([]idEntry, 0, x.live), make([]byte, 0, size)
	for i, s := range x.slots {
		if s == 0 {
			continue
		}
		e := &x.ents[s&math.MaxUint32-1]
		ents = append(ents, idEntry{off: uint64(len(arena)), n: e.n, addr: e.addr})
		arena = append(arena, x.arena[e.off:e.off+uint64(e.n)]...)
		x.slots[i] = s&^math.MaxUint32 | uint64(len(ents))
	}
	x.ents, x.arena = ents, arena
	x.resize(x.live)
}
