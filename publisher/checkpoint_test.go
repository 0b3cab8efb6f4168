package publisher

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/storage"
)

func smallCheckpoints(t *testing.T, rows uint64, receipts int) {
	t.Helper()
	r, w := CheckpointRows, RecentReceipts
	CheckpointRows, RecentReceipts = rows, receipts
	t.Cleanup(func() { CheckpointRows, RecentReceipts = r, w })
}

// publishN applies messages from..to-1 (one commit, receipt and table version each).
func publishN(t *testing.T, p *Publisher, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := p.Publish(context.Background(), Request{Lineage: &Lineage{CommitID: ids.NewULID(), CreatedAt: int64(i + 10)},
			Receipt: &Receipt{Stream: "S", Sequence: uint64(i), MsgID: fmt.Sprintf("m-%d", i), PayloadSHA256: fmt.Sprint(i)},
			Updates: []DatasetUpdate{update(person, "node:Person", uint64(i+2), uint64(i))}}); err != nil {
			t.Fatal(err)
		}
	}
}

func fullScan(t *testing.T, root storage.Store, branch string) *State {
	t.Helper()
	p := Open(root, branch)
	ds, err := lance.Open(context.Background(), p.store, lance.WithBranch(p.branch))
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.scan(context.Background(), ds)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sameState requires two states to answer every question alike: heads, tables, lineage head,
// each receipt of messages 0..n (and one never sent), every commit.
func sameState(t *testing.T, got, want *State, n int) {
	t.Helper()
	ctx := context.Background()
	if got.ManifestVersion != want.ManifestVersion || jsonOf(got.Heads) != jsonOf(want.Heads) ||
		jsonOf(got.Tables()) != jsonOf(want.Tables()) || jsonOf(got.LineageHead()) != jsonOf(want.LineageHead()) {
		t.Fatalf("state v%d heads %v tables %v lineage %v\nwant v%d heads %v tables %v lineage %v", got.ManifestVersion, got.Heads, got.Tables(), *got.LineageHead(),
			want.ManifestVersion, want.Heads, want.Tables(), *want.LineageHead())
	}
	if fmt.Sprint(got.addr) != fmt.Sprint(want.addr) {
		t.Fatalf("addresses %v, want %v", got.addr, want.addr)
	}
	for i := 0; i <= n; i++ {
		key := fmt.Sprintf("m-%d", i)
		a, aok, aerr := got.Receipt(ctx, key)
		b, bok, berr := want.Receipt(ctx, key)
		if aerr != nil || berr != nil || aok != bok || a != b {
			t.Fatalf("receipt %s: %+v %v %v, want %+v %v %v", key, a, aok, aerr, b, bok, berr)
		}
	}
	gc, err := got.AllCommits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wc, _ := want.AllCommits(ctx)
	sort.Slice(gc, func(i, j int) bool { return gc[i].ID < gc[j].ID })
	sort.Slice(wc, func(i, j int) bool { return wc[i].ID < wc[j].ID })
	if jsonOf(gc) != jsonOf(wc) {
		t.Fatalf("commits differ: %d vs %d", len(gc), len(wc))
	}
	for _, c := range wc {
		if x, ok, err := got.Commit(ctx, c.ID, 0); err != nil || !ok || jsonOf(x) != jsonOf(c) {
			t.Fatalf("commit %s: %+v %v %v", c.ID, x, ok, err)
		}
	}
}

// jsonOf prints a value with its pointers followed, for comparing.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func checkpointFiles(t *testing.T, p *Publisher) []uint64 {
	t.Helper()
	vs, err := p.checkpointVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// An open starts from the newest checkpoint and folds only the fragments after it (tail
// compactions included), and answers exactly as a full scan; the writer keeps two
// checkpoints.
func TestCheckpointOpenEqualsFullScan(t *testing.T) {
	smallCheckpoints(t, 40, 8)
	ctx := context.Background()
	root, _ := genesis(t)
	p := Open(root, "")
	publishN(t, p, 0, 150)
	if vs := checkpointFiles(t, p); len(vs) != checkpointsKept {
		t.Fatalf("checkpoints %v", vs)
	}
	cold, err := Open(root, "").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cold.CheckpointStatus, "checkpoint ") {
		t.Fatalf("opened by %s", cold.CheckpointStatus)
	}
	sameState(t, cold, fullScan(t, root, ""), 150)
	// Go on from the reopened state: its publishes and checkpoints are as good.
	p2 := Open(root, "")
	publishN(t, p2, 150, 230)
	again, err := Open(root, "").Snapshot(ctx)
	if err != nil || !strings.HasPrefix(again.CheckpointStatus, "checkpoint ") {
		t.Fatalf("reopen: %v %s", err, again.CheckpointStatus)
	}
	sameState(t, again, fullScan(t, root, ""), 230)
	// An older version reads from the checkpoint at or below it.
	old := checkpointFiles(t, p2)[1]
	at, err := Open(root, "").SnapshotAt(ctx, old+3)
	if err != nil || at.CheckpointStatus != "checkpoint "+checkpointName(old) || at.ManifestVersion != old+3 {
		t.Fatalf("SnapshotAt(%d): %v %s", old+3, err, at.CheckpointStatus)
	}
}

