package engine

import (
	"math/bits"
	"slices"
	"sync/atomic"
)

// slotTable is the idIndex's hash table: segments of slots under a directory (extendible
// hashing), each segment open addressing with linear probing inside it. A segment that fills
// splits alone, handing half its ids to one new segment of its size, instead of the whole
// table doubling: one flat slice, doubled at a million ids, copied 16 MiB of slots into
// memory the process had never touched, in a loop inside a commit. On this kind of virtual
// machine a first touch costs about 12 µs a page, and the doublings of two growing tables
// were a quarter of a sustained worker's CPU (an -only e2e CPU profile of `make bench`'s
// sustained line); a split moves one segment's slots within the cache, and a growing table
// touches each page of its slots once.
//
// A slot's upper 32 bits are its id's tag (the low 32 bits of the id's hash): the directory
// is indexed by the tag's top depth bits, and a segment's home slot for an id is the tag's low
// bits, so a split or a resize never hashes an id again.
type slotTable struct {
	dir     []*slotSegment // 1<<depth entries; each segment fills a contiguous run of them
	depth   uint           // bits of the tag the directory is indexed by
	scratch []uint64       // a split's staying ids, kept for the next split
	// owner marks the segments this table may write in place (slotSegment.owner). A clone
	// shares every segment with its original and gives both tables new marks, so that either
	// copies a segment before its first write to it (own).
	owner uint64
}

// slotSegment is one open-addressing table.
type slotSegment struct {
	slots []uint64 // tag<<32 | (1 + entry); 0 is empty; len a power of two
	used  int      // slots filled
	depth uint     // top bits of the tag every id in it shares (its directory run is 1<<(dir depth - depth) long)
	owner uint64   // the slotTable.owner of the one table that may write it; others copy it first
}

// slotOwners hands out slotTable.owner marks; 0 is the mark of a table never cloned.
var slotOwners atomic.Uint64

const (
	// maxLoad is the occupancy, in eighths, past which a segment grows or splits: short
	// probe runs.
	maxLoad = 6
	// segmentSlots is the size a segment grows to before it splits: 64 KiB, a split moves
	// its slots within the L2 cache.
	segmentSlots = 1 << 13
	// maxDirDepth bounds the directory (64 Ki segments, about 400 million ids in full
	// segments). Past it, or when a split would leave most of its ids on one side, a segment
	// grows instead of splitting, as the flat table did.
	maxDirDepth     = 16
	minSegmentSlots = 8
)

// segment is the segment holding the ids of tag.
func (t *slotTable) segment(tag uint64) *slotSegment {
	return t.dir[tag>>(32-t.depth)]
}

// capacity is the slots of every segment.
func (t *slotTable) capacity() int {
	n := 0
	t.each(func(s *slotSegment) { n += len(s.slots) })
	return n
}

// each calls fn with every segment once.
func (t *slotTable) each(fn func(s *slotSegment)) {
	for i, s := range t.dir {
		if i == 0 || s != t.dir[i-1] { // a segment's directory entries are contiguous
			fn(s)
		}
	}
}

// grow makes room for one more id of tag: a table with no segment gets its first; a small
// segment, or one at the directory's bound, doubles; a full-size one splits.
func (t *slotTable) grow(tag uint64) {
	if len(t.dir) == 0 {
		t.dir, t.depth = []*slotSegment{{slots: make([]uint64, minSegmentSlots), owner: t.owner}}, 0
		return
	}
	s := t.own(t.segment(tag), tag)
	if len(s.slots) < segmentSlots || s.depth >= maxDirDepth || !s.splitsWell() {
		s.resize(2 * len(s.slots))
		return
	}
	t.split(s, tag)
}

// splitsWell says a split of s would leave each side at least an eighth of its ids. Tags that
// crowd one side (ids hashed alike, or crowding tags beside a few others) would otherwise be
// split off one by one, each split doubling the directory for a handful of ids.
func (s *slotSegment) splitsWell() bool {
	bit := 31 - s.depth
	ones := 0
	for _, w := range s.slots {
		if w != 0 {
			ones += int((w >> 32) >> bit & 1)
		}
	}
	return min(ones, s.used-ones)*8 >= s.used
}

