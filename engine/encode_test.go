package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// heldTable is the dataset of the table key on main as the writer holds it.
func heldTable(t *testing.T, g *Graph, key string) *lance.Dataset {
	t.Helper()
	if err := g.settleFolds(); err != nil {
		t.Fatal(err)
	}
	if st := g.publisher("").Cached(); st != nil {
		if e, ok := st.Table(key); ok {
			if ts := g.tables[tableRef{path: e.Path}]; ts != nil {
				return ts.ds
			}
		}
	}
	t.Fatalf("table %s not held", key)
	return nil
}

// lastDataFile is the data file of the newest fragment of the table key on main.
func lastDataFile(t *testing.T, g *Graph, key string) string {
	t.Helper()
	frags := heldTable(t, g, key).Manifest().Fragments
	return frags[len(frags)-1].Files[0].Path
}

// carolBuiltAhead is a graph holding people and the append of carol built ahead, as the
// worker's stager builds it.
func carolBuiltAhead(t *testing.T) (*Graph, LoadRequest, *Built) {
	t.Helper()
	return builtAhead(t, ModeAppend, `{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`)
}

// builtAhead is a graph holding people and the load of lines in mode built ahead.
func builtAhead(t *testing.T, mode Mode, lines ...string) (*Graph, LoadRequest, *Built) {
	t.Helper()
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	req := LoadRequest{Mode: mode, Records: records(t, lines...)}
	built, err := g.Build(req)
	if err != nil {
		t.Fatal(err)
	}
	return g, req, built
}

