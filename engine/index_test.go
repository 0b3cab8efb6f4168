package engine

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// assertIndexesMatchStorage compares every cached table index (ids with row addresses, and the
// edge endpoints where built) with one rebuilt cold from storage at the same version.
func assertIndexesMatchStorage(t *testing.T, g *Graph) {
	t.Helper()
	ctx := context.Background()
	if err := g.settleFolds(); err != nil { // the last load's fold may still run (fold.go)
		t.Fatal(err)
	}
	for ref, ts := range g.tables {
		cold, err := indexTable(ctx, ts.ds, ts.isEdge)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(cold.ids.toMap(), ts.ids.toMap()) {
			t.Fatalf("%s@%s v%d: cached ids differ from storage (%d vs %d)", ref.path, ref.branch, ts.ds.Version(), ts.ids.Len(), cold.ids.Len())
		}
		if ts.ends == nil {
			continue
		}
		ends, err := cold.endpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		coldEdges, coldDeg := ends.toMaps()
		edges, deg := ts.ends.toMaps()
		if !maps.Equal(coldEdges, edges) || !maps.Equal(coldDeg, deg) {
			t.Fatalf("%s@%s: cached endpoints differ from storage", ref.path, ref.branch)
		}
	}
}

// The single writer's incremental indexes stay equal to a cold read through appends, upserts
// that move edges, overwrites, branch forks and merges.
func TestIndexesStayEqualToColdRead(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "", "", "append", `{"type":"Company","data":{"domain":"b.io","name":"B","size":"smb"}}`,
		`{"edge":"WorksAt","from":"bob","to":"b.io","data":{"id":"w2"}}`)
	assertIndexesMatchStorage(t, g)
	// An upsert moves w1 to another company (the @card check built WorksAt's endpoints).
	loadInto(t, g, "", "", "merge", `{"edge":"WorksAt","from":"alice","to":"b.io","data":{"id":"w1","role":"ceo"}}`,
		person("alice", "Alice 2"))
	assertIndexesMatchStorage(t, g)
	loadInto(t, g, "s", "main", "merge", person("bob", "Bob S"), person("carol", "Carol"),
		`{"edge":"WorksAt","from":"carol","to":"acme.io","data":{"id":"w3"}}`)
	assertIndexesMatchStorage(t, g)
	for i := 0; i < 3; i++ {
		loadInto(t, g, "", "", "append", person(fmt.Sprintf("m%d", i), "M"))
	}
	mustMerge(t, g, MergeRequest{Source: "s", Target: "main", DeleteSource: true})
	assertIndexesMatchStorage(t, g)
	loadInto(t, g, "", "", "overwrite", `{"type":"Company","data":{"domain":"acme.io","name":"Acme","size":"smb"}}`,
		`{"type":"Company","data":{"domain":"b.io","name":"B","size":"smb"}}`)
	assertIndexesMatchStorage(t, g)
	// A load whose publish fails leaves no index folded ahead of it, before or after recovery.
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.before_publish", "1*error")
	if _, err := load(t, g, "append", person("late", "Late"), `{"edge":"WorksAt","from":"late","to":"b.io","data":{"id":"w9"}}`); err == nil {
		t.Fatal("the failpoint did not fire")
	}
	failpoint.Reset()
	assertIndexesMatchStorage(t, g)
	if _, err := g.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	loadInto(t, g, "", "", "append", person("later", "Later"))
	assertIndexesMatchStorage(t, g)
}
