package crash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

type optimizeCase struct {
	name        string
	kill        string // failpoint spec for the crashing `worker optimize`
	recoverKill string // when set, crashes a `worker recover` run after it
	// audited: a Rewrite had committed and the writer had not published, so recovery rolled
	// it forward and must leave an audit row.
	audited bool
}

// optimizeCases kill `worker optimize` (three tables compacted) before arming, after arming,
// after each table's Rewrite commit, inside a Rewrite's Lance commit, before, inside and after
// the publish; and `worker recover` at each step of an Optimize roll-forward.
func optimizeCases() []optimizeCase {
	var out []optimizeCase
	for _, s := range []struct {
		kill    string
		audited bool
	}{
		{"optimize.after_prepare=kill", false}, {"optimize.after_sidecar=kill", true}, // recovery takes the planned versions and publishes the takes
		{"optimize.after_table_commit=kill", true}, {"optimize.after_table_commit=1+1*kill", true}, {"optimize.after_table_commit=2+1*kill", true},
		{"lance.commit.before_manifest=1+1*kill", true}, {"lance.commit.after_manifest=kill", true},
		{"optimize.before_publish=kill", true}, {"publisher.before_commit=kill", true},
		{"optimize.after_publish=kill", false}, {"recovery.sidecar_delete=kill", false},
	} {
		out = append(out, optimizeCase{name: s.kill, kill: s.kill, audited: s.audited})
	}
	for _, rk := range []string{"recovery.before_forward_publish=kill", "recovery.after_forward_publish=kill", "recovery.audit_append=kill", "recovery.sidecar_delete=kill"} {
		out = append(out, optimizeCase{name: "forward/" + rk, kill: "optimize.after_table_commit=1+1*kill", recoverKill: rk, audited: true})
	}
	return out
}

// TestOptimizeCrashMatrix kills a real `worker optimize` (and then a `worker recover`) at every
// step of the Optimize protocol, opens the graph read-write (full recovery), and checks that
// every table's HEAD equals its pin, no sidecar is left, the graph reads exactly as before,
// and that loading and compacting again then work. A compaction changes no row, so here
// "lost" is a row gone, "doubled" a row twice, and "half-visible" any other difference.
func TestOptimizeCrashMatrix(t *testing.T) {
	var tl tally
	for _, c := range optimizeCases() {
		t.Run(c.name, func(t *testing.T) {
			tl.add(runOptimizeCase(t, c))
		})
	}
	line := fmt.Sprintf("crash-matrix-optimize: %d cases, %d lost, %d doubled, %d half-visible", tl.cases, tl.lost, tl.doubled, tl.half)
	summary = strings.TrimSpace(summary + "\n" + line)
	if tl.cases < 15 || tl.lost+tl.doubled+tl.half != 0 {
		t.Errorf("%s", line)
	}
}

