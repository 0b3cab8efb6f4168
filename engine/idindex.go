package engine

import (
	"hash/maphash"
	"maps"
	"math"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// idIndex maps the live row ids of a table to their row addresses. A writer keeps one per
// table for the life of the process, millions of ids for a large graph, so it holds no pointer
// per entry: the ids live in one byte arena, entries are plain structs, and the hash table maps
// a 64-bit hash to an entry number. The collector then skips it entirely, where a
// map[string]RowAddress would have it trace every key on every cycle (measured: loads on a
// graph of a million rows slowed by a third).
type idIndex struct {
	seed  maphash.Seed
	slots map[uint64]uint32 // hash of an id -> 1 + the first entry with that hash
	ents  []idEntry
	arena []byte
	live  int
}

// idEntry is one id: arena[off:off+n]. Entries with equal hashes chain through next.
type idEntry struct {
	off  uint64
	n    uint32
	next uint32 // 1 + the next entry with the same hash; 0 ends the chain
	addr lance.RowAddress
}

// gone marks an entry whose id was deleted; its arena bytes wait for the next compaction.
const gone = math.MaxUint64

func newIDIndex(capacity int) *idIndex {
	return &idIndex{seed: maphash.MakeSeed(), slots: make(map[uint64]uint32, capacity), ents: make([]idEntry, 0, capacity)}
}

func (x *idIndex) hash(id string) uint64 { return maphash.String(x.seed, id) }

func (x *idIndex) key(e *idEntry) string { return string(x.arena[e.off : e.off+uint64(e.n)]) }

// find returns the entry number of id, or -1.
func (x *idIndex) find(h uint64, id string) int {
	for i := x.slots[h]; i != 0; i = x.ents[i-1].next {
		e := &x.ents[i-1]
		if int(e.n) == len(id) && string(x.arena[e.off:e.off+uint64(e.n)]) == id {
			return int(i - 1)
		}
	}
	return -1
}

// Get returns the row address of id. A nil index holds nothing.
func (x *idIndex) Get(id string) (lance.RowAddress, bool) {
	if x == nil {
		return 0, false
	}
	if i := x.find(x.hash(id), id); i >= 0 {
		return x.ents[i].addr, true
	}
	return 0, false
}

// Set records id at addr, replacing its previous address.
func (x *idIndex) Set(id string, addr lance.RowAddress) {
	h := x.hash(id)
	if i := x.find(h, id); i >= 0 {
		x.ents[i].addr = addr
		return
	}
	if uint64(len(x.ents)) >= math.MaxUint32-1 {
		panic("engine: id index holds 2^32 entries") // a table of four billion rows
	}
	off := uint64(len(x.arena))
	x.arena = append(x.arena, id...)
	x.ents = append(x.ents, idEntry{off: off, n: uint32(len(id)), next: x.slots[h], addr: addr})
	x.slots[h] = uint32(len(x.ents))
	x.live++
}

// Delete drops id (absent is fine).
func (x *idIndex) Delete(id string) { x.deleteHashed(x.hash(id), id) }

func (x *idIndex) deleteHashed(h uint64, id string) {
	prev := uint32(0)
	for i := x.slots[h]; i != 0; prev, i = i, x.ents[i-1].next {
		e := &x.ents[i-1]
		if int(e.n) != len(id) || string(x.arena[e.off:e.off+uint64(e.n)]) != id {
			continue
		}
		if prev == 0 {
			if e.next == 0 {
				delete(x.slots, h)
			} else {
				x.slots[h] = e.next
			}
		} else {
			x.ents[prev-1].next = e.next
		}
		e.off, e.next = gone, 0
		x.live--
		if dead := len(x.ents) - x.live; dead > 1024 && dead > x.live {
			x.compact()
		}
		return
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
	if free := cap(x.ents) - len(x.ents); free < n {
		ents := make([]idEntry, len(x.ents), len(x.ents)+n)
		copy(ents, x.ents)
		x.ents = ents
		slots := make(map[uint64]uint32, len(x.slots)+n)
		maps.Copy(slots, x.slots)
		x.slots = slots
	}
}

// Clone copies the index (a fork starts as exactly its parent's rows).
func (x *idIndex) Clone() *idIndex {
	return &idIndex{seed: x.seed, slots: maps.Clone(x.slots), ents: append([]idEntry(nil), x.ents...),
		arena: append([]byte(nil), x.arena...), live: x.live}
}

// compact rebuilds the index from its live entries, reclaiming deleted ids' bytes.
func (x *idIndex) compact() {
	c := newIDIndex(x.live)
	c.seed = x.seed
	c.arena = make([]byte, 0, len(x.arena))
	for i := range x.ents {
		if e := &x.ents[i]; e.off != gone {
			c.Set(x.key(e), e.addr)
		}
	}
	*x = *c
}
