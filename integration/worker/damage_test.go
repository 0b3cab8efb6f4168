package worker

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
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
	ns := startNATS(t)
	root := initGraph(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	w := startWorker(t, root, ns.url, "", "--http", addr)
	waitStream(t, ns.url)
	publishBody(t, ns.url, graphtest.BatchBody(0), nil)
	publishBody(t, ns.url, graphtest.BatchBody(1), nil)
	waitAcked(t, ns.url, 2, w)
	w.terminate(t)

	mend := damage(root)
	w = startWorker(t, root, ns.url, "", "--http", addr, "--retry-budget", "1s", "--retry-max", "500ms")
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
	if !strings.Contains(metrics, `omnigraph_operator_required{kind="corrupt"} 1`) || !strings.Contains(metrics, "omnigraph_stalled 1\n") {
		t.Fatalf("metrics while held:\n%s", metrics)
	}
	if dls := listDeadLetters(t, ns.url); len(dls) != 0 {
		t.Fatalf("a good batch was dead-lettered for damaged storage: %+v", dls)
	}
	mend()
	waitAcked(t, ns.url, 3, w)
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