func runOptimizeCase(t *testing.T, c optimizeCase) (lost, doubled, half bool) {
	ctx := context.Background()
	dir, root, g := newGraph(t)
	for i := 0; i < 4; i++ {
		recs, err := framing.ParseBytes([]byte(fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}
{"type":"Company","data":{"domain":"c%d.io","name":"C","size":"smb"}}
{"edge":"WorksAt","from":"p%d","to":"c%d.io","data":{"id":"w%d"}}`, i, i, i, i, i)), framing.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	before := exportLines(t, root)
	fragsBefore := fragmentCount(t, root)
	if killed, out := run(t, c.kill, "optimize", "--root", dir, "--all"); !killed {
		t.Fatalf("optimize was not killed at %s:\n%s", c.kill, out)
	}
	pending, _ := recovery.List(ctx, root)
	g2 := recoverAfterCrash(t, dir, root, c.recoverKill)
	audit, _, err := recovery.ReadAudit(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	audited := 0
	for _, a := range audit {
		if len(pending) == 1 && a.OperationID+".json" == pending[0].Name && a.Kind == recovery.RolledForward {
			audited++
		}
	}
	if want := map[bool]int{true: 1, false: 0}[c.audited]; len(pending) > 1 || audited != want {
		t.Errorf("%d pending sidecars, %d audit rows for it, want %d", len(pending), audited, want)
	}
	lost, doubled, half = compareLines(t, before, exportLines(t, root))
	// Loading and compacting again work, and change nothing but the new row.
	batch := filepath.Join(t.TempDir(), "late.ndjson")
	if err := os.WriteFile(batch, []byte(`{"type":"Person","data":{"handle":"late","name":"L","active":true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, out := run(t, "", "load", "--root", dir, "--mode", "append", batch); !strings.Contains(out, "graph_commit_id") {
		t.Fatalf("load after recovery: %s", out)
	}
	if _, out := run(t, "", "optimize", "--root", dir, "--all"); !strings.Contains(out, `"tables"`) {
		t.Fatalf("optimize again: %s", out)
	}
	var rest []string
	for _, l := range exportLines(t, root) {
		if !strings.Contains(l, `"handle":"late"`) {
			rest = append(rest, l)
		}
	}
	if l, d, h := compareLines(t, before, rest); l || d || h {
		lost, doubled, half = lost || l, doubled || d, half || h
	}
	if n := fragmentCount(t, root); n >= fragsBefore {
		t.Errorf("fragments %d -> %d: nothing was compacted", fragsBefore, n)
	}
	assertAligned(t, g2)
	return lost, doubled, half
}

// compareLines classifies the difference between two sorted exports.
func compareLines(t *testing.T, before, after []string) (lost, doubled, half bool) {
	t.Helper()
	count := map[string]int{}
	for _, l := range after {
		count[l]++
	}
	for _, l := range before {
		switch count[l] {
		case 0:
			lost = true
			t.Errorf("lost: %s", l)
		case 1:
		default:
			doubled = true
			t.Errorf("doubled: %s", l)
		}
		delete(count, l)
	}
	for l := range count {
		half = true
		t.Errorf("changed: %s", l)
	}
	return lost, doubled, half
}

// publishedTables calls f with every main table entry and its dataset at its published
// version.
func publishedTables(t *testing.T, root storage.Store, f func(e publisher.TableEntry, ds *lance.Dataset)) {
	t.Helper()
	ctx := context.Background()
	g, err := engine.OpenReadOnly(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Tables() {
		ds, err := lance.Open(ctx, root.Sub(e.Path), lance.AtVersion(e.Version))
		if err != nil {
			t.Fatal(err)
		}
		f(e, ds)
	}
}

// fragmentCount is the number of fragments of every main table at its published version.
func fragmentCount(t *testing.T, root storage.Store) int {
	t.Helper()
	n := 0
	publishedTables(t, root, func(_ publisher.TableEntry, ds *lance.Dataset) { n += ds.NumFragments() })
	return n
}

// publishedIndexNames lists, per main table with rows at its published version, the names
// of its indices.
func publishedIndexNames(t *testing.T, root storage.Store) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	publishedTables(t, root, func(e publisher.TableEntry, ds *lance.Dataset) {
		if e.RowCount == 0 {
			return
		}
		var names []string
		for _, x := range ds.Indices() {
			names = append(names, x.Name)
		}
		sort.Strings(names)
		out[e.TableKey] = names
	})
	return out
}

// indexKills are the steps an index maintenance is killed at.
var indexKills = []string{"optimize.after_prepare=kill", "optimize.after_sidecar=kill", "optimize.after_table_commit=kill",
	"optimize.after_table_commit=1+1*kill", "lance.commit.before_manifest=1+1*kill", "lance.commit.after_manifest=kill",
	"optimize.before_publish=kill", "publisher.before_commit=kill", "optimize.after_publish=kill", "recovery.sidecar_delete=kill"}

// indexSeed is a batch whose strings hold words the analyzer keeps, so every full-text index
// has something to hold.
const indexSeed = `{"type":"Person","data":{"handle":"alice","name":"Alice Smith","active":true}}
{"type":"Person","data":{"handle":"bob","name":"Bob Jones","active":true}}
{"type":"Company","data":{"domain":"acme.io","name":"Acme Rockets","size":"startup"}}
{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w-alice"}}`

// referenceIndexSet is the reference's index set on indexSeed's tables.
var referenceIndexSet = map[string]string{"edge:WorksAt": "[dst_idx id_idx src_idx]", "node:Company": "[domain_idx id_idx name_idx]",
	"node:Person": "[handle_idx id_idx name_idx]"}

func loadLines(t *testing.T, g *engine.Graph, lines string) {
	t.Helper()
	recs, err := framing.ParseBytes([]byte(lines), framing.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Load(context.Background(), engine.LoadRequest{Mode: engine.ModeAppend, Records: recs}); err != nil {
		t.Fatal(err)
	}
}

// TestIndexBuildCrashMatrix kills a real `worker optimize --indices` (the reference's index
// set on three tables, one CreateIndex each under one Optimize intent) at every step, opens
// the graph read-write (full recovery) and checks that each table shows either none of the
// indices or all of them, never part; that the rows are unchanged; and that a second build
// completes the set.
func TestIndexBuildCrashMatrix(t *testing.T) {
	var tl tally
	for _, kill := range indexKills {
		t.Run(kill, func(t *testing.T) {
			dir, root, g := newGraph(t)
			loadLines(t, g, indexSeed)
			before := exportLines(t, root)
			if killed, out := run(t, kill, "optimize", "--root", dir, "--indices"); !killed {
				t.Fatalf("optimize --indices was not killed at %s:\n%s", kill, out)
			}
			g2 := recoverAfterCrash(t, dir, root, "")
			half := false
			for key, names := range publishedIndexNames(t, root) {
				if got := fmt.Sprint(names); got != "[]" && got != referenceIndexSet[key] {
					t.Errorf("%s shows indices %s: neither none nor %s", key, got, referenceIndexSet[key])
					half = true
				}
			}
			lost, doubled, changed := compareLines(t, before, exportLines(t, root))
			if _, out := run(t, "", "optimize", "--root", dir, "--indices"); !strings.Contains(out, `"tables"`) {
				t.Fatalf("optimize --indices again: %s", out)
			}
			for key, names := range publishedIndexNames(t, root) {
				if got := fmt.Sprint(names); got != referenceIndexSet[key] {
					t.Errorf("after a second build %s shows %s, want %s", key, got, referenceIndexSet[key])
					half = true
				}
			}
			assertAligned(t, g2)
			tl.add(lost, doubled, half || changed)
		})
	}
	line := fmt.Sprintf("crash-matrix-indices: %d cases, %d lost, %d doubled, %d half-visible", tl.cases, tl.lost, tl.doubled, tl.half)
	summary = strings.TrimSpace(summary + "\n" + line)
	if tl.cases < 10 || tl.lost+tl.doubled+tl.half != 0 {
		t.Errorf("%s", line)
	}
}

// publishedIndexUUIDs lists, per main table at its published version, its indices as
// name=uuid, and the live rows its indices leave uncovered (the most of any).
func publishedIndexUUIDs(t *testing.T, root storage.Store) (map[string]string, map[string]uint64) {
	t.Helper()
	ids, lag := map[string]string{}, map[string]uint64{}
	publishedTables(t, root, func(e publisher.TableEntry, ds *lance.Dataset) {
		var xs []string
		for _, x := range ds.Indices() {
			xs = append(xs, x.Name+"="+x.UUIDString())
		}
		sort.Strings(xs)
		ids[e.TableKey] = fmt.Sprint(xs)
		lag[e.TableKey] = ds.UnindexedRows()
	})
	return ids, lag
}

// TestIndexFoldCrashMatrix kills a real `worker optimize --indices` folding lagging indices
// (on Person and Company, each one BTREE merged and two INVERTED indices given a partition;
// WorksAt's indices are not due) at every step, opens the graph read-write (full recovery) and
// checks that each of the two tables shows either its old indices (the same uuids, still
// lagging) or all of them folded (new uuids, none lagging), never a mix; that WorksAt's are
// untouched; that the rows are unchanged; and that a second maintenance leaves every index
// covering every row.
func TestIndexFoldCrashMatrix(t *testing.T) {
	var tl tally
	for _, kill := range indexKills {
		t.Run(kill, func(t *testing.T) {
			dir, root, g := newGraph(t)
			loadLines(t, g, indexSeed)
			if _, err := g.Optimize(context.Background(), engine.OptimizeOptions{Indices: true}); err != nil {
				t.Fatal(err)
			}
			// Three new people beside the two indexed, two companies beside one: more than half
			// again, so due.
			loadLines(t, g, `{"type":"Person","data":{"handle":"carol","name":"Carol Stone","active":true}}
{"type":"Person","data":{"handle":"dave","name":"Dave Rivers","active":false}}
{"type":"Person","data":{"handle":"erin","name":"Erin Woods","active":true}}
{"type":"Company","data":{"domain":"globex.com","name":"Globex Corporation","size":"enterprise"}}
{"type":"Company","data":{"domain":"initech.com","name":"Initech Software","size":"startup"}}`)
			old, oldLag := publishedIndexUUIDs(t, root)
			if oldLag["node:Person"] != 3 || oldLag["node:Company"] != 2 {
				t.Fatalf("indices lag %v rows before the fold, want Person 3 and Company 2", oldLag)
			}
			folding := []string{"node:Person", "node:Company"}
			before := exportLines(t, root)
			if killed, out := run(t, kill, "optimize", "--root", dir, "--indices"); !killed {
				t.Fatalf("optimize --indices was not killed at %s:\n%s", kill, out)
			}
			g2 := recoverAfterCrash(t, dir, root, "")
			half := false
			now, lag := publishedIndexUUIDs(t, root)
			folded := 0
			for key, ids := range now {
				switch {
				case ids == old[key] && lag[key] == oldLag[key]:
				case slices.Contains(folding, key) && lag[key] == 0 && !sharesAny(ids, old[key]):
					folded++
				default:
					t.Errorf("%s shows indices %s lagging %d rows: neither the old ones %s nor all folded", key, ids, lag[key], old[key])
					half = true
				}
			}
			// Recovery rolls an Optimize forward table by table (each table's CreateIndex that
			// landed is published), as it does a compaction: per table, never within one.
			t.Logf("%d of the %d due tables show folded indices", folded, len(folding))
			lost, doubled, changed := compareLines(t, before, exportLines(t, root))
			if _, out := run(t, "", "optimize", "--root", dir, "--indices"); !strings.Contains(out, `"tables"`) {
				t.Fatalf("optimize --indices again: %s", out)
			}
			names := publishedIndexNames(t, root)
			_, lag = publishedIndexUUIDs(t, root)
			for key := range referenceIndexSet {
				if got := fmt.Sprint(names[key]); got != referenceIndexSet[key] || lag[key] != 0 {
					t.Errorf("after a second maintenance %s shows %s lagging %d rows, want %s lagging none", key, got, lag[key], referenceIndexSet[key])
					half = true
				}
			}
			assertAligned(t, g2)
			tl.add(lost, doubled, half || changed)
		})
	}
	line := fmt.Sprintf("crash-matrix-index-folds: %d cases, %d lost, %d doubled, %d half-visible", tl.cases, tl.lost, tl.doubled, tl.half)
	summary = strings.TrimSpace(summary + "\n" + line)
	if tl.cases < 10 || tl.lost+tl.doubled+tl.half != 0 {
		t.Errorf("%s", line)
	}
}

// sharesAny says two fmt.Sprint'ed lists of name=uuid share an entry.
func sharesAny(a, b string) bool {
	bs := strings.Fields(strings.Trim(b, "[]"))
	for _, x := range strings.Fields(strings.Trim(a, "[]")) {
		if slices.Contains(bs, x) {
			return true
		}
	}
	return false
}
