package engine

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// toMap lists the live ids, for comparisons.
func (x *idIndex) toMap() map[string]lance.RowAddress {
	out := map[string]lance.RowAddress{}
	for i := range x.ents {
		if e := &x.ents[i]; e.off != gone {
			out[x.key(e)] = e.addr
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
	if x.Len() != 0 || len(x.slots) != 0 {
		t.Fatalf("emptied index: %d live, %d slots", x.Len(), len(x.slots))
	}
	var nilIndex *idIndex
	if _, ok := nilIndex.Get("a"); ok || nilIndex.Len() != 0 {
		t.Fatal("a nil index is not empty")
	}
}

// Ids whose hashes collide share a chain: forcing every id onto one hash exercises it.
func TestIDIndexCollisions(t *testing.T) {
	x := newIDIndex(0)
	h := x.hash("shared")
	// Chain five ids under one slot by hand, as colliding hashes would.
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		off := uint64(len(x.arena))
		x.arena = append(x.arena, id...)
		x.ents = append(x.ents, idEntry{off: off, n: uint32(len(id)), next: x.slots[h], addr: lance.RowAddress(i)})
		x.slots[h] = uint32(len(x.ents))
		x.live++
	}
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		if j := x.find(h, id); j < 0 || x.ents[j].addr != lance.RowAddress(i) {
			t.Fatalf("find(%q) = %d", id, j)
		}
	}
	// Unlink from the middle, the head and the tail of the chain.
	for _, id := range []string{"c", "e", "a"} {
		x.deleteHashed(h, id)
	}
	for _, id := range []string{"b", "d"} {
		if x.find(h, id) < 0 {
			t.Fatalf("%q lost from the chain", id)
		}
	}
	for _, id := range []string{"a", "c", "e"} {
		if x.find(h, id) >= 0 {
			t.Fatalf("%q still chained", id)
		}
	}
	if x.Len() != 2 {
		t.Fatalf("%d live, want 2", x.Len())
	}
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
	if len(x.ents) >= 5000 || len(x.arena) >= 5000*9 {
		t.Fatalf("no compaction: %d entries, %d arena bytes for %d live ids", len(x.ents), len(x.arena), x.Len())
	}
	for i := range 5000 {
		addr, ok := x.Get(fmt.Sprintf("row-%05d", i))
		if ok != (i >= 4000) || ok && addr != lance.RowAddress(i) {
			t.Fatalf("row %d: %d %v after compaction", i, addr, ok)
		}
	}
}
