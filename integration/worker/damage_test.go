package worker

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// newestManifest is the file of a Lance dataset's newest version (V2 names count down, so it
// sorts first).
func newestManifest(t *testing.T, dataset string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dataset, "_versions", "*.manifest"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no manifest under %s (%v)", dataset, err)
	}
	sort.Strings(names)
	return names[0]
}

// publishedTable is the directory of the Person node table.
func personTable(t *testing.T, root string) string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(root, "nodes", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if strings.Contains(strings.ToLower(filepath.Base(d)), "person") {
			return d
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no node table under %s", root)
	}
	return dirs[0]
}

// damageThenMend starts a worker on a graph holding two committed batches whose state damage
// has broken, checks that the worker neither exits nor dead-letters anything but holds with
// /readyz 503 "operator required: corrupt" (alive past several tries), then mends the damage
// and checks that the held and later batches commit exactly once.
func damageThenMend(t *testing.T, damage func(root string) (mend func())) {
	ns, root, addr := twoBatches(t, false)
	mendAndCheck(t, ns, root, addr, damage)
}

// twoBatches is a graph holding batches 0 and 1 committed by a worker that has stopped; with
// remerge, the tables are compacted and batch 0's person merged again with another name, which
// gives the Person table a deletion file.
func twoBatches(t *testing.T, remerge bool) (*natsServer, string, string) {
	ns := startNATS(t)
	root := initGraph(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := []string{"--http", addr}
	if remerge {
		// Without the automatic index build: one that ran between the two batches would cover
		// batch 0's fragment alone, the optimize would not merge fragments an index covers
		// differently (as Lance's planner), and the merge would then drop p0's whole fragment
		// instead of writing a deletion file.
		args = append(args, "--build-indices", "off")
	}
	w := startWorker(t, root, ns.url, "", args...)
	waitStream(t, ns.url)
	publishBody(t, ns.url, graphtest.BatchBody(0), nil)
	publishBody(t, ns.url, graphtest.BatchBody(1), nil)
	n := uint64(2)
	if remerge {
		// Compacted first (in stream order), so that the merged row shares its fragment.
		publishOn(t, ns.url, "omnigraph.demo.maintenance", `{"op":"optimize","all":true}`, nil)
		publishBody(t, ns.url, `{"type":"Person","data":{"handle":"p0","name":"P again","active":true}}`, map[string]string{"Omnigraph-Mode": "merge"})
		n += 2
	}
	waitAcked(t, ns.url, n, w)
	w.terminate(t)
	return ns, root, addr
}

// mendAndCheck damages the stopped graph, and runs a worker on it as damageThenMend says.
func mendAndCheck(t *testing.T, ns *natsServer, root, addr string, damage func(root string) (mend func())) {
	acked := streamMsgs(t, ns.url, "OMNIGRAPH_DEMO")

	mend := damage(root)
	w := startWorker(t, root, ns.url, "", "--http", addr, "--retry-budget", "1s", "--retry-max", "500ms")
	publishBody(t, ns.url, graphtest.BatchBody(2), nil)
	waitReady(t, addr, http.StatusServiceUnavailable, "operator required: corrupt")
	// Held, not exited, over several tries and past the retry budget.
	time.Sleep(2500 * time.Millisecond)
	select {
	case err := <-w.done:
		w.done <- err
		t.Fatalf("the worker exited on damaged state (%v):\n%s", err, w.out)
	default:
	}
	metrics := httpGet(t, "http://"+addr+"/metrics", 200)
	if !strings.Contains(metrics, `omnigraph_operator_required{graph="demo",kind="corrupt"} 1`) || !strings.Contains(metrics, "omnigraph_stalled{graph=\"demo\"} 1\n") {
		t.Fatalf("metrics while held:\n%s", metrics)
	}
	if dls := listDeadLetters(t, ns.url); len(dls) != 0 {
		t.Fatalf("a good batch was dead-lettered for damaged storage: %+v", dls)
	}
	mend()
	waitAcked(t, ns.url, acked+1, w)
	waitReady(t, addr, http.StatusOK)
	w.terminate(t)
	checkExactlyOnce(t, root, 3)
	if dls := listDeadLetters(t, ns.url); len(dls) != 0 {
		t.Fatalf("dead letters %+v", dls)
	}
}

// Damaged or missing stored state holds the worker for an operator with its message kept: it
// never exits into a restart loop and never dead-letters the good batches behind it.
func TestDamagedStateHoldsForAnOperator(t *testing.T) {
	t.Run("truncated recovery sidecar", func(t *testing.T) {
		damageThenMend(t, func(root string) func() {
			dir := filepath.Join(root, "__recovery")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "01JF000000000000000000000A.json")
			if err := os.WriteFile(file, []byte(`{"format_version":9,"operation_id":"01JF000000000000000000000A","kind":"Lo`), 0o644); err != nil {
				t.Fatal(err)
			}
			return func() { _ = os.Remove(file) }
		})
	})
	t.Run("flipped bytes in the newest __manifest version", func(t *testing.T) {
		damageThenMend(t, func(root string) func() {
			file := newestManifest(t, filepath.Join(root, "__manifest"))
			good, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			bad := append([]byte(nil), good...)
			for i := len(bad) / 3; i < len(bad)/3+64 && i < len(bad); i++ {
				bad[i] ^= 0xa5
			}
			if err := os.WriteFile(file, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := os.WriteFile(file, good, 0o644); err != nil {
					t.Error(err)
				}
			}
		})
	})
	t.Run("the published version of a table deleted", func(t *testing.T) {
		damageThenMend(t, func(root string) func() {
			file := newestManifest(t, personTable(t, root))
			good, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := os.WriteFile(file, good, 0o644); err != nil {
					t.Error(err)
				}
			}
		})
	})
}

