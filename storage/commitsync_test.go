package storage_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// TestGraphLoadSyncChain traces every fsync and publication of real graph loads on a local
// root with fsync on (the default) and checks the sync chain of each commit (docs/durability.md):
//
//   - every file's bytes are fsynced before its name is published;
//   - nothing a write publishes is published before the names of every write that returned
//     before it began are durable (their directory synced after they were published): so no
//     manifest names a data file, and no table commit follows a sidecar, whose name a power
//     loss could take;
//   - a PutIfAbsent (a table version, the __manifest version) returns only once its name is
//     durable, and the load returns only once the __manifest version is;
//   - nothing is published into a directory the trace saw created (a table's data/ on its
//     first append, an index's _indices/<uuid>/) before that directory's name, and the name
//     of each created directory above it, is durable;
//   - no directory is synced without a name published into it since its previous sync (no
//     directory is synced twice for the same step), and each directory a commit touches is
//     synced at most once per write into it.
func TestGraphLoadSyncChain(t *testing.T) {
	ctx := context.Background()
	g, tr := syncTracedGraph(t)
	for k := range 4 {
		evs := tr.during(func() {
			if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: benchdata.GraphBatch(k, 100)}); err != nil {
				t.Fatal(err)
			}
		})
		checkSyncChain(t, k, evs)
	}
}

// The same chain holds for loads whose data files the worker's stager wrote ahead of their
// turn (engine.Built.WriteAhead), the write ahead and the load traced as one: the table
// commits that name the files wait for their directory's sync, and the load writes no data
// file of its own.
func TestGraphLoadSyncChainWrittenAhead(t *testing.T) {
	ctx := context.Background()
	g, tr := syncTracedGraph(t)
	// The first load gives the stager the table versions it encodes for.
	if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: benchdata.GraphBatch(0, 100)}); err != nil {
		t.Fatal(err)
	}
	for k := 1; k < 4; k++ {
		req := engine.LoadRequest{Mode: engine.ModeAppend, Records: benchdata.GraphBatch(k, 100)}
		var err error
		if req.Built, err = g.Build(req); err != nil {
			t.Fatal(err)
		}
		split := 0
		all := tr.during(func() {
			if err := req.Built.WriteAhead(ctx); err != nil {
				t.Fatal(err)
			}
			split = tr.count()
			if _, err := g.Load(ctx, req); err != nil {
				t.Fatal(err)
			}
		})
		checkSyncChain(t, k, all)
		// tableData: a table's data file published (not __manifest's).
		tableData := func(ev storage.SyncEvent) bool {
			return ev.Kind == storage.EventPublished && filepath.Base(filepath.Dir(ev.Path)) == "data" && !strings.Contains(ev.Path, "__manifest")
		}
		ahead, load := all[:split], all[split:]
		written := 0
		for _, ev := range ahead {
			if tableData(ev) {
				written++
			}
		}
		if written != 2 {
			t.Fatalf("load %d: %d data files written ahead, want the node and the edge table's", k, written)
		}
		if i := slices.IndexFunc(load, tableData); i >= 0 {
			t.Fatalf("load %d wrote %s in its turn: its files were written ahead", k, load[i].Path)
		}
	}
}

// syncTracer collects the sync events of one graph root's directory.
type syncTracer struct {
	mu     sync.Mutex
	events []storage.SyncEvent
}

// syncTracedGraph is a new bench-schema graph on a local root with fsync on, whose sync events
// the tracer collects until the test ends.
func syncTracedGraph(t *testing.T) (*engine.Graph, *syncTracer) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	root, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	storage.KeepSpares(root)
	g, err := engine.Init(ctx, root, benchdata.Schema, engine.InitOptions{FileVersion: engine.DefaultFileVersion})
	if err != nil {
		t.Fatal(err)
	}
	tr := &syncTracer{}
	t.Cleanup(storage.TraceSyncs(func(ev storage.SyncEvent) {
		if ev.Path == dir || strings.HasPrefix(ev.Path, dir+string(filepath.Separator)) {
			tr.mu.Lock()
			tr.events = append(tr.events, ev)
			tr.mu.Unlock()
		}
	}))
	return g, tr
}

// during is the events of what f does.
// count is how many events the tracer has collected so far.
func (tr *syncTracer) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.events)
}

func (tr *syncTracer) during(f func()) []storage.SyncEvent {
	tr.mu.Lock()
	tr.events = tr.events[:0]
	tr.mu.Unlock()
	f()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.events)
}

