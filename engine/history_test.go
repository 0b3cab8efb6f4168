package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// smallMemory shrinks the writer's in-memory receipt window and commit cache (and the
// checkpoint interval) for one test, so that a short history already lies past them.
func smallMemory(t *testing.T, receipts, commitBytes int, checkpointRows uint64) {
	t.Helper()
	r, c, k := publisher.RecentReceipts, publisher.CommitCacheBytes, publisher.CheckpointRows
	publisher.RecentReceipts, publisher.CommitCacheBytes, publisher.CheckpointRows = receipts, commitBytes, checkpointRows
	t.Cleanup(func() { publisher.RecentReceipts, publisher.CommitCacheBytes, publisher.CheckpointRows = r, c, k })
}

func personN(i int) string {
	return fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P%d","active":true}}`, i, i)
}

// Receipts past the in-memory window keep today's exact semantics: more messages are applied
// than the window holds, then the first one is delivered again (same stream sequence, same
// msg id, same body: already applied, with its commit, nothing written) and its msg id is
// reused with another body (MsgIDReused naming the first body's commit); a new message is
// applied without the state reading __manifest. All of it again on a reopened graph, which
// starts from a checkpoint.
func TestReceiptsPastTheWindowStayExact(t *testing.T) {
	smallMemory(t, 4, 4<<10, 64)
	ctx := context.Background()
	g := testGraph(t)
	rc := func(seq int, sum string) *publisher.Receipt {
		return &publisher.Receipt{Stream: "S", Sequence: uint64(seq), MsgID: fmt.Sprintf("m-%d", seq), PayloadSHA256: sum}
	}
	const n = 40
	var first *LoadResult
	for i := 1; i <= n; i++ {
		res, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, personN(i)), Receipt: rc(i, fmt.Sprintf("sum-%d", i))})
		if err != nil || res.AlreadyApplied {
			t.Fatalf("load %d: %+v %v", i, res, err)
		}
		if i == 1 {
			first = res
		}
	}
	check := func(g *Graph, name string) {
		t.Helper()
		st, err := g.Snapshot(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		version, lookups := st.ManifestVersion, st.DiskLookups()
		again, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, personN(1)), Receipt: rc(1, "sum-1")})
		if err != nil || !again.AlreadyApplied || again.Commit.GraphCommitID != first.Commit.GraphCommitID ||
			again.Commit.GraphManifestVersion != first.Commit.GraphManifestVersion || again.Commit.CreatedAt != first.Commit.CreatedAt {
			t.Fatalf("%s: redelivery of message 1: %+v %v", name, again, err)
		}
		_, err = g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, personN(999)), Receipt: &publisher.Receipt{Stream: "S", Sequence: 500, MsgID: "m-1", PayloadSHA256: "other"}})
		var reused *errs.MsgIDReused
		if !errors.As(err, &reused) || reused.AppliedPayloadSHA256 != "sum-1" || reused.PayloadSHA256 != "other" || reused.GraphCommitID != first.Commit.GraphCommitID {
			t.Fatalf("%s: reused msg id: %v", name, err)
		}
		if st, _ := g.Snapshot(ctx, ""); st.ManifestVersion != version {
			t.Fatalf("%s: the refused and the redelivered message wrote: manifest v%d -> v%d", name, version, st.ManifestVersion)
		}
		if st.DiskLookups() == lookups {
			t.Fatalf("%s: a receipt past the window was answered without reading __manifest", name)
		}
		lookups = st.DiskLookups()
		res, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, personN(1000+int(version))), Receipt: rc(1000+int(version), "new")})
		if err != nil || res.AlreadyApplied {
			t.Fatalf("%s: a new message: %+v %v", name, res, err)
		}
		if st.DiskLookups() != lookups {
			t.Fatalf("%s: a new message read __manifest %d times", name, st.DiskLookups()-lookups)
		}
	}
	check(g, "writer")
	g2, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := g2.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.CheckpointStatus[:len("checkpoint")] != "checkpoint" {
		t.Fatalf("reopened without a checkpoint: %s", st.CheckpointStatus)
	}
	check(g2, "reopened")
}

