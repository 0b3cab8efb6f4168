package engine

// endpoints index an edge table's live edges by id (their source and destination) and count
// them per source node. Only the checks that need them build them (cardinality, a merge's
// orphan and cardinality checks, an overwrite's retained edges), so an edge type without them
// pays nothing per load.
//
// A branch's first write on a table starts from its parent's endpoints (forBranch). Copying
// three maps of a million edges took a fork as long as the load after it, so the index is a
// stack of layers instead: a clone shares every layer, and each side's next write starts a
// layer of its own above them (the bottom layer holds edges and out-degrees, a layer above
// holds the edges set since, the ids removed since and the out-degree changes). Lookups walk
// down the stack, which the rules in writable keep short. Clone and the layers a clone shares
// are written by nothing but the shared mark, which no read looks at: a layer is written only
// while it is the top of exactly one index.
type endpoints struct {
	top *endLayer
}

type edgeEnds struct{ src, dst string }

type endLayer struct {
	ends  map[string]edgeEnds // edges set at this layer
	gone  map[string]struct{} // removed at this layer, alive below it (never in the bottom layer)
	deg   map[string]int      // out-degree per source (bottom layer), its change (above)
	below *endLayer           // nil: the bottom layer
	// shared: a clone holds this layer too (or it lies below a top); the next write of
	// either index starts a layer above it.
	shared bool
}

// maxEndUppers bounds the layers above the bottom one that an index keeps below its top:
// past it the upper layers are merged into one (see writable).
const maxEndUppers = 3

func newEndpoints() *endpoints {
	return &endpoints{top: newEndLayer(nil, 0)}
}

func newEndLayer(below *endLayer, size int) *endLayer {
	l := &endLayer{ends: make(map[string]edgeEnds, size), deg: map[string]int{}, below: below}
	if below != nil {
		l.gone = map[string]struct{}{}
	}
	return l
}

// size is how many ids a layer records.
func (l *endLayer) size() int { return len(l.ends) + len(l.gone) }

// edge returns the live edge id's endpoints.
func (e *endpoints) edge(id string) (edgeEnds, bool) { return e.top.edge(id) }

func (l *endLayer) edge(id string) (edgeEnds, bool) {
	for ; l != nil; l = l.below {
		if x, ok := l.ends[id]; ok {
			return x, true
		}
		if _, ok := l.gone[id]; ok {
			return edgeEnds{}, false
		}
	}
	return edgeEnds{}, false
}

// srcOf returns the live edge id's source.
func (e *endpoints) srcOf(id string) (string, bool) {
	x, ok := e.edge(id)
	return x.src, ok
}

// outDegree is how many live edges leave src.
func (e *endpoints) outDegree(src string) int {
	n := 0
	for l := e.top; l != nil; l = l.below {
		n += l.deg[src]
	}
	return n
}

// each calls fn with every live edge, in no particular order, until it returns false.
func (e *endpoints) each(fn func(id string, x edgeEnds) bool) {
	var above []*endLayer
	for l := e.top; l != nil; l = l.below {
	edges:
		for id, x := range l.ends {
			for _, a := range above {
				if _, ok := a.ends[id]; ok {
					continue edges
				}
				if _, ok := a.gone[id]; ok {
					continue edges
				}
			}
			if !fn(id, x) {
				return
			}
		}
		above = append(above, l)
	}
}

// eachSource calls fn with every source that has live edges, in no particular order.
func (e *endpoints) eachSource(fn func(src string)) {
	seen := map[string]bool{} // the sources of the upper layers, few
	for l := e.top; l != nil; l = l.below {
		for src := range l.deg {
			if seen[src] {
				continue
			}
			if l.below != nil {
				seen[src] = true
			}
			if e.outDegree(src) > 0 {
				fn(src)
			}
		}
	}
}

// set records a live edge, replacing the id's old one.
func (e *endpoints) set(id, src, dst string) {
	old, had := e.edge(id)
	l := e.writable()
	if had {
		l.addDeg(old.src, -1)
	}
	l.ends[id] = edgeEnds{src: src, dst: dst}
	if l.gone != nil {
		delete(l.gone, id)
	}
	l.addDeg(src, 1)
}

// remove drops the id's live edge, if any.
func (e *endpoints) remove(id string) {
	old, had := e.edge(id)
	if !had {
		return
	}
	l := e.writable()
	l.addDeg(old.src, -1)
	delete(l.ends, id)
	if l.below != nil {
		if _, below := l.below.edge(id); below {
			l.gone[id] = struct{}{}
		}
	}
}

func (l *endLayer) addDeg(src string, d int) {
	if n := l.deg[src] + d; n != 0 {
		l.deg[src] = n
	} else {
		delete(l.deg, src)
	}
}

// clone returns an index of exactly these edges that shares every layer with e; whichever
// of the two writes next starts a layer above them.
func (e *endpoints) clone() *endpoints {
	if e == nil {
		return nil
	}
	e.top.shared = true
	return &endpoints{top: e.top}
}

// writable returns the layer e writes to: its top, unless a clone shares it, in which case a
// new top goes above it. Before that, the shared stack is kept short, without writing a layer
// another index may read (each rule builds new layers for e alone):
//   - once the upper layers together record more than half as many ids as the bottom one, the
//     whole stack is flattened into a new bottom layer: O(edges), paid for by that many writes;
//   - otherwise, once more than maxEndUppers upper layers are stacked, they are merged into one
//     above the bottom: O(the ids they record), at most half the bottom's.
func (e *endpoints) writable() *endLayer {
	if !e.top.shared {
		return e.top
	}
	below := e.top
	uppers, upperIDs := 0, 0
	bottom := below
	for ; bottom.below != nil; bottom = bottom.below {
		uppers++
		upperIDs += bottom.size()
	}
	switch {
	case uppers > 0 && 2*upperIDs > len(bottom.ends):
		below = flattenEnds(e)
	case uppers > maxEndUppers:
		below = mergeUppers(below, bottom)
	}
	e.top = newEndLayer(below, 0)
	return e.top
}

// flattenEnds is one bottom layer holding e's live edges and their out-degrees.
func flattenEnds(e *endpoints) *endLayer {
	n := 0 // a bound on the live edges: an id set in several layers counts in each
	for l := e.top; l != nil; l = l.below {
		n += len(l.ends)
	}
	l := newEndLayer(nil, n)
	e.each(func(id string, x edgeEnds) bool {
		l.ends[id] = x
		l.deg[x.src]++
		return true
	})
	l.shared = true
	return l
}

// mergeUppers is one layer above bottom standing for every layer from top down to it.
func mergeUppers(top, bottom *endLayer) *endLayer {
	m := newEndLayer(bottom, 0)
	for l := top; l != bottom; l = l.below {
		for id := range l.ends {
			m.record(top, bottom, id)
		}
		for id := range l.gone {
			m.record(top, bottom, id)
		}
		for src, d := range l.deg {
			m.addDeg(src, d)
		}
	}
	m.shared = true
	return m
}

// record sets in m what the stack from top says of id: its edge, or its removal when the
// bottom layer still holds it.
func (m *endLayer) record(top, bottom *endLayer, id string) {
	if _, done := m.ends[id]; done {
		return
	}
	if _, done := m.gone[id]; done {
		return
	}
	if x, ok := top.edge(id); ok {
		m.ends[id] = x
	} else if _, ok := bottom.ends[id]; ok {
		m.gone[id] = struct{}{}
	}
}
