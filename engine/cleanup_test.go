package engine

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// rootFiles counts the files under a graph's root directory.
func rootFiles(t *testing.T, g *Graph) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(rootDir(t, g), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func rootDir(t *testing.T, g *Graph) string {
	t.Helper()
	return strings.TrimPrefix(g.root.URI(), "file://")
}

// history builds a graph with a past: loads on main, a stage forked early and one forked
// later (both with loads of their own, neither merged yet), upserts, and compactions of main.
func history(t *testing.T) *Graph {
	t.Helper()
	g := testGraph(t)
	smallLoads(t, g, "", "m", 10)
	loadInto(t, g, "early", "main", "append", person("e1", "E"), person("e2", "E"))
	smallLoads(t, g, "", "n", 10)
	loadInto(t, g, "", "", "merge", person("m1", "M one"), person("m2", "M two"))
	loadInto(t, g, "late", "main", "merge", person("m3", "M three on late"), person("l1", "L"))
	smallLoads(t, g, "", "o", 12)
	loadInto(t, g, "early", "", "append", person("e3", "E"))
	optimize(t, g, OptimizeOptions{Fanout: 16})
	return g
}

// A cleanup removes old versions and the files only they name; every branch reads the same
// after it, merges between the live branches give what they give on an uncleaned copy, and
// writing goes on.
func TestCleanupKeepsWhatBranchesAndMergesRead(t *testing.T) {
	ctx := context.Background()
	g := history(t)
	exports := map[string]string{}
	for _, b := range []string{"", "early", "late"} {
		exports[b] = sortedExport(t, g, b)
	}
	files := rootFiles(t, g)
	twin := history(t) // the same past, never cleaned

	dry, err := g.Cleanup(ctx, CleanupOptions{Keep: 2, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Datasets) == 0 || rootFiles(t, g) != files {
		t.Fatalf("dry run: %+v, files %d -> %d", dry, files, rootFiles(t, g))
	}
	res, err := g.Cleanup(ctx, CleanupOptions{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, d := range res.Datasets {
		removed += d.FilesRemoved + d.OldVersionsRemoved
	}
	if after := rootFiles(t, g); removed == 0 || after >= files || files-after < removed {
		t.Fatalf("cleanup %+v: files %d -> %d", res, files, after)
	}
	for b, want := range exports {
		if got := sortedExport(t, g, b); got != want {
			t.Fatalf("%s reads differently after the cleanup:\n%s\n---\n%s", ids.BranchKey(b), want, got)
		}
	}
	// The same merges, here and on the uncleaned twin.
	for _, m := range []MergeRequest{{Source: "early", Target: "main"}, {Source: "late", Target: "main"}} {
		mustMerge(t, twin, m)
		mustMerge(t, g, m)
		if got, want := sortedExport(t, g, ""), sortedExport(t, twin, ""); got != want {
			t.Fatalf("merging %s after a cleanup:\n%s\n---\nwithout it:\n%s", m.Source, got, want)
		}
	}
	smallLoads(t, g, "", "p", 17)
	optimize(t, g, OptimizeOptions{Fanout: 16})
	tablesAligned(t, g)
	assertIndexesMatchStorage(t, g)
	// The two stages' newest common ancestor is an early main commit: while both live, main's
	// history since it stays. Once they are gone, it can go.
	if again, err := g.Cleanup(ctx, CleanupOptions{Keep: 2}); err != nil || len(again.Datasets) != 0 {
		t.Fatalf("cleanup with the stages alive: %+v %v", again, err)
	}
	for _, b := range []string{"early", "late"} {
		if err := g.DeleteBranch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	before := sortedExport(t, g, "")
	again, err := g.Cleanup(ctx, CleanupOptions{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Datasets) == 0 {
		t.Fatal("nothing to clean once the stages are gone")
	}
	if sortedExport(t, g, "") != before {
		t.Fatal("main reads differently after the second cleanup")
	}
	reopened, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	if sortedExport(t, reopened, "") != sortedExport(t, g, "") {
		t.Fatal("a reopened graph reads differently")
	}
}

// A pending recovery intent may need the history: cleanup refuses until it is resolved.
func TestCleanupRefusesPendingRecovery(t *testing.T) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	smallLoads(t, g, "", "p", 3)
	_ = failpoint.Enable("load.after_table_commit", "1*error")
	if _, err := load(t, g, "append", people...); err == nil {
		t.Fatal("the armed load should fail")
	}
	_, err := g.Cleanup(context.Background(), CleanupOptions{Keep: 1})
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) || !strings.Contains(rr.Reason, "cleanup refuses") {
		t.Fatalf("cleanup beside a pending intent: %v", err)
	}
	if _, err := g.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Cleanup(context.Background(), CleanupOptions{Keep: 1}); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if _, err := g.Cleanup(context.Background(), CleanupOptions{Keep: 0}); errs.Kind(err) != errs.KindInvalid {
		t.Fatalf("keep 0: %v", err)
	}
}

// With OlderThan, a version must also be older than that to go: everything just written stays.
func TestCleanupOlderThan(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	smallLoads(t, g, "", "p", 6)
	count := func(r *CleanupResult) int {
		n := 0
		for _, d := range r.Datasets {
			n += d.OldVersionsRemoved
		}
		return n
	}
	young, err := g.Cleanup(ctx, CleanupOptions{Keep: 1, OlderThan: time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	keepOnly, err := g.Cleanup(ctx, CleanupOptions{Keep: 1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	old, err := g.Cleanup(ctx, CleanupOptions{Keep: 1, OlderThan: 10 * time.Millisecond, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if count(young) != 0 || count(keepOnly) == 0 || count(old) != count(keepOnly) {
		t.Fatalf("versions removed: younger than an hour %d, keep only %d, older than 10ms %d", count(young), count(keepOnly), count(old))
	}
}
