package engine

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// checkSlots verifies the slot table's shape: the directory has 1<<depth entries, each
// segment fills the contiguous run its local depth gives, at the place its ids' tags say;
// every filled slot is reachable from its home; the counts agree; and no segment is past
// maxLoad.
func checkSlots(t *testing.T, x *idIndex) {
	t.Helper()
	tab := &x.slots
	if len(tab.dir) == 0 {
		if x.live != 0 {
			t.Fatalf("no segment for %d live ids", x.live)
		}
		return
	}
	if len(tab.dir) != 1<<tab.depth {
		t.Fatalf("directory of %d entries at depth %d", len(tab.dir), tab.depth)
	}
	live := 0
	for i := 0; i < len(tab.dir); {
		s := tab.dir[i]
		if s.depth > tab.depth {
			t.Fatalf("segment at %d is deeper (%d) than the directory (%d)", i, s.depth, tab.depth)
		}
		run := 1 << (tab.depth - s.depth)
		if i%run != 0 {
			t.Fatalf("segment of depth %d starts at %d, not a multiple of %d", s.depth, i, run)
		}
		for j := i; j < i+run; j++ {
			if tab.dir[j] != s {
				t.Fatalf("directory entries %d..%d are not all one segment", i, i+run-1)
			}
		}
		mask := uint64(len(s.slots) - 1)
		used := 0
		for k, w := range s.slots {
			if w == 0 {
				continue
			}
			used++
			tag := w >> 32
			if got := tab.segment(tag); got != s {
				t.Fatalf("tag %#x sits in the segment at %d, the directory sends it elsewhere", tag, i)
			}
			for h := tag & mask; h != uint64(k); h = (h + 1) & mask {
				if s.slots[h] == 0 {
					t.Fatalf("tag %#x at slot %d is cut off from its home %d by an empty slot", tag, k, tag&mask)
				}
			}
		}
		if used != s.used || used*8 > len(s.slots)*maxLoad {
			t.Fatalf("segment at %d: %d slots filled, counts %d, of %d", i, used, s.used, len(s.slots))
		}
		live += used
		i += run
	}
	if live != x.live {
		t.Fatalf("%d slots filled for %d live ids", live, x.live)
	}
}

// segmentSizes counts the segments of each size.
func segmentSizes(x *idIndex) map[int]int {
	out := map[int]int{}
	x.slots.each(func(s *slotSegment) { out[len(s.slots)]++ })
	return out
}

// A growing index splits one full segment at a time: at 200,000 ids it is many segments of
// segmentSlots under a deeper directory, never one flat table, and stays a map through
// deletions, a clone and its compaction.
func TestIDIndexSplitsSegments(t *testing.T) {
	x := newIDIndex(0)
	want := map[string]lance.RowAddress{}
	for i := range 200_000 {
		id := fmt.Sprintf("s%d", i)
		x.Set(id, lance.RowAddress(i))
		want[id] = lance.RowAddress(i)
		if i%20_000 == 0 {
			checkSlots(t, x)
		}
	}
	checkSlots(t, x)
	sizes := segmentSizes(x)
	if x.slots.depth < 4 || len(sizes) != 1 || sizes[segmentSlots] == 0 {
		t.Fatalf("200,000 ids: directory depth %d, segment sizes %v; want full-size segments only", x.slots.depth, sizes)
	}
	clone, cloned := x.Clone(), maps.Clone(want)
	checkSlots(t, clone)
	for i := range 190_000 {
		id := fmt.Sprintf("s%d", i)
		x.Delete(id)
		delete(want, id)
	}
	checkSlots(t, x)
	if got := x.slots.capacity(); got > 4*segmentSlots {
		t.Fatalf("after the compaction, %d slots for %d ids", got, x.Len())
	}
	holds(t, x, want)
	holds(t, clone, cloned)
}

// Ids whose tags share every directory bit cannot be told apart by a split: their segment
// grows past segmentSlots instead, beside segments that split as usual, and the directory
// does not deepen for them.
func TestIDIndexCrowdedTagsGrowTheirSegment(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := newIDIndex(0)
	want := map[string]uint64{}
	for i := range 40_000 {
		id := fmt.Sprintf("c%d", i)
		h := rng.Uint64()
		if i%2 == 0 {
			h &= 0xFFFF // tag's top 16 bits zero: one directory run at any depth
		}
		x.setHashed(h, id, lance.RowAddress(i))
		want[id] = h
	}
	checkSlots(t, x)
	sizes := segmentSizes(x)
	biggest := 0
	for size := range sizes {
		biggest = max(biggest, size)
	}
	// 20,000 spread ids fill about four segments: a directory much deeper has been split
	// over and over for the crowded ones.
	if biggest <= segmentSlots || x.slots.depth > 6 || sizes[segmentSlots] == 0 {
		t.Fatalf("segment sizes %v at directory depth %d: want the crowded segment past %d beside full-size ones", sizes, x.slots.depth, segmentSlots)
	}
	for id, h := range want {
		if _, _, i := x.find(h, id); i < 0 {
			t.Fatalf("%s lost", id)
		}
	}
	// A rebuild for more ids lays the crowded tags out again.
	x.slots.rebuild(100_000)
	checkSlots(t, x)
	for id, h := range want {
		if _, _, i := x.find(h, id); i < 0 {
			t.Fatalf("%s lost in the rebuild", id)
		}
	}
}

// Grow lays out a table for the count it is given at once: no split while it fills.
func TestIDIndexGrowSizesOnce(t *testing.T) {
	x := newIDIndex(100_000)
	checkSlots(t, x)
	before := len(x.slots.dir)
	segs := map[*slotSegment]bool{}
	x.slots.each(func(s *slotSegment) { segs[s] = true })
	for i := range 100_000 {
		x.Set(fmt.Sprintf("g%d", i), lance.RowAddress(i))
	}
	checkSlots(t, x)
	x.slots.each(func(s *slotSegment) {
		if !segs[s] {
			t.Fatal("a segment was split or grown while the index filled to the size it was made for")
		}
	})
	if len(x.slots.dir) != before {
		t.Fatalf("directory went from %d to %d entries", before, len(x.slots.dir))
	}
}
