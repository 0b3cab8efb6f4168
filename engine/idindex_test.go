package engine

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// toMap lists the live ids, for comparisons.
func (x *idIndex) toMap() map[string]lance.RowAddress {
	out := map[string]lance.RowAddress{}
	for _, c := range x.ents {
		for i := range c {
			if e := &c[i]; e.off != gone {
				out[x.key(e)] = e.addr
			}
		}
	}
	return out
}

// The index behaves as a map under random inserts, updates and deletes, across compactions,
// clones and growth.
func TestIDIndexIsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := newIDIndex(0)
	want := map[string]lance.RowAddress{}
	var clone *idIndex
	var cloned map[string]lance.RowAddress
	for step := range 200_000 {
		id := fmt.Sprintf("id-%d", rng.IntN(20_000))
		if rng.IntN(50) == 0 {
			id = "" // the empty id is an id like any other
		}
		switch op := rng.IntN(10); {
		case op < 5:
			addr := lance.RowAddress(rng.Uint64())
			x.Set(id, addr)
			want[id] = addr
		case op < 8:
			x.Delete(id)
			delete(want, id)
		default:
			got, ok := x.Get(id)
			if w, wok := want[id]; ok != wok || got != w {
				t.Fatalf("step %d: Get(%q) = %d %v, want %d %v", step, id, got, ok, w, wok)
			}
		}
		if step == 50_000 {
			clone, cloned = x.Clone(), maps.Clone(want)
			x.Grow(100_000)
		}
	}
	if x.Len() != len(want) || !maps.Equal(x.toMap(), want) {
		t.Fatalf("index holds %d ids, want %d (or they differ)", x.Len(), len(want))
	}
	if !maps.Equal(clone.toMap(), cloned) || clone.Len() != len(cloned) {
		t.Fatal("a clone changed with its original")
	}
	for id := range want {
		x.Delete(id)
	}
	if x.Len() != 0 || occupied(x) != 0 {
		t.Fatalf("emptied index: %d live, %d slots occupied", x.Len(), occupied(x))
	}
	var nilIndex *idIndex
	if _, ok := nilIndex.Get("a"); ok || nilIndex.Len() != 0 {
		t.Fatal("a nil index is not empty")
	}
}

// An index past several entry and arena chunks, with an id longer than an arena chunk, stays a
// map through clones written on both sides and a compaction.
func TestIDIndexAcrossChunks(t *testing.T) {
	x := newIDIndex(0)
	want := map[string]lance.RowAddress{}
	set := func(x *idIndex, want map[string]lance.RowAddress, id string, addr lance.RowAddress) {
		x.Set(id, addr)
		want[id] = addr
	}
	long := strings.Repeat("L", arenaChunk+10)
	for i := range 2*entChunk + 100 {
		set(x, want, fmt.Sprintf("%040d", i), lance.RowAddress(i))
		if i == entChunk/2 {
			set(x, want, long, 7)
		}
	}
	if len(x.ents) < 3 || len(x.arena) < 3 {
		t.Fatalf("%d entry chunks, %d arena chunks: the test does not cross chunks", len(x.ents), len(x.arena))
	}
	clone, cloned := x.Clone(), maps.Clone(want)
	for i := range 1000 {
		set(x, want, fmt.Sprintf("x-%d", i), lance.RowAddress(i))
		set(clone, cloned, fmt.Sprintf("c-%d", i), lance.RowAddress(i))
	}
	for id := range want {
		if id != long && id[0] == '0' && id[len(id)-1] != '7' {
			x.Delete(id)
			delete(want, id)
		}
	}
	if x.n >= 2*entChunk {
		t.Fatalf("no compaction: %d entries for %d live ids", x.n, x.Len())
	}
	holds(t, x, want)
	holds(t, clone, cloned)
}

// holds checks that x holds exactly the ids of want at their addresses, as a whole and one
// Get at a time.
func holds(t *testing.T, x *idIndex, want map[string]lance.RowAddress) {
	t.Helper()
	if x.Len() != len(want) || !maps.Equal(x.toMap(), want) {
		t.Fatalf("index holds %d ids, want %d (or they differ)", x.Len(), len(want))
	}
	for id, w := range want {
		if got, ok := x.Get(id); !ok || got != w {
			t.Fatalf("Get(%.20q) = %d %v, want %d", id, got, ok, w)
		}
	}
}

