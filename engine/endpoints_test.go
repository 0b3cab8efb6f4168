package engine

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// toMaps is what the index says: every live edge and every source's out-degree (sources
// with none left out), read through each, eachSource and the lookups.
func (e *endpoints) toMaps() (map[string]edgeEnds, map[string]int) {
	edges, deg := map[string]edgeEnds{}, map[string]int{}
	e.each(func(id string, x edgeEnds) bool {
		if _, dup := edges[id]; dup {
			panic("each gave " + id + " twice")
		}
		if y, ok := e.edge(id); !ok || y != x {
			panic("each and edge disagree on " + id)
		}
		edges[id] = x
		return true
	})
	e.eachSource(func(src string) {
		if _, dup := deg[src]; dup {
			panic("eachSource gave " + src + " twice")
		}
		deg[src] = e.outDegree(src)
	})
	return edges, deg
}

// depth is how many layers the index walks.
func (e *endpoints) depth() int {
	n := 0
	for l := e.top; l != nil; l = l.below {
		n++
	}
	return n
}

// endModel is the plain maps the layered index must always equal.
type endModel map[string]edgeEnds

func (m endModel) degrees() map[string]int {
	deg := map[string]int{}
	for _, x := range m {
		deg[x.src]++
	}
	return deg
}

func assertEndsEqual(t *testing.T, what string, e *endpoints, m endModel) {
	t.Helper()
	edges, deg := e.toMaps()
	if !maps.Equal(edges, map[string]edgeEnds(m)) {
		t.Fatalf("%s: the index holds %d edges, the model %d (or other endpoints)", what, len(edges), len(m))
	}
	if want := m.degrees(); !maps.Equal(deg, want) {
		t.Fatalf("%s: out-degrees %v, want %v", what, deg, want)
	}
	for id, x := range m {
		if src, ok := e.srcOf(id); !ok || src != x.src {
			t.Fatalf("%s: srcOf(%s) = %q, %v; want %q", what, id, src, ok, x.src)
		}
	}
	if _, ok := e.srcOf("never-written"); ok {
		t.Fatalf("%s: an id never written is found", what)
	}
}

// A fork shares every layer: each side's writes (sets that move an edge to another source,
// removals, sets of removed ids) stay its own, whichever side writes first, over chains of
// forks of forks, through the merges and flattenings that keep the stack short.
func TestEndpointsClonesWrittenOnEverySide(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { endpointsClonesWritten(t, seed) })
	}
}

func endpointsClonesWritten(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(7, 31+seed))
	type side struct {
		e *endpoints
		m endModel
	}
	first := side{newEndpoints(), endModel{}}
	for i := range 400 {
		id, src := fmt.Sprintf("e%d", i), fmt.Sprintf("n%d", i%37)
		first.e.set(id, src, "d")
		first.m[id] = edgeEnds{src: src, dst: "d"}
	}
	sides := []side{first}
	maxDepth := 0
	for step := range 3000 {
		i := rng.IntN(len(sides))
		s := &sides[i]
		switch op := rng.IntN(20); {
		case op == 0 && len(sides) < 12:
			sides = append(sides, side{s.e.clone(), maps.Clone(s.m)})
		case op == 1 && len(sides) > 2:
			sides = append(sides[:i], sides[i+1:]...) // a branch deleted: its index dropped
		case op < 8:
			id := fmt.Sprintf("e%d", rng.IntN(600))
			s.e.remove(id)
			delete(s.m, id)
		default:
			id := fmt.Sprintf("e%d", rng.IntN(600))
			x := edgeEnds{src: fmt.Sprintf("n%d", rng.IntN(50)), dst: fmt.Sprintf("d%d", rng.IntN(5))}
			s.e.set(id, x.src, x.dst)
			s.m[id] = x
		}
		if step%50 == 0 {
			for k, s := range sides {
				assertEndsEqual(t, fmt.Sprintf("step %d, side %d", step, k), s.e, s.m)
				maxDepth = max(maxDepth, s.e.depth())
			}
		}
	}
	for k, s := range sides {
		assertEndsEqual(t, fmt.Sprintf("end, side %d", k), s.e, s.m)
	}
	if maxDepth > maxEndUppers+2 {
		t.Fatalf("an index walked %d layers, want at most %d", maxDepth, maxEndUppers+2)
	}
}

// A clone costs no copy of the edges, and a side's first write after it copies nothing
// either: it starts a layer of its own. A long chain of forks, each written, stays short.
func TestEndpointsCloneSharesUntilWritten(t *testing.T) {
	e := newEndpoints()
	for i := range 10_000 {
		e.set(fmt.Sprintf("e%d", i), fmt.Sprintf("n%d", i%100), "d")
	}
	base := e.top
	c := e.clone()
	if c.top != base || e.top != base {
		t.Fatal("a clone made a layer")
	}
	c.set("e1", "moved", "d")
	if e.top != base || c.top.below != base || len(c.top.ends) != 1 {
		t.Fatalf("the clone's first write: parent top moved %v, clone's layer over the base %v, %d edges in it",
			e.top != base, c.top.below == base, len(c.top.ends))
	}
	if src, _ := e.srcOf("e1"); src != "n1" || e.outDegree("moved") != 0 || c.outDegree("moved") != 1 || c.outDegree("n1") != 99 {
		t.Fatal("the clone's write reached the parent, or its own degrees are wrong")
	}
	// A pipeline: fork, write a little on the branch and on main, again and again.
	for round := range 100 {
		b := e.clone()
		b.set(fmt.Sprintf("b%d", round), "x", "d")
		e.set(fmt.Sprintf("m%d", round), "y", "d")
		if d := e.depth(); d > maxEndUppers+2 {
			t.Fatalf("round %d: main walks %d layers", round, d)
		}
	}
	if e.outDegree("y") != 100 || e.outDegree("x") != 0 {
		t.Fatal("main's degrees after the forks")
	}
}

func BenchmarkEndpointsClone(b *testing.B) {
	e := newEndpoints()
	for i := range 1_000_000 {
		e.set(fmt.Sprintf("edge-%07d", i), fmt.Sprintf("node-%06d", i%200_000), fmt.Sprintf("node-%06d", (i+1)%200_000))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := e.clone()
		c.set(fmt.Sprintf("new-%d", i), "node-000001", "node-000002") // the branch's first write
	}
}
