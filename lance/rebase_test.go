package lance

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
)

// stagedRun stages a compaction of the newest n fragments of d.
func stagedRun(t *testing.T, d *Dataset, n int) (*Staged, *Compaction) {
	t.Helper()
	frags := d.Manifest().Fragments
	var run []uint64
	for _, f := range frags[len(frags)-n:] {
		run = append(run, f.ID)
	}
	s, c, err := d.StageCompaction(context.Background(), CompactionOptions{Fragments: run, MaterializeDeletionsThreshold: -1},
		StageOptions{InlineTransactionOnly: true})
	if err != nil || s == nil {
		t.Fatalf("stage: %v %v", s, err)
	}
	return s, c
}

// A rewrite staged at one version commits after appends committed meanwhile: it replaces the
// fragments it read, the appended ones stay, every row keeps its id and versions, new ids go
// to no fragment twice, and old addresses map to the new fragments.
func TestRebaseRewritePastAppends(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 3)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(3)
	d = buildSmallAppends(t, d, rand.New(rand.NewPCG(7, 8)), 12, &next)
	s, c := stagedRun(t, d, 5)
	read := liveRows(t, d)
	for range 3 {
		a, err := d.StageAppend(ctx, rows(seq(next, next+2)...), StageOptions{})
		d = commit(t, d, a, err)
		next += 2
	}
	before := liveRows(t, d)
	if err := s.Rebase(d); err != nil {
		t.Fatal(err)
	}
	if s.Txn.ReadVersion != d.Version() {
		t.Fatalf("read version %d after the rebase onto %d", s.Txn.ReadVersion, d.Version())
	}
	nd, err := d.Commit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	after := liveRows(t, nd)
	sameRows(t, "after the rebased compaction", after, before)
	checkScanMeta(t, nd, after)
	if got, want := nd.NumFragments(), d.NumFragments()-c.FragmentsRemoved()+c.FragmentsAdded(); got != want {
		t.Fatalf("%d fragments, want %d", got, want)
	}
	remap, err := c.Remap(nd)
	if err != nil {
		t.Fatal(err)
	}
	now := addresses(after)
	for _, r := range read {
		if got, moved := remap(r.addr); moved && got != now[r.key] {
			t.Fatalf("key %d: remapped to %v, lives at %v", r.key, got, now[r.key])
		}
	}
	// Reopened from storage, the committed version reads the same.
	re, err := Open(ctx, d.root, AtVersion(nd.Version()))
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "reopened", liveRows(t, re), before)
}

// A rewrite whose fragments changed after it read them (a delete, an update, a rewrite of
// theirs) is refused with *RewriteConflictError and nothing commits; a non-Rewrite, an older
// version or another dataset is refused as a misuse.
func TestRebaseRefusesChangedFragments(t *testing.T) {
	ctx := context.Background()
	table := func(t *testing.T) (*Dataset, int64) {
		d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 3)...), CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next := int64(3)
		return buildSmallAppends(t, d, rand.New(rand.NewPCG(9, 10)), 12, &next), next
	}
	newest := func(d *Dataset) []rowInfo {
		var out []rowInfo
		last := d.Manifest().Fragments[d.NumFragments()-1].ID
		for _, r := range liveRows(t, d) {
			if r.addr.Fragment() == last {
				out = append(out, r)
			}
		}
		return out
	}
	for _, change := range []struct {
		name string
		do   func(d *Dataset) (*Staged, error)
	}{
		{"delete", func(d *Dataset) (*Staged, error) {
			return d.StageDelete(ctx, In("id", newest(d)[0].key), StageOptions{})
		}},
		{"update keeping ids", func(d *Dataset) (*Staged, error) { return upsertKeepingIDs(t, d, newest(d)[:1]), nil }},
		{"rewrite", func(d *Dataset) (*Staged, error) {
			return d.StageRewriteRows(ctx, []RowAddress{newest(d)[0].addr}, nil, StageOptions{})
		}},
	} {
		t.Run(change.name, func(t *testing.T) {
			d, _ := table(t)
			s, _ := stagedRun(t, d, 4)
			staged := s.Txn.ReadVersion
			x, err := change.do(d)
			changed := commit(t, d, x, err)
			err = s.Rebase(changed)
			var rc *RewriteConflictError
			if !errors.As(err, &rc) || rc.ReadVersion != staged || rc.Version != changed.Version() || rc.Fragment == 0 {
				t.Fatalf("rebase onto a changed fragment: %v", err)
			}
			if s.Txn.ReadVersion != staged {
				t.Fatalf("a refused rebase moved the read version to %d", s.Txn.ReadVersion)
			}
			if _, err := changed.Commit(ctx, s); err == nil {
				t.Fatal("the refused rewrite committed")
			}
		})
	}
	d, next := table(t)
	s, _ := stagedRun(t, d, 4)
	a, err := d.StageAppend(ctx, rows(seq(next, next+1)...), StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Rebase(d); err == nil {
		t.Error("an Append rebased")
	}
	older, err := Open(ctx, d.root, AtVersion(d.Version()-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Rebase(older); err == nil {
		t.Error("rebased onto an older version")
	}
	other, err := Create(ctx, d.root.Sub("other"), testSchema(t), rows(1), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Rebase(other); err == nil {
		t.Error("rebased onto another dataset")
	}
}
