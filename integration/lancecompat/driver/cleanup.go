package main

import (
	"context"
	"fmt"
	"time"

	"github.com/omnigraph/omnigraph-worker/integration/lancecompat/canon"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// goCleansNode: after goCompactsNode, ocompact has a history written by both engines (the
// official engine's small appends, deletes and updates, Go's compaction, the official engine's
// append and compaction). Go removes every version but the newest two and every file only the
// removed ones named (unnamed files too); the official engine must read the newest version
// exactly and write on top of it, and Go must read that.
func goCleansNode(ctx context.Context, s *suite, dir string) {
	s.add("go-cleans-node/ocompact", func() error {
		st, d, err := openDataset(ctx, dir, "ocompact", "", 0)
		if err != nil {
			return err
		}
		rows, meta, err := readWithMeta(ctx, d)
		if err != nil {
			return err
		}
		plan, err := lance.PlanCleanup(ctx, st, map[string]uint64{"": d.Version() - 1}, time.Now().Add(time.Minute))
		if err != nil {
			return err
		}
		if plan.VersionsRemoved() == 0 || plan.FilesRemoved() == 0 {
			return fmt.Errorf("nothing to clean: %d versions, %d files", plan.VersionsRemoved(), plan.FilesRemoved())
		}
		if err := plan.Apply(ctx); err != nil {
			return err
		}
		versions, err := d.Versions(ctx)
		if err != nil || len(versions) != 2 {
			return fmt.Errorf("versions left: %v %v", versions, err)
		}
		v := d.Version()
		added := canon.Row{"id": "9100", "name": "after-cleanup", "val": 2.5}
		steps := []mutateStep{{Name: "ocompact-append-after-cleanup", Table: "ocompact", Op: "append", Rows: []canon.Row{added}}}
		if err := verifyByNode(ctx, s, dir, "go-cleaned", "ocompact", verifyCase{Name: "ocompact-go-cleaned", Table: "ocompact", Version: &v,
			Count: len(rows), Rows: rows, Meta: meta, Ordered: true}, steps); err != nil {
			return err
		}
		last, err := lance.Open(ctx, st)
		if err != nil {
			return err
		}
		got, _, err := readWithMeta(ctx, last)
		if err != nil {
			return err
		}
		if last.Version() != v+1 {
			return fmt.Errorf("after the official append: version %d, want %d", last.Version(), v+1)
		}
		return sameRowsInOrder(concat(rows, []canon.Row{added}), got)
	}())
}
