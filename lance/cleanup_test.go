package lance

import (
	"context"
	"testing"
	"time"
)

// PlanCleanup removes the versions below each named branch's horizon (never a branch's newest
// or a branch's fork version) and the files only they name: a file a kept version still
// names, here a fragment the branch shares with main, stays; every kept version reads whole.
func TestPlanCleanup(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(1, 2, 3), CreateOptions{}) // v1
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 4; i++ { // v2..v5
		s, err := d.StageAppend(ctx, rows(10+i), StageOptions{})
		d = commit(t, d, s, err)
	}
	feat, err := d.CreateBranch(ctx, "feat") // forked at v5: names main's fragments
	if err != nil {
		t.Fatal(err)
	}
	s, err := feat.StageAppend(ctx, rows(100), StageOptions{})
	feat = commit(t, feat, s, err) // feat v6
	s, err = d.StageDelete(ctx, In("id", 2, 10), StageOptions{})
	d = commit(t, d, s, err) // v6: a deletion file on fragment 0, fragment 1 gone
	staged, _, err := d.StageCompaction(ctx, CompactionOptions{}, StageOptions{})
	d = commit(t, d, staged, err) // v7: everything in one fragment
	files := func() int {
		objs, err := st.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	before := files()

	plan, err := PlanCleanup(ctx, st, map[string]uint64{"": 7, "feat": 6}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// Main's v1..v6 go (feat's fork is its own first version, in its own tree, and stays).
	// Fragment 0's first data file and the others are still named by feat's versions; only the
	// deletion file of v6 is named by removed versions alone.
	if plan.VersionsRemoved() != 6 || plan.FilesRemoved() != 1 {
		t.Fatalf("plan: %d versions, %d files", plan.VersionsRemoved(), plan.FilesRemoved())
	}
	if err := plan.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if got := files(); got != before-13 { // six manifests, their six transaction files, one deletion file
		t.Fatalf("files %d -> %d, want 13 fewer", before, got)
	}
	latest, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	eqIDs(t, scanIDs(t, latest), []int64{1, 3, 11, 12, 13})
	if _, err := Open(ctx, st, AtVersion(6)); err == nil {
		t.Fatal("version 6 still opens")
	}
	for _, v := range []uint64{5, 6} {
		fv, err := Open(ctx, st, WithBranch("feat"), AtVersion(v))
		if err != nil {
			t.Fatalf("feat v%d: %v", v, err)
		}
		want := []int64{1, 2, 3, 10, 11, 12, 13}
		if v == 6 {
			want = append(want, 100)
		}
		eqIDs(t, scanIDs(t, fv), want)
	}
	// Again: nothing left below the horizons.
	if plan, err = PlanCleanup(ctx, st, map[string]uint64{"": 7, "feat": 6}, time.Now().Add(time.Minute)); err != nil || plan.VersionsRemoved()+plan.FilesRemoved() != 0 {
		t.Fatalf("second plan: %+v %v", plan, err)
	}
	// Once feat is gone, main's old fragments (five data files) are named by no version: only
	// the orphan sweep finds them, and an unrelated file written under data/ goes with them.
	if err := DeleteBranch(ctx, st, "feat"); err != nil {
		t.Fatal(err)
	}
	if plan, err = PlanCleanup(ctx, st, map[string]uint64{"": 7}, time.Time{}); err != nil || plan.VersionsRemoved()+plan.FilesRemoved() != 0 {
		t.Fatalf("after the branch, without orphans: %+v %v", plan, err)
	}
	if err := st.Put(ctx, "data/never-committed.lance", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if plan, err = PlanCleanup(ctx, st, map[string]uint64{"": 7}, time.Now().Add(-time.Hour)); err != nil || plan.FilesRemoved() != 0 {
		t.Fatalf("unnamed files younger than the grace: %+v %v", plan, err)
	}
	if plan, err = PlanCleanup(ctx, st, map[string]uint64{"": 7}, time.Now().Add(time.Minute)); err != nil || plan.VersionsRemoved() != 0 || plan.FilesRemoved() != 6 {
		t.Fatalf("after the branch, with orphans: %+v %v", plan, err)
	}
	if err := plan.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	latest, err = Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	eqIDs(t, scanIDs(t, latest), []int64{1, 3, 11, 12, 13})
}