// Ids whose hashes collide, or whose home slots do, share probe runs, some wrapping past the
// end of the table: forcing every id onto four hashes exercises lookups that pass other ids'
// slots, and deletions that move the rest of a run back over the hole.
func TestIDIndexProbeRuns(t *testing.T) {
	hashes := []uint64{0xFFFFFFFF, 0xFFFFFFFE, 0, 1} // homes at both ends of any table
	hashOf := func(k int) uint64 { return hashes[k%len(hashes)] }
	rng := rand.New(rand.NewPCG(3, 4))
	x := newIDIndex(0)
	want := map[int]lance.RowAddress{}
	compactions := 0
	for step := range 20_000 {
		before := x.n
		k := rng.IntN(300)
		id := fmt.Sprintf("id-%d", k)
		if rng.IntN(3) == 0 {
			x.deleteHashed(hashOf(k), id)
			delete(want, k)
			if x.n < before {
				compactions++
			}
		} else {
			addr := lance.RowAddress(rng.Uint64())
			x.setHashed(hashOf(k), id, addr)
			want[k] = addr
		}
		if step%97 == 0 {
			for k := range 300 {
				_, _, i := x.find(hashOf(k), fmt.Sprintf("id-%d", k))
				w, ok := want[k]
				if (i >= 0) != ok || ok && x.ent(i).addr != w {
					t.Fatalf("step %d: id-%d found at entry %d, want %v %d", step, k, i, ok, w)
				}
			}
			if occupied(x) != x.Len() || x.Len() != len(want) {
				t.Fatalf("step %d: %d slots occupied, %d live, want %d", step, occupied(x), x.Len(), len(want))
			}
		}
	}
	if compactions == 0 {
		t.Fatal("no compaction: the runs were not rebuilt from their slots")
	}
}

// occupied counts the index's filled slots, checking each segment's count of them.
func occupied(x *idIndex) int {
	n := 0
	x.slots.each(func(s *slotSegment) {
		used := 0
		for _, w := range s.slots {
			if w != 0 {
				used++
			}
		}
		if used != s.used {
			panic(fmt.Sprintf("a segment counts %d slots used and has %d", s.used, used))
		}
		n += used
	})
	return n
}

// arenaBytes is the bytes the arena holds.
func arenaBytes(x *idIndex) int {
	n := 0
	for _, a := range x.arena {
		n += len(a)
	}
	return n
}

// Deleting most ids compacts the arena and entries down to the live ones.
func TestIDIndexCompacts(t *testing.T) {
	x := newIDIndex(0)
	for i := range 5000 {
		x.Set(fmt.Sprintf("row-%05d", i), lance.RowAddress(i))
	}
	for i := range 4000 {
		x.Delete(fmt.Sprintf("row-%05d", i))
	}
	if arena := arenaBytes(x); x.n >= 5000 || arena >= 5000*9 {
		t.Fatalf("no compaction: %d entries, %d arena bytes for %d live ids", x.n, arena, x.Len())
	}
	for i := range 5000 {
		addr, ok := x.Get(fmt.Sprintf("row-%05d", i))
		if ok != (i >= 4000) || ok && addr != lance.RowAddress(i) {
			t.Fatalf("row %d: %d %v after compaction", i, addr, ok)
		}
	}
}

