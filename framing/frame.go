package framing

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Framing a batch allocates two large things beside the body: the records array and the
// slabs the records' Data members are carved from — for short lines, over twice the body's
// size, all of it pointers. Fresh, that memory is zeroed, then marked and swept by the
// collector, and every pointer written into it pays a write barrier while the collector
// runs, which at a worker's rate is much of the time. A Frame's caller gives that memory
// back when it is done with the records (Release), and the next batch reuses it: at a
// steady rate framing then allocates little beyond its strings, and the collector seldom
// runs. Measured on the graph benches' 1k+1k and 4k+4k batches at GOMAXPROCS 1: 1.3 to 1.7
// times the rate of ParseRetained, which allocates it all anew.

// Frame is a framed batch whose records' memory goes back to the framer when the caller is
// done with it.
type Frame struct {
	Records []Record
	array   []Record   // the records array at its full capacity
	used    int        // how much of array may be non-zero
	slabs   [][]Member // the slabs Records' Data were carved from
	live    bool       // counted in unreleased
}

// unreleased counts the frames handed out and not released.
var unreleased atomic.Int64

// Unreleased is how many frames are held: framed and not released. A caller that gives every
// frame back comes back to where it was once it is idle; one that drops frames (which the
// collector takes, at the cost Frame saves) does not.
func Unreleased() int64 { return unreleased.Load() }

// FrameRetained is ParseRetained, with the records' memory taken from what earlier frames
// gave back. The caller calls Release when it is done with the records.
func FrameRetained(body []byte, lim Limits) (*Frame, error) {
	fr := &Frame{}
	recs, err := parseRetained(body, lim, fr)
	if err != nil {
		fr.Release()
		return nil, err
	}
	fr.Records, fr.live = recs, true
	unreleased.Add(1)
	return fr, nil
}

// Release gives the records array and the member slabs back, for a later frame to reuse. After
// it, nothing may use the frame's Records, their Data slices, nor a Record or Member taken
// from them; what they held stays valid: the strings (Type, From, To, *ID, member names) are
// not in that memory, and the values point into the body. Release is idempotent, and does
// nothing on a nil Frame.
func (fr *Frame) Release() {
	if fr == nil {
		return
	}
	if fr.array != nil {
		// Cleared now, not when reused: a pooled array must not keep old bodies alive.
		clear(fr.array[:fr.used])
		recordPools.put(fr.array)
	}
	for _, s := range fr.slabs {
		clear(s[:cap(s)])
		memberPools.put(s)
	}
	if fr.live {
		unreleased.Add(-1)
	}
	*fr = Frame{}
}

// records returns a zero records array of at least n, pooled for fr (fr nil: fresh, exactly
// n).
func (fr *Frame) records(n int) []Record {
	if fr == nil {
		return make([]Record, 0, n)
	}
	fr.array = recordPools.get(n)
	fr.used = n
	return fr.array
}

// slabList is where frameLines puts the member slabs it takes: nil without fr, which makes it
// allocate them.
func (fr *Frame) slabList(slabs *[][]Member) *[][]Member {
	if fr == nil {
		return nil
	}
	return slabs
}

// keep adds the member slabs one part took to fr's.
func (fr *Frame) keep(slabs [][]Member) {
	if fr != nil {
		fr.slabs = append(fr.slabs, slabs...)
	}
}

// Sizes pooled, as powers of two: a batch's records array rounds up to the next one (from 64
// records to 131,072, 12 MiB; larger ones are allocated and dropped), a member slab of up to
// memberSlab members to the next one from 256.
var (
	recordPools = newSizedPools[Record](6, 17)
	memberPools = newSizedPools[Member](8, 12) // 4,096: memberSlab
)

// sizedPools keeps slices of T by capacity, one pool per power of two from 1<<lo to 1<<hi.
type sizedPools[T any] struct {
	lo, hi int
	pools  []sync.Pool // of *[]T, by capacity's log - lo
}

func newSizedPools[T any](lo, hi int) *sizedPools[T] {
	return &sizedPools[T]{lo: lo, hi: hi, pools: make([]sync.Pool, hi-lo+1)}
}

// sizeLog is the power of two at least n and no smaller than 1<<lo, and whether it is pooled.
func (sp *sizedPools[T]) sizeLog(n int) (int, bool) {
	k := max(sp.lo, bits.Len(uint(max(n, 1)-1)))
	return k, k <= sp.hi
}

// get returns an empty slice with room for n, pooled if one of its size was put back.
func (sp *sizedPools[T]) get(n int) []T {
	k, ok := sp.sizeLog(n)
	if !ok {
		return make([]T, 0, n)
	}
	if p, _ := sp.pools[k-sp.lo].Get().(*[]T); p != nil {
		return (*p)[:0]
	}
	return make([]T, 0, 1<<k)
}

// put keeps s for a later get, if its capacity is one of the sizes pooled; s must be cleared.
func (sp *sizedPools[T]) put(s []T) {
	if k, ok := sp.sizeLog(cap(s)); ok && cap(s) == 1<<k {
		s = s[:0]
		sp.pools[k-sp.lo].Put(&s)
	}
}