// TestGraphCompactionSyncChain holds a staged compaction's commit to the same chain: its
// publish stages its files while the tables commit (engine's overlapCommit), and its
// __manifest version, which names the tables' new versions, must still wait for them to be
// durable.
func TestGraphCompactionSyncChain(t *testing.T) {
	ctx := context.Background()
	g, tr := syncTracedGraph(t)
	for k := range 2 {
		for i := range 16 {
			if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: benchdata.GraphBatch(100*k+i, 10)}); err != nil {
				t.Fatal(err)
			}
		}
		evs := tr.during(func() {
			sc, err := g.StageCompaction(ctx, engine.OptimizeOptions{Indices: k == 1})
			if err != nil || sc == nil {
				t.Fatalf("nothing staged: %v", err)
			}
			res, err := g.CommitCompaction(ctx, sc)
			if err != nil || res.Commit == nil || len(res.Tables) != 2 {
				t.Fatalf("compaction %+v %v", res, err)
			}
		})
		checkSyncChain(t, k, evs)
		tablesDurableBeforeThePublish(t, evs)
	}
}

// tablesDurableBeforeThePublish requires every table version published in evs to be durable
// (its directory synced after it) before the __manifest version that names it is published,
// whenever the table's write began.
func tablesDurableBeforeThePublish(t *testing.T, evs []storage.SyncEvent) {
	t.Helper()
	versions := string(filepath.Separator) + "_versions" + string(filepath.Separator)
	publish := -1
	for i, ev := range evs {
		if ev.Kind == storage.EventPublished && strings.Contains(ev.Path, "__manifest"+versions) {
			publish = i
		}
	}
	if publish < 0 {
		t.Fatal("no __manifest version published")
	}
	tables := 0
	for q, ev := range evs[:publish] {
		if ev.Kind != storage.EventPublished || !strings.Contains(ev.Path, versions) {
			continue
		}
		tables++
		// A sync of its directory that started after it and ended before the publish (the
		// syncs of one directory never overlap).
		dir, started, durable := filepath.Dir(ev.Path), false, false
		for _, later := range evs[q+1 : publish] {
			if later.Path == dir && later.Kind == storage.EventDirSyncStart {
				started = true
			}
			if later.Path == dir && later.Kind == storage.EventDirSyncDone && started {
				durable = true
			}
		}
		if !durable {
			t.Errorf("%s published before the table version %s it names was durable", evs[publish].Path, ev.Path)
		}
	}
	if tables < 2 {
		t.Errorf("%d table versions published before the __manifest version, want the node and edge tables'", tables)
	}
}