// moveAside renames the first file matching pattern under dir out of the way; the mend puts it
// back.
func moveAside(t *testing.T, dir, pattern string) func() {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(names) == 0 {
		t.Fatalf("nothing matches %s under %s (%v)", pattern, dir, err)
	}
	sort.Strings(names)
	aside := names[0] + ".aside"
	if err := os.Rename(names[0], aside); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Rename(aside, names[0]); err != nil {
			t.Error(err)
		}
	}
}

// Missing data and deletion files are damage the writer meets while serving (its key checks
// read the stored ids through them): held as corrupt, and the batch commits once mended.
func TestDamagedDataHoldsForAnOperator(t *testing.T) {
	t.Run("a data file of a table missing", func(t *testing.T) {
		damageThenMend(t, func(root string) func() { return moveAside(t, personTable(t, root), "data/*.lance") })
	})
	t.Run("a deletion file of a table missing", func(t *testing.T) {
		ns, root, addr := twoBatches(t, true)
		mendAndCheck(t, ns, root, addr, func(root string) func() { return moveAside(t, root, "nodes/*/_deletions/*") })
	})
}

// Damage the writer does not depend on never stops it: a torn __manifest checkpoint (an open
// falls back to a full scan) and a missing index file (loads never read indices; the engines
// that query the table need the operator, not the worker). The worker commits on, and
// dead-letters nothing.
func TestDamageTheWriterDoesNotNeedLetsItGoOn(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, root string)
	}{
		{"a torn __manifest checkpoint", func(t *testing.T, root string) {
			writeCheckpoint(t, root) // the writer makes one every 16,384 manifest rows
			names, _ := filepath.Glob(filepath.Join(root, "__manifest", "_omnigraph_checkpoints", "*.ckpt"))
			if len(names) == 0 {
				t.Fatal("no checkpoint to tear")
			}
			for _, n := range names {
				raw, err := os.ReadFile(n)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(n, raw[:len(raw)/2], 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"an index file missing", func(t *testing.T, root string) {
			names, _ := filepath.Glob(filepath.Join(personTable(t, root), "_indices", "*", "*"))
			if len(names) == 0 {
				t.Fatal("no index file: the maintenance built no index")
			}
			if err := os.Remove(names[0]); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := startNATS(t)
			root := initGraph(t)
			addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			// A checkpoint is written every few commits and indices by the maintenance: ask for
			// both early.
			w := startWorker(t, root, ns.url, "", "--http", addr, "--compaction-fanout", "2")
			waitStream(t, ns.url)
			for i := 0; i < 4; i++ {
				publishBody(t, ns.url, graphtest.BatchBody(i), nil)
			}
			waitAcked(t, ns.url, 4, w)
			waitIndexed(t, root)
			w.terminate(t)
			c.damage(t, root)
			w = startWorker(t, root, ns.url, "", "--http", addr, "--compaction-fanout", "2")
			publishBody(t, ns.url, graphtest.BatchBody(4), nil)
			waitAcked(t, ns.url, 5, w)
			waitReady(t, addr, http.StatusOK)
			w.terminate(t)
			checkExactlyOnce(t, root, 5)
			if dls := listDeadLetters(t, ns.url); len(dls) != 0 {
				t.Fatalf("dead letters %+v", dls)
			}
		})
	}
}

// waitIndexed waits until the Person table has an index file (the maintenance built one).
func waitIndexed(t *testing.T, root string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if names, _ := filepath.Glob(filepath.Join(personTable(t, root), "_indices", "*", "*")); len(names) > 0 {
			return
		}
	}
	t.Fatal("the maintenance built no index within 30s")
}

// writeCheckpoint writes a __manifest checkpoint of main on the stopped graph at root.
func writeCheckpoint(t *testing.T, root string) {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := publisher.Open(st, "")
	if _, err := p.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
}