// split divides s (the segment of tag) into itself and one new segment of its size, one bit
// deeper, its ids going by their next tag bit. s keeps the ids whose bit is 0, laid out again
// in its own slots (emptied, in the cache), so a split allocates one segment, not two: the
// memory of a growing table is touched once.
func (t *slotTable) split(s *slotSegment, tag uint64) {
	if s.depth == t.depth {
		dir := make([]*slotSegment, 2*len(t.dir))
		for i, d := range t.dir {
			dir[2*i], dir[2*i+1] = d, d
		}
		t.dir, t.depth = dir, t.depth+1
	}
	bit := 31 - s.depth
	high := &slotSegment{slots: make([]uint64, len(s.slots)), depth: s.depth + 1, owner: t.owner}
	low := t.scratch[:0]
	for _, w := range s.slots {
		switch {
		case w == 0:
		case (w>>32)>>bit&1 == 1:
			high.put(w)
		default:
			low = append(low, w)
		}
	}
	t.scratch = low[:0]
	clear(s.slots)
	s.used, s.depth = 0, s.depth+1
	for _, w := range low {
		s.put(w)
	}
	// s's directory run, the entries whose top (old) s.depth bits are tag's: its second half
	// goes to high.
	run := 1 << (t.depth - s.depth + 1)
	first := int(tag>>(32-t.depth)) &^ (run - 1)
	for i := run / 2; i < run; i++ {
		t.dir[first+i] = high
	}
}

// put places slot word w at its home or the first empty slot after it.
func (s *slotSegment) put(w uint64) {
	mask := uint64(len(s.slots) - 1)
	i := (w >> 32) & mask
	for s.slots[i] != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = w
	s.used++
}

// resize moves s's slots into a table of size slots.
func (s *slotSegment) resize(size int) {
	old := s.slots
	s.slots, s.used = make([]uint64, size), 0
	for _, w := range old {
		if w != 0 {
			s.put(w)
		}
	}
}

// vacate empties a slot and moves later slots of its probe run back over the hole, so every
// id stays reachable from its home slot without tombstones.
func (s *slotSegment) vacate(hole uint64) {
	mask := uint64(len(s.slots) - 1)
	s.slots[hole] = 0
	s.used--
	for j := (hole + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		home := (s.slots[j] >> 32) & mask
		// The slot at j may fill the hole if its home is not in (hole, j], cyclically.
		if (j-home)&mask >= (j-hole)&mask {
			s.slots[hole], s.slots[j] = s.slots[j], 0
			hole = j
		}
	}
}

// rebuild lays the table out anew for n ids within maxLoad, its slots moved over: a table
// sized once for a known count (a table opened, a commit larger than the index) instead of
// grown split by split. n of 0 empties it.
func (t *slotTable) rebuild(n int) {
	var words []uint64
	if len(t.dir) > 0 {
		words = make([]uint64, 0, n)
		t.each(func(s *slotSegment) {
			for _, w := range s.slots {
				if w != 0 {
					words = append(words, w)
				}
			}
		})
	}
	t.layout(words, n)
}

// layout replaces the table with one sized for n ids (at least len(words)) holding words. It
// writes only new segments, so a table may be laid out over segments a clone shares.
func (t *slotTable) layout(words []uint64, n int) {
	n = max(n, len(words))
	if n == 0 {
		*t = slotTable{owner: t.owner}
		return
	}
	size := max(1<<bits.Len(uint(n*8/maxLoad)), minSegmentSlots)
	depth := uint(0)
	for size > segmentSlots && depth < maxDirDepth {
		size, depth = size/2, depth+1
	}
	dir := make([]*slotSegment, 1<<depth)
	for i := range dir {
		dir[i] = &slotSegment{slots: make([]uint64, size), depth: depth, owner: t.owner}
	}
	*t = slotTable{dir: dir, depth: depth, owner: t.owner}
	for _, w := range words {
		s := t.segment(w >> 32)
		if (s.used+1)*8 > len(s.slots)*maxLoad { // tags crowded into one segment
			s.resize(2 * len(s.slots))
		}
		s.put(w)
	}
}

// clone is a copy of the table that shares its segments: the two tables get new owner marks,
// so each copies a segment the first time it writes to it (own). A fork of a table of
// millions of ids thus costs its directory, not its slots.
func (t *slotTable) clone() slotTable {
	t.owner = slotOwners.Add(1)
	return slotTable{dir: slices.Clone(t.dir), depth: t.depth, owner: slotOwners.Add(1)}
}

// own returns s (the segment of tag) ready to be written by t: s itself when t owns it, else
// a copy of it that t's directory entries for s now point to.
func (t *slotTable) own(s *slotSegment, tag uint64) *slotSegment {
	if s.owner == t.owner {
		return s
	}
	c := &slotSegment{slots: slices.Clone(s.slots), used: s.used, depth: s.depth, owner: t.owner}
	run := 1 << (t.depth - s.depth)
	first := int(tag>>(32-t.depth)) &^ (run - 1)
	for i := first; i < first+run; i++ {
		t.dir[i] = c
	}
	return c
}