// A merge finds its base through commits long evicted from the commit cache, and agrees with
// what the graph holds: the branch forks, both sides take many commits, and the merge is a
// three-way merge (not a fast-forward) whose base is the fork point.
func TestMergeBaseFoundPastTheCommitCache(t *testing.T) {
	smallMemory(t, 4, 2<<10, 1<<20)
	ctx := context.Background()
	root, _ := graphtest.Root(t)
	g, err := Init(ctx, root, graphtest.Schema(t, graphtest.Example))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Load(ctx, LoadRequest{Branch: "s", From: "main", Mode: ModeAppend, Records: records(t, personN(0))}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 30; i++ {
		branch := "s"
		if i%2 == 0 {
			branch = ""
		}
		if _, err := g.Load(ctx, LoadRequest{Branch: branch, Mode: ModeAppend, Records: records(t, personN(i))}); err != nil {
			t.Fatal(err)
		}
	}
	g2, err := Open(ctx, root) // cold: nothing of the fork in memory
	if err != nil {
		t.Fatal(err)
	}
	res, err := g2.Merge(ctx, MergeRequest{Source: "s", Target: "main"})
	if err != nil || res.Outcome != OutcomeMerged {
		t.Fatalf("merge: %+v %v", res, err)
	}
	if st, _ := g2.Snapshot(ctx, ""); st.DiskLookups() == 0 {
		t.Fatal("the walk never went past the commit cache")
	}
	out := export(t, g2, "")
	for i := 0; i <= 30; i++ {
		if !strings.Contains(out, fmt.Sprintf(`"handle":"p%d"`, i)) {
			t.Fatalf("p%d missing after the merge:\n%s", i, out)
		}
	}
}

// A receipt lookup that cannot read __manifest fails the message (to be retried in place):
// it is neither applied (here it would be: its body is new) nor reported already applied.
func TestHistoryReadFailuresFailTheMessage(t *testing.T) {
	smallMemory(t, 2, 2<<10, 1<<20)
	ctx := context.Background()
	g := testGraph(t)
	for i := 1; i <= 10; i++ {
		rc := &publisher.Receipt{MsgID: fmt.Sprintf("m-%d", i), PayloadSHA256: "x"}
		if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, personN(i)), Receipt: rc}); err != nil {
			t.Fatal(err)
		}
	}
	if err := failpoint.Enable("publisher.lookup", "error(EIO)"); err != nil {
		t.Fatal(err)
	}
	res, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, personN(500)), Receipt: &publisher.Receipt{MsgID: "m-1", PayloadSHA256: "x"}})
	failpoint.Disable("publisher.lookup")
	if !errors.Is(err, syscall.EIO) || res != nil {
		t.Fatalf("redelivery with __manifest unreadable: %+v %v", res, err)
	}
	if res, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, personN(1)), Receipt: &publisher.Receipt{MsgID: "m-1", PayloadSHA256: "x"}}); err != nil || !res.AlreadyApplied {
		t.Fatalf("redelivery once readable: %+v %v", res, err)
	}
}

// A merge whose base lies past the commit cache fails, writing nothing, when __manifest cannot
// be read for it, and goes through once it can.
func TestMergeWalkReadFailureFailsTheMerge(t *testing.T) {
	smallMemory(t, 4, 1<<10, 1<<20)
	ctx := context.Background()
	g := testGraph(t)
	if _, err := g.Load(ctx, LoadRequest{Branch: "s", From: "main", Mode: ModeAppend, Records: records(t, personN(0))}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		branch := map[bool]string{true: "s", false: ""}[i%2 == 1]
		if _, err := g.Load(ctx, LoadRequest{Branch: branch, Mode: ModeAppend, Records: records(t, personN(i))}); err != nil {
			t.Fatal(err)
		}
	}
	g2, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := g2.Snapshot(ctx, "")
	v := before.ManifestVersion
	if err := failpoint.Enable("publisher.lookup", "error(EIO)"); err != nil {
		t.Fatal(err)
	}
	_, err = g2.Merge(ctx, MergeRequest{Source: "s", Target: "main"})
	failpoint.Disable("publisher.lookup")
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("merge with __manifest unreadable: %v", err)
	}
	if st, _ := g2.Snapshot(ctx, ""); st.ManifestVersion != v {
		t.Fatal("the failed merge wrote")
	}
	if res, err := g2.Merge(ctx, MergeRequest{Source: "s", Target: "main"}); err != nil || res.Outcome != OutcomeMerged {
		t.Fatalf("merge once readable: %+v %v", res, err)
	}
}