// A checkpoint that does not check out is never used: the open says why and scans; a torn
// newest one leaves the one before it in use.
func TestCheckpointRefusals(t *testing.T) {
	smallCheckpoints(t, 40, 8)
	ctx := context.Background()
	for _, tc := range []struct {
		name, want string
		spoil      func(t *testing.T, root storage.Store, p *Publisher, newest, older uint64)
	}{
		{"flipped byte", "checksum", func(t *testing.T, root storage.Store, p *Publisher, newest, older uint64) {
			for _, v := range []uint64{newest, older} {
				b, _ := p.checkpointStore().Get(ctx, checkpointName(v))
				b[len(b)/2] ^= 1
				if err := p.checkpointStore().Put(ctx, checkpointName(v), b); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"torn newest", "", func(t *testing.T, root storage.Store, p *Publisher, newest, older uint64) {
			b, _ := p.checkpointStore().Get(ctx, checkpointName(newest))
			if err := p.checkpointStore().Put(ctx, checkpointName(newest), b[:len(b)/3]); err != nil {
				t.Fatal(err)
			}
		}},
		{"another graph's", "not the one the checkpoint folded", func(t *testing.T, root storage.Store, p *Publisher, newest, older uint64) {
			other, _ := genesis(t)
			op := Open(other, "")
			publishN(t, op, 0, 150)
			for _, v := range []uint64{newest, older} {
				_ = p.checkpointStore().Delete(ctx, checkpointName(v))
			}
			for _, v := range checkpointFiles(t, op) {
				b, _ := op.checkpointStore().Get(ctx, checkpointName(v))
				if err := p.checkpointStore().Put(ctx, checkpointName(v), b); err != nil {
					t.Fatal(err)
				}
			}
		}},
		// A restore brings back fragments the checkpoints had seen merged away, or lowers the
		// highest fragment id, or a fragment's deleted rows: any of them refuses.
		{"manifest restored", "restore|not the one the checkpoint folded", func(t *testing.T, root storage.Store, p *Publisher, newest, older uint64) {
			ds, err := lance.Open(ctx, root.Sub(Dir))
			if err != nil {
				t.Fatal(err)
			}
			staged, err := ds.StageRestore(ctx, older-5, stageOptions)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ds.Commit(ctx, staged); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := genesis(t)
			p := Open(root, "")
			publishN(t, p, 0, 150)
			vs := checkpointFiles(t, p)
			tc.spoil(t, root, p, vs[0], vs[1])
			st, err := Open(root, "").Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.name == "torn newest":
				if st.CheckpointStatus != "checkpoint "+checkpointName(vs[1]) {
					t.Fatalf("opened by %s, want the older checkpoint", st.CheckpointStatus)
				}
			case !strings.HasPrefix(st.CheckpointStatus, "full scan: ") || !slices.ContainsFunc(strings.Split(tc.want, "|"), func(w string) bool { return strings.Contains(st.CheckpointStatus, w) }):
				t.Fatalf("opened by %q, want a full scan naming %q", st.CheckpointStatus, tc.want)
			}
			sameState(t, st, fullScan(t, root, ""), 150)
		})
	}
}

// A branch's checkpoints live under its Lance tree: a branch deleted and made again (another
// identifier) does not take the old one's, and never folds its rows.
func TestCheckpointOfARecreatedBranchIsRefused(t *testing.T) {
	smallCheckpoints(t, 20, 8)
	ctx := context.Background()
	root, _ := genesis(t)
	main, _ := lance.Open(ctx, root.Sub(Dir))
	if _, err := main.CreateBranch(ctx, "feature"); err != nil {
		t.Fatal(err)
	}
	p := Open(root, "feature")
	publishN(t, p, 0, 60)
	vs := checkpointFiles(t, p)
	if len(vs) == 0 {
		t.Fatal("the branch wrote no checkpoint")
	}
	saved := map[uint64][]byte{}
	for _, v := range vs {
		saved[v], _ = p.checkpointStore().Get(ctx, checkpointName(v))
	}
	if err := lance.DeleteBranch(ctx, root.Sub(Dir), "feature"); err != nil {
		t.Fatal(err)
	}
	if got := checkpointFiles(t, p); len(got) != 0 {
		t.Fatalf("the branch's checkpoints outlived it: %v", got)
	}
	if _, err := main.CreateBranch(ctx, "feature"); err != nil {
		t.Fatal(err)
	}
	q := Open(root, "feature")
	publishN(t, q, 100, 160)  // past the old checkpoints' versions
	for v, b := range saved { // as if the old tree had not been reclaimed
		if err := q.checkpointStore().Put(ctx, checkpointName(v), b); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range checkpointFiles(t, q) {
		if _, ok := saved[v]; !ok {
			_ = q.checkpointStore().Delete(ctx, checkpointName(v))
		}
	}
	st, err := Open(root, "feature").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.CheckpointStatus, "another incarnation") {
		t.Fatalf("opened by %q", st.CheckpointStatus)
	}
	if _, ok, _ := st.Receipt(ctx, "m-5"); ok {
		t.Fatal("the old branch's receipt is visible")
	}
	sameState(t, st, fullScan(t, root, "feature"), 160)
}

// A checkpoint write that fails (here the store refuses the put) leaves the checkpoints as they
// were, the publish that triggered it succeeds, and the next open uses the old checkpoint.
func TestCheckpointWriteFailureKeepsTheOldOne(t *testing.T) {
	smallCheckpoints(t, 40, 8)
	ctx := context.Background()
	root, _ := genesis(t)
	p := Open(root, "")
	publishN(t, p, 0, 60)
	before := checkpointFiles(t, p)
	if err := failpoint.Enable("storage.put", "error"); err != nil {
		t.Fatal(err)
	}
	err := p.WriteCheckpoint(ctx)
	failpoint.Disable("storage.put")
	if err == nil {
		t.Fatal("the checkpoint write did not fail")
	}
	if after := checkpointFiles(t, p); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("checkpoints %v -> %v", before, after)
	}
	st, err := Open(root, "").Snapshot(ctx)
	if err != nil || st.CheckpointStatus != "checkpoint "+checkpointName(before[0]) {
		t.Fatalf("reopen: %v %q", err, st.CheckpointStatus)
	}
	sameState(t, st, fullScan(t, root, ""), 60)
}