// BenchmarkIDIndexSet inserts 8,192 new ids per op into an index that grows to ~1M ids, as a
// stream of sustained loads does; BenchmarkIDIndexGet looks them up.
// SetMany and firstPresent behave as Set and Get one id after another: batches with new ids,
// ids already held, duplicates within the batch (the later wins), across the table's growth.
func TestIDIndexBatchCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := newIDIndex(0)
	want := map[string]lance.RowAddress{}
	if x.firstPresent([]string{"a"}) != -1 {
		t.Fatal("an empty index holds an id")
	}
	for step := range 300 {
		n := rng.IntN(3 * touchGroup)
		ids := make([]string, n)
		addrs := make([]lance.RowAddress, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("id-%d", rng.IntN(5_000))
			addrs[i] = lance.RowAddress(rng.Uint64())
		}
		wantFirst := -1
		for i, id := range ids {
			if _, ok := want[id]; ok {
				wantFirst = i
				break
			}
		}
		if got := x.firstPresent(ids); got != wantFirst {
			t.Fatalf("step %d: firstPresent = %d, want %d", step, got, wantFirst)
		}
		x.SetMany(ids, addrs)
		for i, id := range ids {
			want[id] = addrs[i]
		}
		if x.Len() != len(want) || !maps.Equal(x.toMap(), want) {
			t.Fatalf("step %d: index holds %d ids, want %d (or they differ)", step, x.Len(), len(want))
		}
	}
	for id, w := range want {
		if got, ok := x.Get(id); !ok || got != w {
			t.Fatalf("Get(%q) = %d %v, want %d", id, got, ok, w)
		}
	}
}

// The upper bound settles lookups of ids above every id set, and only those: an id below it
// is probed as before, a delete leaves the bound, and clones and compactions keep it.
func TestIDIndexUpperBound(t *testing.T) {
	x := newIDIndex(0)
	ids := make([]string, 3000)
	for i := range ids {
		ids[i] = fmt.Sprintf("k%05d", 2*i) // even numbers only: odd ones are new but below
	}
	x.SetMany(ids, make([]lance.RowAddress, len(ids)))
	if x.hi != "k05998" {
		t.Fatalf("hi = %q after SetMany", x.hi)
	}
	for _, c := range []struct {
		batch []string
		want  int
	}{
		{[]string{"k06000", "k09999"}, -1}, // above: settled by the bound
		{[]string{"k06000", "k00001"}, -1}, // one below, absent: probed
		{[]string{"k06000", "k00002"}, 1},  // one below, present
		{nil, -1},
	} {
		if got := x.firstPresent(c.batch); got != c.want {
			t.Errorf("firstPresent(%v) = %d, want %d", c.batch, got, c.want)
		}
	}
	x.Delete("k05998")
	x.Set("k00001", 7) // below the bound: the bound stays
	if _, ok := x.Get("k05998"); ok || x.hi != "k05998" {
		t.Fatalf("after the delete: hi %q, deleted id found %v", x.hi, ok)
	}
	if a, ok := x.Get("k00001"); !ok || a != 7 {
		t.Fatalf("Get(k00001) = %d %v", a, ok)
	}
	c := x.Clone()
	for i := range 2000 { // compacts: more gone than live
		x.Delete(ids[i])
	}
	for _, y := range []*idIndex{x, c} {
		if _, ok := y.Get("k05996"); !ok || y.hi != "k05998" {
			t.Fatalf("hi %q, k05996 found %v", y.hi, ok)
		}
	}
	x.Set("k07000", 1)
	if x.hi != "k07000" || c.hi != "k05998" {
		t.Fatalf("hi %q and the clone's %q after a Set above", x.hi, c.hi)
	}
}

// The bound is the index's own copy: ids that point into a buffer (a message body) that is
// reused afterwards do not move it.
func TestIDIndexUpperBoundOwnsItsBytes(t *testing.T) {
	buf := []byte("k5k4")
	x := newIDIndex(0)
	x.SetMany([]string{unsafe.String(&buf[0], 2), unsafe.String(&buf[2], 2)}, []lance.RowAddress{1, 2})
	copy(buf, "k0k0")
	if a, ok := x.Get("k5"); !ok || a != 1 {
		t.Fatalf("Get(k5) = %d %v after the ids' buffer was reused", a, ok)
	}
}