func checkSyncChain(t *testing.T, load int, evs []storage.SyncEvent) {
	t.Helper()
	parent := filepath.Dir
	// returned[q] is the index at which the write that published at q returned (its
	// EventWriteDone), or len(evs) if it did not.
	returned := map[int]int{}
	for q, ev := range evs {
		if ev.Kind != storage.EventPublished {
			continue
		}
		returned[q] = len(evs)
		for j := q + 1; j < len(evs); j++ {
			if evs[j].Path == ev.Path && evs[j].Kind == storage.EventWriteDone {
				returned[q] = j
				break
			}
		}
	}
	// doneAfter reports whether a sync of dir that started after index from ended before
	// index before.
	doneAfter := func(dir string, from, before int) bool { return storage.SyncedAfter(evs, dir, from, before) }
	var published []int // indexes of EventPublished so far
	fileSyncs, dirSyncs, manifests, tableCommitsChecked, tablesDeferred := 0, 0, -1, 0, 0
	lastStart := map[string]int{}     // dir -> index of its last sync start
	publishedInto := map[string]int{} // dir -> index of its last publication
	created := map[string]int{}       // dir -> index of its creation
	for i, ev := range evs {
		switch ev.Kind {
		case storage.EventDirCreated:
			created[ev.Path] = i
			publishedInto[parent(ev.Path)] = i
		case storage.EventFileSynced:
			fileSyncs++
		case storage.EventDirSyncStart:
			dirSyncs++
			p, ok := publishedInto[ev.Path]
			if s, synced := lastStart[ev.Path]; !ok || (synced && p < s) {
				t.Errorf("load %d: %s synced with nothing published into it since its last sync", load, ev.Path)
			}
			lastStart[ev.Path] = i
		case storage.EventPublished:
			// Its bytes were synced before.
			synced := false
			for j := i - 1; j >= 0; j-- {
				if evs[j].Path == ev.Path && evs[j].Kind == storage.EventPublished {
					break
				}
				if evs[j].Path == ev.Path && evs[j].Kind == storage.EventFileSynced {
					synced = true
					break
				}
			}
			if !synced {
				t.Errorf("load %d: %s published before its bytes were synced", load, ev.Path)
			}
			// Into directories whose own names are durable.
			for d := parent(ev.Path); d != parent(d); d = parent(d) {
				if c, ok := created[d]; ok && !doneAfter(parent(d), c, i) {
					t.Errorf("load %d: %s published before the name of the directory %s, created at %d, was durable", load, ev.Path, d, c)
				}
			}
			// Every name published by a write that returned before this one began is durable
			// by now.
			begin := -1
			for j := i - 1; j >= 0; j-- {
				if evs[j].Path == ev.Path && evs[j].Kind == storage.EventWriteStart {
					begin = j
					break
				}
			}
			if begin < 0 {
				t.Fatalf("load %d: %s published by no traced write", load, ev.Path)
			}
			sawData := false
			manifest := strings.HasSuffix(ev.Path, ".manifest") && strings.Contains(ev.Path, string(filepath.Separator)+"_versions"+string(filepath.Separator))
			for _, q := range published {
				if returned[q] > begin {
					continue // not before this write: beside it
				}
				// A name published as unreferenced (written ahead of its commit) need only be
				// durable before a version of its own table is published: that is what names it.
				if evs[q].Unreferenced && !(manifest && tableRoot(evs[q].Path) == tableRoot(ev.Path)) {
					continue
				}
				if !doneAfter(parent(evs[q].Path), q, i) {
					t.Errorf("load %d: %s published before the name %s (its write returned before this one began) was durable", load, ev.Path, evs[q].Path)
				}
				sawData = sawData || strings.HasSuffix(evs[q].Path, ".lance")
			}
			if manifest {
				if !sawData {
					t.Errorf("load %d: manifest %s follows no data file: the check above proved nothing", load, ev.Path)
				}
				tableCommitsChecked++
				if strings.Contains(ev.Path, "__manifest") {
					manifests = i
				}
			}
			published = append(published, i)
			publishedInto[parent(ev.Path)] = i
		case storage.EventWriteDone:
			if strings.HasSuffix(ev.Path, ".manifest") {
				var pub int
				for pub = i - 1; pub >= 0 && !(evs[pub].Path == ev.Path && evs[pub].Kind == storage.EventPublished); pub-- {
				}
				// A table's commit returns before its name is durable (DeferDirSync): the
				// check of every later publication above holds it to the publish's barrier.
				// The __manifest commit, which the caller acknowledges, never does.
				table := !strings.Contains(ev.Path, "__manifest")
				switch {
				case table && evs[pub].Deferred:
					tablesDeferred++
				case table:
					t.Errorf("load %d: the table commit %s waited for its directory sync", load, ev.Path)
				case evs[pub].Deferred:
					t.Errorf("load %d: the __manifest commit %s did not wait for its directory sync", load, ev.Path)
				}
				if !table && !doneAfter(parent(ev.Path), pub, i) {
					t.Errorf("load %d: PutIfAbsent of %s returned before its name was durable", load, ev.Path)
				}
			}
		}
	}
	if manifests < 0 {
		t.Fatalf("load %d: no __manifest version published", load)
	}
	if !doneAfter(parent(evs[manifests].Path), manifests, len(evs)) {
		t.Errorf("load %d: the load returned before its __manifest version was durable", load)
	}
	if tablesDeferred < 2 {
		t.Errorf("load %d: %d table commits deferred their directory sync, want the node and edge tables'", load, tablesDeferred)
	}
	if tableCommitsChecked < 3 {
		t.Errorf("load %d: %d manifests published, want the node and edge tables' and __manifest's", load, tableCommitsChecked)
	}
	t.Logf("load %d: %d files synced, %d directory syncs, %d names published, %d directories created", load, fileSyncs, dirSyncs, len(published), len(created))
}

// tableRoot is the directory of the table (or __manifest) that path belongs to: the part
// before its data/, _indices/, _deletions/, _transactions/ or _versions/ directory.
func tableRoot(path string) string {
	parts := strings.Split(path, string(filepath.Separator))
	for i := len(parts) - 1; i > 0; i-- {
		switch parts[i] {
		case "data", "_indices", "_deletions", "_transactions", "_versions":
			return strings.Join(parts[:i], string(filepath.Separator))
		}
	}
	return filepath.Dir(path)
}
