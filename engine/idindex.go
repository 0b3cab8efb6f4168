package engine

import (
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// idIndex maps the live row ids of a table to their row addresses. A writer keeps one per
// table for the life of the process, millions of ids for a large graph, so it holds no pointer
// per entry (the ids live in one byte arena, entries are plain structs) and the collector skips
// it entirely, where a map[string]RowAddress would have it trace every key on every cycle
// (measured: loads on a graph of a million rows slowed by a third).
//
// The hash table is open addressing with linear probing over segments of slots (slotTable).
// Each slot packs the low 32 bits of the id's hash with 1 + its entry number, so a probe that
// meets another id's slot is settled by the slot alone, and a lookup at a million ids costs
// about one cache miss for the slot plus the entry it finds (a Go map from hash to entry cost
// two or three).
type idIndex struct {
	seed  maphash.Seed
	slots slotTable
	ents  [][]idEntry
	// chunks describe ents chunk by chunk: the fragments its entries' addresses lie in, so
	// that Readdress after a compaction walks only the chunks that may hold a moved row, and
	// whether the chunk is shared with a clone, so that it is copied before a write.
	chunks []entChunkMeta
	n      int // entries appended, gone ones included
	arena  [][]byte
	// arenaShared: the last arena chunk's array is also a clone's, so an append copies it
	// first (the bytes before it are never written again).
	arenaShared bool
	live        int // entries not gone, each in one slot
	// hi bounds the ids held from above: the greatest id ever set (a delete leaves it). Ids
	// a producer mints in increasing order at a fixed width (ULIDs, UUIDv7s, zero-padded
	// sequence numbers and timestamps) all lie above it when they are new, so a lookup of one
	// is settled by a comparison instead of a probe, a cache miss in a table of millions
	// (BenchmarkIDIndexFirstPresent: a strict insert's check of 8,192 new ids against 1.5
	// million took 0.68 ms).
	hi string
}

// Entries and id bytes live in chunks that are never copied once full: appended to one flat
// slice, each growth of a million-id table copied all of it into fresh memory (a tenth of a
// sustained worker's CPU went to those copies). A table's first chunk grows by doubling,
// so the many small tables of a graph stay small. Chunks of a few MiB: at 768 KiB, lookups in
// a million ids took 1.9 times as long (BenchmarkIDIndexGet), at 3 MiB about as long as in one
// slice.
const (
	entChunkBits = 17
	entChunk     = 1 << entChunkBits // entries per chunk: 3 MiB
	arenaChunk   = 1 << 22           // bytes per arena chunk, unless one id is longer
)

// fragSpan bounds the fragments of a chunk's addresses: every entry's address lies in a
// fragment in [lo, hi]. The bounds only widen (an entry given an address elsewhere widens
// them, none narrows them), so they may be loose, never wrong. An empty chunk's span is empty
// (lo > hi).
type fragSpan struct{ lo, hi uint64 }

var emptySpan = fragSpan{lo: math.MaxUint64}

func (s *fragSpan) widen(a lance.RowAddress) {
	f := a.Fragment()
	s.lo, s.hi = min(s.lo, f), max(s.hi, f)
}

// entChunkMeta describes one chunk of idIndex.ents.
type entChunkMeta struct {
	span   fragSpan
	shared bool // the chunk's array is also another index's (Clone): copied before a write
}

// idEntry is one id: the bytes at off (arena chunk<<32 | position) of length n.
type idEntry struct {
	off  uint64
	addr lance.RowAddress
	n    uint32
}

// gone marks an entry whose id was deleted; its arena bytes wait for the next compaction.
const gone = math.MaxUint64

func newIDIndex(capacity int) *idIndex {
	x := &idIndex{seed: maphash.MakeSeed()}
	if capacity > 0 {
		x.ents = [][]idEntry{make([]idEntry, 0, min(capacity, entChunk))}
		x.chunks = []entChunkMeta{{span: emptySpan}}
	}
	x.Grow(capacity)
	return x
}

func (x *idIndex) hash(id string) uint64 { return maphash.String(x.seed, id) }

// ent is entry number i, to read.
func (x *idIndex) ent(i int) *idEntry { return &x.ents[i>>entChunkBits][i&(entChunk-1)] }

// entToWrite is entry number i, to write: its chunk copied first if a clone shares it.
func (x *idIndex) entToWrite(i int) *idEntry {
	x.ownChunk(i >> entChunkBits)
	return x.ent(i)
}

// setAddr gives entry i the address a, its chunk copied first if shared and its span widened
// to cover a (Readdress skips a chunk by its span).
func (x *idIndex) setAddr(i int, a lance.RowAddress) {
	x.entToWrite(i).addr = a
	x.chunks[i>>entChunkBits].span.widen(a)
}

// ownChunk copies entry chunk k if a clone shares it, so that writes to it are this index's.
func (x *idIndex) ownChunk(k int) {
	if x.chunks[k].shared {
		x.ents[k] = slices.Clone(x.ents[k])
		x.chunks[k].shared = false
	}
}

// idBytes is entry e's id, in the arena.
func (x *idIndex) idBytes(e *idEntry) []byte {
	return x.arena[e.off>>32][uint32(e.off) : uint32(e.off)+e.n]
}

func (x *idIndex) key(e *idEntry) string { return string(x.idBytes(e)) }

// push appends an entry for id and returns its number.
func (x *idIndex) push(id string, addr lance.RowAddress) int {
	if len(x.ents) == 0 || len(x.ents[len(x.ents)-1]) == entChunk {
		x.ents = append(x.ents, make([]idEntry, 0, chunkCap(len(x.ents), entChunk)))
		x.chunks = append(x.chunks, entChunkMeta{span: emptySpan})
	}
	last, meta := &x.ents[len(x.ents)-1], &x.chunks[len(x.chunks)-1]
	if len(*last) == cap(*last) || meta.shared { // a shared chunk's spare room is the clone's too
		*last = growChunk(*last, 1, entChunk)
		meta.shared = false
	}
	*last = append(*last, idEntry{off: x.store(id), n: uint32(len(id)), addr: addr})
	meta.span.widen(addr)
	x.n++
	return x.n - 1
}

// store copies id into the arena and returns where it went.
func (x *idIndex) store(id string) uint64 {
	c := len(x.arena) - 1
	full := max(arenaChunk, len(id))
	if c < 0 || len(x.arena[c]) > 0 && len(x.arena[c])+len(id) > arenaChunk {
		x.arena = append(x.arena, make([]byte, 0, chunkCap(len(x.arena), full)))
		c++
	}
	if a := x.arena[c]; len(a)+len(id) > cap(a) || x.arenaShared {
		x.arena[c] = growChunk(a, len(id), full)
		x.arenaShared = false
	}
	off := uint64(c)<<32 | uint64(len(x.arena[c]))
	x.arena[c] = append(x.arena[c], id...)
	return off
}

// chunkCap is the capacity of a new chunk after have others: the first grows (growChunk), so
// that the many small tables of a graph stay small; a later one follows a full one.
func chunkCap(have, full int) int {
	if have == 0 {
		return 0
	}
	return full
}

// growChunk returns c with room for more items: twice its capacity (from 256), up to full.
// Doubling, not append's growth by a quarter, which copied the first chunk of a growing table
// some thirty times over.
func growChunk[T any](c []T, more, full int) []T {
	n := max(min(max(2*cap(c), 256), full), len(c)+more)
	grown := make([]T, len(c), n)
	copy(grown, c)
	return grown
}

// find returns the segment and slot holding id and its entry number, or the empty slot where
// id would go and -1 (a nil segment when the index has none).
func (x *idIndex) find(h uint64, id string) (s *slotSegment, slot uint64, ent int) {
	if len(x.slots.dir) == 0 {
		return nil, 0, -1
	}
	tag := h & math.MaxUint32
	s = x.slots.segment(tag)
	mask := uint64(len(s.slots) - 1)
	for i := tag & mask; ; i = (i + 1) & mask {
		w := s.slots[i]
		if w == 0 {
			return s, i, -1
		}
		if w>>32 != tag {
			continue
		}
		e := x.ent(int(w&math.MaxUint32 - 1))
		if int(e.n) == len(id) && string(x.idBytes(e)) == id { // compared in place, not copied out
			return s, i, int(w&math.MaxUint32 - 1)
		}
	}
}

// Get returns the row address of id. A nil index holds nothing.
func (x *idIndex) Get(id string) (lance.RowAddress, bool) {
	if x == nil || id > x.hi {
		return 0, false
	}
	if _, _, i := x.find(x.hash(id), id); i >= 0 {
		return x.ent(i).addr, true
	}
	return 0, false
}

// Set records id at addr, replacing its previous address.
func (x *idIndex) Set(id string, addr lance.RowAddress) {
	x.raise(id)
	x.setHashed(x.hash(id), id, addr)
}

// raise makes hi at least id (a copy: ids may point into a message body that is reused).
func (x *idIndex) raise(id string) {
	if id > x.hi {
		x.hi = strings.Clone(id)
	}
}

func (x *idIndex) setHashed(h uint64, id string, addr lance.RowAddress) {
	s, slot, i := x.find(h, id)
	if i >= 0 {
		x.setAddr(i, addr)
		return
	}
	if uint64(x.n) >= math.MaxUint32-1 {
		panic("engine: id index holds 2^32 entries") // a table of four billion rows
	}
	if s == nil || (s.used+1)*8 > len(s.slots)*maxLoad {
		x.slots.grow(h & math.MaxUint32)
		s, slot, _ = x.find(h, id)
	}
	s = x.slots.own(s, h&math.MaxUint32)
	s.slots[slot] = (h&math.MaxUint32)<<32 | uint64(x.push(id, addr)+1)
	s.used++
	x.live++
}

// Delete drops id (absent is fine).
func (x *idIndex) Delete(id string) { x.deleteHashed(x.hash(id), id) }

func (x *idIndex) deleteHashed(h uint64, id string) {
	s, slot, i := x.find(h, id)
	if i < 0 {
		return
	}
	x.slots.own(s, h&math.MaxUint32).vacate(slot)
	x.entToWrite(i).off = gone
	x.live--
	if dead := x.n - x.live; dead > 1024 && dead > x.live {
		x.compact()
	}
}

// Readdress gives every live id the address move returns for its current one, when moved says
// the row moved (a compaction rewrote its fragment). move moves rows of fragments lo to hi
// only: the chunks whose entries all lie outside them are skipped. That is most of them, as a
// compaction rewrites the newest fragments and entries are appended as rows are loaded; it
// walked every entry of the table, in the writer's turn, at every compaction (about 15 ms a
// million ids here, and growing with the table). Slots hold hashes and entry numbers, not
// addresses, so no slot changes.
func (x *idIndex) Readdress(move func(lance.RowAddress) (lance.RowAddress, bool), lo, hi uint64) {
	for k := range x.ents {
		if s := x.chunks[k].span; s.hi < lo || s.lo > hi {
			continue
		}
		for i := range x.ents[k] {
			e := &x.ents[k][i]
			if f := e.addr.Fragment(); f < lo || f > hi || e.off == gone {
				continue
			}
			if a, moved := move(e.addr); moved {
				x.setAddr(k<<entChunkBits|i, a)
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
	if (x.live+n)*8 > x.slots.capacity()*maxLoad {
		x.slots.rebuild(x.live + n)
	}
}

// Clone is a copy of the index (a fork starts as exactly its parent's rows) that shares its
// memory: entry chunks, arena chunks and slot segments are copied only when the index or the
// clone first writes to one, so a fork of a table of millions of ids costs a few slices, not
// a copy of them (BenchmarkIDIndexClone: 2 million ids, 90-110 ms and 100 MB copied before).
// Both sides append to a shared last chunk by copying it first (an append in place would
// write the other's spare room), and arena bytes are never written in place. Clone writes
// only what writers read (the sharing marks), never what a lookup reads, so lookups of the
// original may run beside it.
func (x *idIndex) Clone() *idIndex {
	for k := range x.chunks {
		x.chunks[k].shared = true
	}
	x.arenaShared = len(x.arena) > 0
	return &idIndex{seed: x.seed, slots: x.slots.clone(), ents: slices.Clone(x.ents), chunks: slices.Clone(x.chunks),
		arena: slices.Clone(x.arena), arenaShared: x.arenaShared, n: x.n, live: x.live, hi: x.hi}
}

// compact drops deleted entries and their arena bytes. Slots keep their hashes, so no id is
// hashed again; the table is laid out anew, fit to the live ids, from the renumbered slots
// (the old segments are only read, so a clone may share them).
func (x *idIndex) compact() {
	old := *x
	x.ents, x.chunks, x.arena, x.arenaShared, x.n = nil, nil, nil, false, 0
	words := make([]uint64, 0, x.live)
	x.slots.each(func(s *slotSegment) {
		for _, w := range s.slots {
			if w == 0 {
				continue
			}
			e := old.ent(int(w&math.MaxUint32 - 1))
			words = append(words, w&^math.MaxUint32|uint64(x.push(old.key(e), e.addr)+1))
		}
	})
	x.slots.layout(words, x.live)
}

// Loads set and look up thousands of ids at once, and in a table of a million ids each one's
// home slot is a cache miss: one at a time, a load waited for them one after another
// (BenchmarkIDIndexSetMany: 290 to 400 ns an id at 1.5 million, where the table fits in no
// cache). The batch calls below hash a group of ids and read their home slots first, loads
// that do not depend on each other, which the CPU overlaps; the probes after them hit the
// cache: 130 to 175 ns an id.
const touchGroup = 16

// SetMany is Set of each ids[i] at addrs[i], in order (a later duplicate wins).
func (x *idIndex) SetMany(ids []string, addrs []lance.RowAddress) {
	if len(ids) > 0 {
		x.raise(slices.Max(ids))
	}
	x.inGroups(ids, func(lo int, hs []uint64) bool {
		for j, h := range hs {
			x.setHashed(h, ids[lo+j], addrs[lo+j])
		}
		return true
	})
}

// firstPresent is the position in ids of the first one the index holds, or -1.
func (x *idIndex) firstPresent(ids []string) int {
	if x == nil || x.live == 0 || len(ids) == 0 || slices.Min(ids) > x.hi {
		return -1
	}
	at := -1
	x.inGroups(ids, func(lo int, hs []uint64) bool {
		for j, h := range hs {
			if _, _, i := x.find(h, ids[lo+j]); i >= 0 {
				at = lo + j
				return false
			}
		}
		return true
	})
	return at
}

// inGroups calls fn with each group of up to touchGroup ids, from ids[lo], and their hashes,
// their home slots read first; fn returning false stops it.
func (x *idIndex) inGroups(ids []string, fn func(lo int, hs []uint64) bool) {
	var hs [touchGroup]uint64
	for lo := 0; lo < len(ids); lo += touchGroup {
		group := ids[lo:min(lo+touchGroup, len(ids))]
		for j, id := range group {
			hs[j] = x.hash(id)
		}
		x.touch(hs[:len(group)])
		if !fn(lo, hs[:len(group)]) {
			return
		}
	}
}

// touch reads the home slot of each hash. The reads must not be optimised away: their sum
// decides a branch (practically never taken), which writes to an atomic so that concurrent
// readers of one index stay race-free.
func (x *idIndex) touch(hs []uint64) {
	if len(x.slots.dir) == 0 {
		return
	}
	var sum uint64
	for _, h := range hs {
		tag := h & math.MaxUint32
		s := x.slots.segment(tag)
		sum += s.slots[tag&uint64(len(s.slots)-1)]
	}
	if sum == math.MaxUint64 {
		touchSink.Add(1)
	}
}

var touchSink atomic.Uint64