// BenchmarkIDIndexSetMany adds 2,000 new ids (a 1k+1k load's table) at a time to a table of
// 1.5 million, the size where every home slot is a cache miss, with SetMany and with Set one
// id after another.
func BenchmarkIDIndexSetMany(b *testing.B) {
	for _, batch := range []bool{false, true} {
		b.Run(map[bool]string{false: "one_by_one", true: "batch"}[batch], func(b *testing.B) {
			x := newIDIndex(0)
			n := 0
			for ; n < 1_500_000; n++ {
				x.Set(fmt.Sprintf("p%d-%d", n/8192, n%8192), lance.RowAddress(n))
			}
			ids := make([]string, 2000)
			addrs := make([]lance.RowAddress, 2000)
			for b.Loop() {
				b.StopTimer()
				for i := range ids {
					ids[i], addrs[i] = fmt.Sprintf("q%d", n), lance.RowAddress(n)
					n++
				}
				b.StartTimer()
				if batch {
					x.SetMany(ids, addrs)
					continue
				}
				for i, id := range ids {
					x.Set(id, addrs[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/id")
		})
	}
}

// BenchmarkIDIndexFirstPresent is a strict insert's check of 8,192 new ids against a table of
// 1.5 million: ids that keep growing at a fixed width (as ULIDs, UUIDv7s and sequence numbers
// do) and, for comparison, new ids in no order.
func BenchmarkIDIndexFirstPresent(b *testing.B) {
	for _, ordered := range []bool{true, false} {
		b.Run(map[bool]string{true: "growing", false: "unordered"}[ordered], func(b *testing.B) {
			x := newIDIndex(0)
			const have = 1_500_000
			ids := make([]string, have)
			for i := range ids {
				ids[i] = fmt.Sprintf("p%09d", i)
			}
			x.SetMany(ids, make([]lance.RowAddress, have))
			// Batches enough that their home slots are not all in the cache from the last round.
			batches := make([][]string, 64)
			for j := range batches {
				batches[j] = make([]string, 8192)
				for i := range batches[j] {
					k := have + j*8192 + i
					if !ordered {
						k = -k // new, and below the table's greatest id
					}
					batches[j][i] = fmt.Sprintf("p%09d", k)
				}
			}
			n := 0
			for b.Loop() {
				batch := batches[n%len(batches)]
				n++
				if i := x.firstPresent(batch); i >= 0 {
					b.Fatalf("%s reported present", batch[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*8192), "ns/id")
		})
	}
}

func BenchmarkIDIndexSet(b *testing.B) {
	x := newIDIndex(0)
	ids := make([]string, 8192)
	n := 0
	for b.Loop() {
		b.StopTimer()
		if x.Len() > 1_000_000 {
			x = newIDIndex(0)
		}
		for i := range ids {
			ids[i] = fmt.Sprintf("p%d", n)
			n++
		}
		b.StartTimer()
		for i, id := range ids {
			x.Set(id, lance.RowAddress(i))
		}
	}
}

func BenchmarkIDIndexGet(b *testing.B) {
	x := newIDIndex(0)
	ids := make([]string, 1_000_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%d", i)
		x.Set(ids[i], lance.RowAddress(i))
	}
	i := 0
	for b.Loop() {
		if _, ok := x.Get(ids[i]); !ok {
			b.Fatal("lost")
		}
		i = (i + 7919) % len(ids)
	}
}

// A lookup compares the id with the arena's bytes in place: no copy of a long id per probe.
func TestIDIndexLookupAllocatesNothing(t *testing.T) {
	x := newIDIndex(0)
	id := strings.Repeat("k", 100)
	x.Set(id, 1)
	if n := testing.AllocsPerRun(100, func() { x.Get(id) }); n != 0 {
		t.Fatalf("Get allocates %v times", n)
	}
}

// addrAt is row off of fragment f.
func addrAt(f, off uint64) lance.RowAddress { return lance.RowAddress(f<<32 | off) }

// moveFragments is a compaction's Remap of fragments lo to hi, each of per rows, into one new
// fragment to.
func moveFragments(lo, hi, per, to uint64) func(lance.RowAddress) (lance.RowAddress, bool) {
	return func(a lance.RowAddress) (lance.RowAddress, bool) {
		if f := a.Fragment(); f >= lo && f <= hi {
			return addrAt(to, (f-lo)*per+uint64(a.Offset())), true
		}
		return a, false
	}
}

// Readdress after a compaction of the newest fragments moves exactly the rows a walk of every
// entry moves, ids given addresses in those fragments by later upserts included, while it
// skips the chunks whose entries all lie elsewhere (and any chunk an index made before the
// spans existed, Clone and compact, keeps them right).
func TestIDIndexReaddressWalksOnlyChunksInTheSpan(t *testing.T) {
	const per = 1000
	x := newIDIndex(0)
	n := 3*entChunk + 100
	for i := range n {
		x.Set(fmt.Sprintf("%08d", i), addrAt(uint64(i/per), uint64(i%per)))
	}
	last := uint64((n - 1) / per)
	lo, hi := last-13, last
	// An id of the first chunk upserted into a fragment the compaction rewrites, one of the
	// last chunk moved out of it, and one in the span deleted.
	x.Set(fmt.Sprintf("%08d", 5), addrAt(lo+2, 999))
	x.Set(fmt.Sprintf("%08d", n-1), addrAt(7, 0))
	x.Delete(fmt.Sprintf("%08d", n-2))
	for _, idx := range []*idIndex{x, x.Clone()} {
		want := idx.Clone()
		move := moveFragments(lo, hi, per, last+1)
		want.Readdress(move, 0, math.MaxUint64)

		// The first chunk's span was widened by the upsert and the last's by the move out;
		// the second chunk's (fragments entChunk/per to 2*entChunk/per) holds none of lo-hi,
		// so its walk is skipped.
		if s := idx.chunks[0].span; s.lo != 0 || s.hi != lo+2 {
			t.Fatalf("first chunk's span %+v, want 0-%d", s, lo+2)
		}
		if s := idx.chunks[1].span; s.lo != entChunk/per || s.hi != (2*entChunk-1)/per || s.hi >= lo {
			t.Fatalf("second chunk's span %+v, want %d-%d", s, entChunk/per, (2*entChunk-1)/per)
		}
		idx.Readdress(move, lo, hi)
		holds(t, idx, want.toMap())
		if got, _ := idx.Get(fmt.Sprintf("%08d", 5)); got != addrAt(last+1, 2*per+999) {
			t.Fatalf("the upserted id of the first chunk is at %x, not moved", got)
		}
		if s := idx.chunks[0].span; s.hi != last+1 {
			t.Fatalf("first chunk's span %+v after the move, want it to reach %d", s, last+1)
		}
	}
	// After the index compacts its entries (deletions past half), the spans are rebuilt.
	for i := range n - 10 {
		x.Delete(fmt.Sprintf("%08d", i))
	}
	want := x.Clone()
	move := moveFragments(last+1, last+1, 100_000, last+2)
	want.Readdress(move, 0, math.MaxUint64)
	x.Readdress(move, last+1, last+1)
	holds(t, x, want.toMap())
}

// BenchmarkIDIndexReaddress: a compaction of the 16 newest fragments of a table of 2 million
// ids in fragments of 4,096 rows, and the same move with every chunk walked, as before the
// spans.
func BenchmarkIDIndexReaddress(b *testing.B) {
	const per, n = 4096, 2_000_000
	x := newIDIndex(n)
	for i := range n {
		x.Set(fmt.Sprintf("p%08d", i), addrAt(uint64(i/per), uint64(i%per)))
	}
	last := uint64((n - 1) / per)
	for _, c := range []struct {
		name   string
		lo, hi uint64
	}{{"span", last - 15, last}, {"whole", 0, math.MaxUint64}} {
		b.Run(c.name, func(b *testing.B) {
			for i := range b.N {
				// Alternate between the two fragment numberings so every round moves rows.
				from, to := last-15, uint64(1<<20)
				if i%2 == 1 {
					from, to = 1<<20, last-15
				}
				lo, hi := c.lo, c.hi
				if i%2 == 1 && c.name == "span" {
					lo, hi = 1<<20, 1<<20
				}
				x.Readdress(moveFragments(from, from+15, per, to), lo, hi)
			}
		})
	}
}

// Clones share their original's memory until one of them writes to it: a family of indexes,
// each cloned from another at random moments and then written (sets, batch sets, deletes,
// compactions of its entries, readdresses) independently, each stays exactly the map of its
// own history.
func TestIDIndexClonesWrittenOnEverySide(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	family := []*idIndex{newIDIndex(0)}
	models := []map[string]lance.RowAddress{{}}
	addr := func() lance.RowAddress { return addrAt(uint64(rng.IntN(64)), uint64(rng.IntN(1<<20))) }
	check := func(step int) {
		for k, x := range family {
			if x.Len() != len(models[k]) || !maps.Equal(x.toMap(), models[k]) {
				t.Fatalf("step %d: index %d holds %d ids, its history %d (or they differ)", step, k, x.Len(), len(models[k]))
			}
			checkSlots(t, x)
		}
	}
	for step := range 80_000 {
		k := rng.IntN(len(family))
		x, want := family[k], models[k]
		id := fmt.Sprintf("id-%d", rng.IntN(200_000))
		switch op := rng.IntN(100); {
		case op < 50:
			a := addr()
			x.Set(id, a)
			want[id] = a
		case op < 75:
			x.Delete(id)
			delete(want, id)
		case op < 85:
			got, ok := x.Get(id)
			if w, wok := want[id]; ok != wok || got != w {
				t.Fatalf("step %d: index %d: Get(%q) = %x %v, want %x %v", step, k, id, got, ok, w, wok)
			}
		case op < 95:
			ids := make([]string, 200)
			addrs := make([]lance.RowAddress, len(ids))
			for j := range ids {
				ids[j], addrs[j] = fmt.Sprintf("id-%d", rng.IntN(200_000)), addr()
				want[ids[j]] = addrs[j]
			}
			x.SetMany(ids, addrs)
		}
		if step%4_000 == 500 { // a compaction rewrote a few fragments
			lo := uint64(rng.IntN(64))
			hi := lo + uint64(rng.IntN(4))
			move := moveFragments(lo, hi, 1<<20, 64+uint64(rng.IntN(8)))
			x.Readdress(move, lo, hi)
			for id, a := range want {
				if b, ok := move(a); ok {
					want[id] = b
				}
			}
		}
		if step%25_000 == 20_000 { // deletions past half compact the entries
			for id := range want {
				if rng.IntN(4) > 0 {
					x.Delete(id)
					delete(want, id)
				}
			}
		}
		if step%7_000 == 5_000 {
			c, cm := x.Clone(), maps.Clone(want)
			if len(family) < 6 {
				family, models = append(family, c), append(models, cm)
			} else {
				r := rng.IntN(len(family))
				family[r], models[r] = c, cm
			}
		}
		if step%40_000 == 0 {
			check(step)
		}
	}
	check(-1)
	most := 0
	for _, x := range family {
		most = max(most, len(x.ents))
	}
	if most < 2 {
		t.Fatalf("no index has more than %d entry chunk: the test does not cross chunks", most)
	}
}

// A clone shares its original's entry chunks and slot segments until one side writes, and the
// write copies only what it touches.
func TestIDIndexCloneSharesUntilWritten(t *testing.T) {
	x := newIDIndex(0)
	for i := range entChunk + 1000 {
		x.Set(fmt.Sprintf("%08d", i), addrAt(uint64(i/1000), uint64(i%1000)))
	}
	c := x.Clone()
	if &c.ents[0][0] != &x.ents[0][0] || c.slots.dir[0] != x.slots.dir[0] {
		t.Fatal("the clone copied its original's entries or slots")
	}
	x.Set(fmt.Sprintf("%08d", 3), addrAt(999, 0)) // an update in the first chunk
	if &c.ents[0][0] == &x.ents[0][0] || &c.ents[1][0] != &x.ents[1][0] {
		t.Fatal("an update copied no chunk, or more than its own")
	}
	if got, _ := c.Get(fmt.Sprintf("%08d", 3)); got != addrAt(0, 3) {
		t.Fatalf("the original's update reached the clone: %x", got)
	}
	c.Set("new", addrAt(5, 5)) // an insert: the clone's own last chunk and slot segment
	if _, ok := x.Get("new"); ok {
		t.Fatal("the clone's insert reached the original")
	}
	shared := 0
	c.slots.each(func(s *slotSegment) {
		if s.owner != c.slots.owner {
			shared++
		}
	})
	if shared == 0 {
		t.Fatal("one insert copied every slot segment of the clone")
	}

	// Each side appends, grows its segments, readdresses or compacts its entries, while the
	// other keeps what it had.
	base := newIDIndex(0)
	for i := range 50_000 {
		base.Set(fmt.Sprintf("%08d", i), addrAt(1, uint64(i)))
	}
	// The two sides write different ids (of different lengths) at different addresses, so a
	// write that lands in the other's memory shows.
	for _, write := range []func(x *idIndex, side string, frag uint64){
		func(x *idIndex, side string, frag uint64) { // appends into the shared last chunks
			for i := range 2_000 {
				x.Set(side+fmt.Sprint(i), addrAt(frag, uint64(i)))
			}
		},
		func(x *idIndex, side string, frag uint64) { // segments grown and split
			for i := range 100_000 {
				x.Set(side+fmt.Sprint(i), addrAt(frag, uint64(i)))
			}
		},
		func(x *idIndex, side string, frag uint64) { // rows moved by a compaction of fragment 1
			x.Readdress(moveFragments(1, 1, 1<<20, 10+frag), 1, 1)
		},
		func(x *idIndex, side string, frag uint64) { // deletions past half: the entries compacted
			for i := range 40_000 {
				x.Delete(fmt.Sprintf("%08d", i+int(frag)))
			}
		},
	} {
		a := base.Clone()
		b := a.Clone()
		wantB := b.toMap()
		write(a, "a-", 2)
		holds(t, b, wantB)
		checkSlots(t, b)
		wantA := a.toMap()
		write(b, "bbb-", 7)
		holds(t, a, wantA)
		checkSlots(t, a)
		checkSlots(t, b)
	}
	holds(t, base, base.toMap())

	// The first write after the clone grows a full segment, or compacts the entries at once
	// (the deletions before the clone left them one short of it): nothing of the other side's
	// may move.
	full := newIDIndex(0)
	for i := 0; ; i++ {
		full.Set(fmt.Sprintf("f%07d", i), addrAt(1, uint64(i)))
		grows := false
		full.slots.each(func(s *slotSegment) { grows = grows || (s.used+1)*8 > len(s.slots)*maxLoad })
		if grows && i > 10_000 {
			break
		}
	}
	atBrink := newIDIndex(0)
	for i := range 20_000 {
		atBrink.Set(fmt.Sprintf("g%07d", i), addrAt(1, uint64(i)))
	}
	for i := range 10_000 {
		atBrink.Delete(fmt.Sprintf("g%07d", i))
	}
	for _, c := range []struct {
		x     *idIndex
		write func(x *idIndex)
	}{
		{full, func(x *idIndex) {
			for i := range 3_000 {
				x.Set(fmt.Sprintf("new-%d", i), addrAt(9, uint64(i)))
			}
		}},
		{atBrink, func(x *idIndex) { x.Delete(fmt.Sprintf("g%07d", 10_000)) }},
	} {
		a := c.x.Clone()
		want := c.x.toMap()
		n := a.n
		c.write(a)
		if c.x == atBrink && a.n >= n {
			t.Fatal("the deletion did not compact the entries")
		}
		holds(t, c.x, want)
		checkSlots(t, c.x)
		checkSlots(t, a)
	}
}

// BenchmarkIDIndexClone: a fork's copy of a table of 2 million ids.
func BenchmarkIDIndexClone(b *testing.B) {
	const n = 2_000_000
	x := newIDIndex(n)
	for i := range n {
		x.Set(fmt.Sprintf("p%08d", i), addrAt(uint64(i/4096), uint64(i%4096)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = x.Clone()
	}
}

// Clone writes nothing a lookup reads: lookups of the original run beside its clones (the race
// detector checks it).
func TestIDIndexCloneBesideLookups(t *testing.T) {
	x := newIDIndex(0)
	for i := range 5_000 {
		x.Set(fmt.Sprintf("%06d", i), addrAt(1, uint64(i)))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20_000 {
			if _, ok := x.Get(fmt.Sprintf("%06d", i%5_000)); !ok {
				t.Errorf("lookup %d lost", i)
				return
			}
		}
	}()
	for range 200 {
		c := x.Clone()
		c.Set("mine", addrAt(2, 0))
	}
	<-done
}
