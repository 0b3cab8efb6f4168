package crash

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

type mergeCase struct {
	name    string
	kill    string
	target  string // "" = main; a branch = a first-touch target (its fork steps exist)
	noProof bool   // the ordinary diff route instead of the certified one
}

func mergeCases() []mergeCase {
	var out []mergeCase
	steps := []string{"merge.after_arm=kill", "merge.after_chain_commit=kill", "merge.after_chain_commit=1+1*kill",
		"merge.after_chain_commit=2+1*kill", "merge.after_confirm=kill", "publisher.before_commit=kill", "merge.after_publish=kill"}
	for _, noProof := range []bool{false, true} {
		route := "certified"
		if noProof {
			route = "diff"
		}
		for _, s := range steps {
			out = append(out, mergeCase{name: route + "/" + s, kill: s, noProof: noProof})
		}
	}
	for _, s := range []string{"lance.branch.before_ref=kill", "merge.after_fork=kill", "merge.after_fork=1+1*kill", "merge.after_chain_commit=kill", "merge.after_confirm=kill"} {
		out = append(out, mergeCase{name: "first-touch/" + s, kill: s, target: "t"})
	}
	return out
}

// TestMergeCrashMatrix kills `worker merge` at every step of the BranchMerge protocol (after
// arming, after each chain commit, after confirmation, inside and after the publish, and at
// the fork steps of a first-touch target), recovers by a read-write open, and checks that the
// target is either untouched or fully merged, the source intact, and that the merge then
// completes exactly once.
func TestMergeCrashMatrix(t *testing.T) {
	var tl tally
	for _, c := range mergeCases() {
		t.Run(c.name, func(t *testing.T) {
			tl.add(runMergeCase(t, c))
		})
	}
	line := fmt.Sprintf("crash-matrix-merge: %d cases, %d lost, %d doubled, %d half-visible", tl.cases, tl.lost, tl.doubled, tl.half)
	summary = strings.TrimSpace(summary + "\n" + line)
	if tl.lost+tl.doubled+tl.half != 0 {
		t.Errorf("%s", line)
	}
}

func branchLines(t *testing.T, root storage.Store, branch string) string {
	t.Helper()
	g, err := engine.OpenReadOnly(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := g.Export(context.Background(), branch, 0, &buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func runMergeCase(t *testing.T, c mergeCase) (lost, doubled, half bool) {
	ctx := context.Background()
	dir, root, g := newGraph(t)
	load := func(branch, from string, mode engine.Mode, lines ...string) {
		recs, _ := framing.ParseBytes([]byte(strings.Join(lines, "\n")), framing.DefaultLimits())
		if _, err := g.Load(ctx, engine.LoadRequest{Branch: branch, From: from, Mode: mode, Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	load("", "", engine.ModeAppend, seed...)
	if c.target != "" {
		if err := g.CreateBranch(ctx, c.target, "main"); err != nil {
			t.Fatal(err)
		}
	}
	// Three tables change on the source: three chain transactions.
	load("s", "main", engine.ModeAppend, batches[2]...)
	if c.noProof {
		load("s", "", engine.ModeMerge, `{"type":"Person","data":{"handle":"seed","name":"Seed 2","active":false}}`)
	}
	before, want := branchLines(t, root, c.target), branchLines(t, root, "s")
	args := []string{"merge", "--root", dir, "--source", "s", "--target", "main", "--msg-id", "merge-1"}
	if c.target != "" {
		args[6] = c.target
		args = append(args, "--delete-source") // a first-touch target writes the rows (no ref-only fork)
	}
	if c.noProof {
		args = append(args, "--no-certified-route")
	}
	if killed, out := run(t, c.kill, args...); !killed {
		t.Fatalf("the merge was not killed at %s:\n%s", c.kill, out)
	}
	pending, _ := recovery.List(ctx, root)
	g2, err := engine.Open(ctx, root) // full recovery
	if err != nil {
		t.Fatalf("open after crash: %v", err)
	}
	assertAligned(t, g2)
	if l, _ := recovery.List(ctx, root); len(l) != 0 {
		t.Fatalf("sidecars left after recovery: %v (pending before: %v)", l, pending)
	}
	after := branchLines(t, root, c.target)
	if after != before && after != want {
		half = true
		t.Errorf("half-visible merge:\n%s\nbefore:\n%s\nwant:\n%s", after, before, want)
	}
	if got := branchLines(t, root, "s"); got != want {
		t.Errorf("the source changed:\n%s", got)
	}
	// The same merge again: applied now, or recognised by its receipt.
	if _, out := run(t, "", args...); !strings.Contains(out, `"outcome"`) {
		t.Fatalf("re-merge: %s", out)
	}
	final := branchLines(t, root, c.target)
	switch {
	case len(final) < len(want):
		lost = true
		t.Errorf("lost rows:\n%s\nwant:\n%s", final, want)
	case final != want:
		doubled = true
		t.Errorf("after the re-merge:\n%s\nwant:\n%s", final, want)
	}
	if merges := mergeCommits(t, root, c.target); merges != 1 {
		doubled = true
		t.Errorf("%d merge commits on the target, want 1", merges)
	}
	return lost, doubled, half
}

// mergeCommits counts the target's commits with a merged parent (recovery's own excluded).
func mergeCommits(t *testing.T, root storage.Store, branch string) int {
	g, err := engine.OpenReadOnly(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := g.Commits(context.Background(), branch)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cs {
		if c.MergedParentCommitID != nil {
			n++
		}
	}
	return n
}