// An append built ahead (as the worker's stager builds it) carries its data files encoded for
// the tables the writer's last load committed, and its load commits those very files.
func TestAppendCommitsTheFilesEncodedAhead(t *testing.T) {
	ctx := context.Background()
	g, req, built := carolBuiltAhead(t)
	enc := built.encoded["node:Person"]
	if enc == nil || len(enc.DataFiles()) != 1 || built.Bytes() <= enc.Bytes() {
		t.Fatalf("Person rows not encoded ahead: %v (built %d bytes)", enc, built.Bytes())
	}
	req.Built = built
	if _, err := g.Load(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := lastDataFile(t, g, "node:Person"); !slices.Contains(enc.DataFiles(), got) {
		t.Fatalf("the load committed %s, not the file encoded ahead %v", got, enc.DataFiles())
	}
	if !strings.Contains(export(t, g, ""), `"handle":"carol"`) {
		t.Fatal("carol is not in the graph")
	}
}

// Files encoded for a table state the load does not meet (the table read again from storage
// meanwhile) are not used: the load encodes its rows itself.
func TestFilesEncodedForAnotherStateAreEncodedAgain(t *testing.T) {
	ctx := context.Background()
	g, req, built := carolBuiltAhead(t)
	enc := built.encoded["node:Person"]
	if enc == nil {
		t.Fatal("Person rows not encoded ahead")
	}
	g.writeMu.Lock()
	_ = g.settleFolds()
	g.tables = map[tableRef]*tableState{} // as after a recovery: every table is read again
	g.writeMu.Unlock()
	req.Built = built
	if _, err := g.Load(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := lastDataFile(t, g, "node:Person"); slices.Contains(enc.DataFiles(), got) {
		t.Fatalf("the load committed %s, encoded for a schema object it did not meet", got)
	}
	if !strings.Contains(export(t, g, ""), `"handle":"carol"`) {
		t.Fatal("carol is not in the graph")
	}
	assertIndexesMatchStorage(t, g)
}

// A deleted branch leaves no encode plan behind.
func TestDeletedBranchForgetsItsEncodePlans(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "b", "main", "append", `{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`)
	loadInto(t, g, "b", "", "append", `{"type":"Person","data":{"handle":"dave","name":"Dave","active":true}}`)
	plans := func(branch string) (n int) {
		g.encodePlans.Range(func(k, _ any) bool {
			if strings.HasPrefix(k.(string), branch+"\x00") {
				n++
			}
			return true
		})
		return n
	}
	if plans("b") == 0 {
		t.Fatal("loads into branch b left no encode plan")
	}
	if err := g.DeleteBranch(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if n := plans("b"); n != 0 || plans("") == 0 {
		t.Fatalf("after deleting b: %d plans of b, %d of main", n, plans(""))
	}
}

// writtenAhead writes built's files ahead and returns the Person table's, checked in storage.
func writtenAhead(t *testing.T, g *Graph, built *Built) (dir storage.Store, file string) {
	t.Helper()
	ctx := context.Background()
	if err := built.WriteAhead(ctx); err != nil {
		t.Fatal(err)
	}
	enc := built.encoded["node:Person"]
	if enc == nil || enc.WrittenAt().IsZero() {
		t.Fatal("Person rows not written ahead")
	}
	dir, file = heldTable(t, g, "node:Person").Store(), enc.DataFiles()[0]
	if ok, err := dir.Exists(ctx, "data/"+file); err != nil || !ok {
		t.Fatalf("data/%s not in storage after WriteAhead: %v %v", file, ok, err)
	}
	return dir, file
}

// Files written ahead that the load does not use, because the table it meets is another
// state or because they waited too long (cleanup may take them for leftovers), are encoded
// and written again by the load, and Discard removes them.
func TestFilesWrittenAheadButNotUsedAreDiscarded(t *testing.T) {
	for _, why := range []string{"another state", "too old"} {
		t.Run(why, func(t *testing.T) {
			ctx := context.Background()
			g, req, built := carolBuiltAhead(t)
			dir, file := writtenAhead(t, g, built)
			if why == "too old" {
				was := writtenAheadMaxAge
				writtenAheadMaxAge = 0
				t.Cleanup(func() { writtenAheadMaxAge = was })
			} else {
				g.writeMu.Lock()
				_ = g.settleFolds()
				g.tables = map[tableRef]*tableState{}
				g.writeMu.Unlock()
			}
			req.Built = built
			if _, err := g.Load(ctx, req); err != nil {
				t.Fatal(err)
			}
			if got := lastDataFile(t, g, "node:Person"); got == file {
				t.Fatalf("the load committed the file written ahead %s", file)
			}
			built.Discard(ctx)
			if ok, err := dir.Exists(ctx, "data/"+file); err != nil || ok {
				t.Fatalf("data/%s still in storage after Discard: %v %v", file, ok, err)
			}
			if !strings.Contains(export(t, g, ""), `"handle":"carol"`) {
				t.Fatal("carol is not in the graph")
			}
			assertIndexesMatchStorage(t, g)
		})
	}
}

// Files written ahead (as the worker's stager writes them) are the ones the load commits, and
// Discard after the load leaves them, as they are the table's now: an append's, and a
// merge's whether it only adds rows or also replaces some (then its load masks the rows it
// replaces with deletion files of its own, and nothing of them stays visible).
func TestLoadCommitsTheFilesWrittenAhead(t *testing.T) {
	carol := `{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`
	for _, c := range []struct {
		name  string
		mode  Mode
		lines []string
		want  []string
		gone  string
	}{
		{"append", ModeAppend, []string{carol}, []string{`"name":"Carol"`, `"name":"Alice"`}, ""},
		{"merge of new rows", ModeMerge, []string{carol}, []string{`"name":"Carol"`, `"name":"Alice"`}, ""},
		{"merge replacing rows", ModeMerge, []string{`{"type":"Person","data":{"handle":"alice","name":"Alice B.","active":false}}`, carol},
			[]string{`"name":"Alice B."`, `"name":"Carol"`, `"name":"Bob"`}, `"name":"Alice"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			g, req, built := builtAhead(t, c.mode, c.lines...)
			dir, file := writtenAhead(t, g, built)
			req.Built = built
			if _, err := g.Load(ctx, req); err != nil {
				t.Fatal(err)
			}
			if got := lastDataFile(t, g, "node:Person"); got != file {
				t.Fatalf("the load committed %s, not the file written ahead %s", got, file)
			}
			built.Discard(ctx)
			if ok, err := dir.Exists(ctx, "data/"+file); err != nil || !ok {
				t.Fatalf("Discard removed data/%s, which the load committed: %v %v", file, ok, err)
			}
			out := export(t, g, "")
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Fatalf("%s is not in the graph:\n%s", w, out)
				}
			}
			if c.gone != "" && strings.Contains(out, c.gone) {
				t.Fatalf("the replaced row %s is still in the graph:\n%s", c.gone, out)
			}
			if n := strings.Count(out, `"handle":"alice"`); n != 1 {
				t.Fatalf("alice appears %d times:\n%s", n, out)
			}
			assertIndexesMatchStorage(t, g)
		})
	}
}

// A batch refused after its load staged the files written ahead (here an append of a key the
// graph holds: a KeyConflict found while the tables stage) leaves nothing in storage once it
// is discarded.
func TestRefusedBatchLeavesNoFileWrittenAhead(t *testing.T) {
	ctx := context.Background()
	g, req, built := builtAhead(t, ModeAppend, people[0])
	dir, file := writtenAhead(t, g, built)
	req.Built = built
	if _, err := g.Load(ctx, req); err == nil {
		t.Fatal("an append of a key the graph holds was applied")
	}
	built.Discard(ctx)
	if ok, err := dir.Exists(ctx, "data/"+file); err != nil || ok {
		t.Fatalf("data/%s of the refused batch still in storage after Discard: %v %v", file, ok, err)
	}
}
