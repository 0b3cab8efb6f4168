package engine

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// IndexWorkBytes counts the index work due by the measured peaks per row: a BTREE and an
// INVERTED build by the table's rows, an IVF_FLAT build by its vector elements, an INVERTED
// fold by the rows it adds; the two largest together (stageConcurrency); nothing once done.
func TestIndexWorkBytes(t *testing.T) {
	g := testGraph(t)
	if n := g.IndexWorkBytes(2); n != 0 {
		t.Fatalf("%d bytes of index work on an empty graph", n)
	}
	loadInto(t, g, "", "", "append", doc(1, "[1,0,0,0,0,0,0,0]"), doc(2, "[0,1,0,0,0,0,0,0]"), doc(3, "[0,0,1,0,0,0,0,0]"))
	// Doc's three rows: BTREE(id) 3*128, INVERTED(title) and INVERTED(url) 3*320 each,
	// IVF_FLAT(embedding) 3*8*24; the two largest together.
	ds := tableDataset(t, g, "node:Doc")
	for spec, want := range map[lance.IndexSpec]uint64{
		{Column: "id", Kind: lance.IndexBTree}:          3 * btreePeakPerRow,
		{Column: "title", Kind: lance.IndexInverted}:    3 * invertedPeakPerRow,
		{Column: "embedding", Kind: lance.IndexIVFFlat}: 3 * 8 * ivfPeakPerElement,
	} {
		if got := indexPeak(ds, spec); got != want {
			t.Errorf("%s on 3 rows: %d bytes, want %d", spec, got, want)
		}
	}
	if n, want := g.IndexWorkBytes(2), int64(2*3*invertedPeakPerRow); n != want {
		t.Fatalf("index work of a 3-row Doc table counted %d bytes, want %d (%v)", n, want, dueSpecs(g))
	}
	optimize(t, g, OptimizeOptions{Indices: true})
	if n := g.IndexWorkBytes(2); n != 0 {
		t.Fatalf("%d bytes of index work counted once the indices were built (%v)", n, dueSpecs(g))
	}
	// Four more rows: the indices miss more rows than they cover, and are folded. A BTREE
	// fold counts the table's 7 rows, an INVERTED one the 4 it adds a partition for (the two
	// largest: 4*320 twice); the vector index is not folded.
	loadInto(t, g, "", "", "append", doc(4, "null"), doc(5, "null"), doc(6, "null"), doc(7, "null"))
	if got, want := indexPeak(tableDataset(t, g, "node:Doc"), lance.IndexSpec{Column: "id", Kind: lance.IndexBTree}), uint64(7*btreePeakPerRow); got != want {
		t.Errorf("BTREE fold of 7 rows: %d bytes, want %d", got, want)
	}
	if n, want := g.IndexWorkBytes(2), int64(2*4*invertedPeakPerRow); n != want {
		t.Fatalf("the folds of a 7-row Doc table counted %d bytes, want %d (%v)", n, want, dueSpecs(g))
	}
}

// dueSpecs are the index specs due on each main table, for a failure's message.
func dueSpecs(g *Graph) map[string][]lance.IndexSpec {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	out := map[string][]lance.IndexSpec{}
	for ref, ts := range g.tables {
		if ref.branch == "" {
			s := g.missingIndices(ref.path, ts.ds, 2)
			slices.SortFunc(s, func(a, b lance.IndexSpec) int { return cmp.Compare(a.String(), b.String()) })
			out[ref.path] = s
		}
	}
	return out
}

// tableDataset is the published version of the main table key.
func tableDataset(t *testing.T, g *Graph, key string) *lance.Dataset {
	t.Helper()
	e := mustTable(t, g, key)
	ds, err := lance.Open(context.Background(), g.root.Sub(e.Path), lance.AtVersion(e.Version))
	if err != nil {
		t.Fatal(err)
	}
	return ds
}
