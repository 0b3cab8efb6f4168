package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// OrphanGrace is how old a data or deletion file that no version names must be before a
// cleanup removes it: younger, it may belong to a write under way in another process (one
// that has not committed yet), which only its age tells from a leftover.
const OrphanGrace = time.Hour

// CleanupOptions choose which old versions a cleanup removes.
type CleanupOptions struct {
	// Keep is how many of the newest versions stay on each branch of every dataset (at least 1).
	Keep int
	// OlderThan, when positive, also keeps every version committed less than this long ago.
	OlderThan time.Duration
	// DryRun plans and reports without removing anything.
	DryRun bool
}

// DatasetCleanup is what a cleanup removed (or would remove) from one dataset.
type DatasetCleanup struct {
	TypeKey            string `json:"type_key"` // a table key, or "__manifest"
	OldVersionsRemoved int    `json:"old_versions_removed"`
	FilesRemoved       int    `json:"files_removed"`
	BytesRemoved       uint64 `json:"bytes_removed"`
}

// CleanupResult lists every dataset a cleanup touched.
type CleanupResult struct {
	DryRun   bool             `json:"dry_run"`
	Datasets []DatasetCleanup `json:"datasets"`
}

// Cleanup removes old versions of the graph's datasets and the files only they name. What the
// graph can still read stays:
//   - on every graph branch, the Keep newest __manifest versions (and with OlderThan the
//     recent ones), and the version of every commit that is the newest common ancestor of two
//     live branch heads: the only old snapshots a merge reads (a merge's base is such an
//     ancestor or a head);
//   - of every table on main, every version at or above the oldest one a kept snapshot pins
//     (so a merge's walk from its base version up finds every transaction), and the Keep
//     newest; every version of a table on another branch (a stage's whole history is what
//     its certified merge proves its inserts with);
//   - every branch's newest version and a branch's first one (its fork).
//
// It refuses while a recovery intent is pending: recovery may need the history it would
// remove. A version below those horizons can no longer be read (export --version, or a
// snapshot at it); that is what removing it means.
//
// It is fenced like a write (SetFence): before it starts, and before it removes each dataset's
// files, since a writer that lost its lease must not delete what the new one may be reading.
func (g *Graph) Cleanup(ctx context.Context, o CleanupOptions) (*CleanupResult, error) {
	if o.Keep < 1 {
		return nil, &errs.InvalidInput{Field: "keep", Reason: "must be at least 1"}
	}
	g.lockSettled()
	defer g.writeMu.Unlock()
	if err := g.checkFence(ctx, "cleanup"); err != nil {
		return nil, err
	}
	g.WaitRetired()
	if err := g.heal(ctx); err != nil {
		return nil, err
	}
	if pending, err := recovery.List(ctx, g.root); err != nil {
		return nil, err
	} else if len(pending) > 0 {
		return nil, &errs.RecoveryRequired{OperationID: pending[0].Name[:len(pending[0].Name)-len(".json")],
			Reason: "cleanup refuses while a recovery intent is pending; run worker recover first"}
	}
	branches := []string{""}
	bs, err := g.Branches(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		branches = append(branches, b.Name)
	}
	cutoff := time.Time{}
	if o.OlderThan > 0 {
		cutoff = time.Now().Add(-o.OlderThan)
	}
	// __manifest: a horizon per graph branch.
	states := make([]*publisher.State, len(branches))
	manifestVersions := make([][]uint64, len(branches))
	manifestHorizon := map[string]uint64{}
	for i, b := range branches {
		pub := g.publisher(b)
		if states[i], err = pub.Snapshot(ctx); err != nil {
			return nil, err
		}
		if manifestVersions[i], err = pub.Dataset().Versions(ctx); err != nil {
			return nil, err
		}
		if manifestHorizon[b], err = horizon(ctx, pub.Dataset(), manifestVersions[i], o.Keep, cutoff); err != nil {
			return nil, err
		}
	}
	for i := range branches {
		for j := i + 1; j < len(branches); j++ {
			rel, err := relate(&lineage{ctx: ctx, states: []*publisher.State{states[i], states[j]}}, headOf(states[i], branches[i]), headOf(states[j], branches[j]))
			var none *noCommonAncestor
			if errors.As(err, &none) || err == nil && rel.base.ID == "" {
				continue // no common ancestor (or nothing to merge): no merge reads a base
			}
			if err != nil {
				return nil, err
			}
			b := normBranch(derefOr(rel.base.Branch))
			if h, ok := manifestHorizon[b]; ok && rel.base.ManifestVersion < h {
				manifestHorizon[b] = rel.base.ManifestVersion
			}
		}
	}
	// Tables: a horizon per (table, Lance branch) below every pin a kept snapshot holds.
	type tableBranch struct{ path, branch string }
	minPin := map[tableBranch]uint64{}
	keys := map[string]string{} // path -> table key
	for i, b := range branches {
		pub := g.publisher(b)
		for _, v := range manifestVersions[i] {
			if v < manifestHorizon[b] {
				continue
			}
			st, err := pub.SnapshotAt(ctx, v)
			if err != nil {
				return nil, fmt.Errorf("cleanup: read snapshot %d of %s: %w", v, ids.BranchKey(b), err)
			}
			for _, e := range st.Tables() {
				tb := tableBranch{e.Path, derefOr(e.Branch)}
				if p, ok := minPin[tb]; !ok || e.Version < p {
					minPin[tb] = e.Version
				}
				keys[e.Path] = e.TableKey
			}
		}
	}
	res := &CleanupResult{DryRun: o.DryRun, Datasets: []DatasetCleanup{}}
	run := func(key, path string, horizons map[string]uint64) error {
		plan, err := lance.PlanCleanup(ctx, g.root.Sub(path), horizons, time.Now().Add(-OrphanGrace))
		if err != nil {
			return fmt.Errorf("cleanup: plan %s: %w", key, err)
		}
		if plan.VersionsRemoved() == 0 && plan.FilesRemoved() == 0 {
			return nil
		}
		if !o.DryRun {
			if err := g.checkFence(ctx, "cleanup of "+key); err != nil {
				return err
			}
			if err := plan.Apply(ctx); err != nil {
				return fmt.Errorf("cleanup: %s: %w", key, err)
			}
		}
		res.Datasets = append(res.Datasets, DatasetCleanup{TypeKey: key, OldVersionsRemoved: plan.VersionsRemoved(),
			FilesRemoved: plan.FilesRemoved(), BytesRemoved: plan.BytesRemoved()})
		return nil
	}
	paths := make([]string, 0, len(keys))
	for p := range keys {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		horizons := map[string]uint64{}
		for tb, pin := range minPin {
			if tb.path != path || tb.branch != "" {
				// A stage's table versions all stay: a certified merge proves the stage's
				// inserts by walking every transaction since its fork, and a stage lives
				// until it is merged and deleted, when its versions go with it.
				continue
			}
			head, err := lance.Open(ctx, g.root.Sub(path), lance.WithBranch(tb.branch))
			if err != nil {
				return nil, err
			}
			versions, err := head.Versions(ctx)
			if err != nil {
				return nil, err
			}
			h, err := horizon(ctx, head, versions, o.Keep, cutoff)
			if err != nil {
				return nil, err
			}
			horizons[tb.branch] = min(h, pin)
		}
		if err := run(keys[path], path, horizons); err != nil {
			return nil, err
		}
	}
	if err := run(publisher.Dir, publisher.Dir, manifestHorizon); err != nil {
		return nil, err
	}
	return res, nil
}

// horizon is the oldest of versions (ds's branch's, ascending) a cleanup keeps by age: the
// keep newest, and with a cutoff every version committed after it (a version without a commit
// time counts as recent).
func horizon(ctx context.Context, ds *lance.Dataset, versions []uint64, keep int, cutoff time.Time) (uint64, error) {
	if len(versions) <= keep {
		return versions[0], nil
	}
	i := len(versions) - keep // versions[i:] are kept
	if cutoff.IsZero() {
		return versions[i], nil
	}
	// Commit times rise with versions: find the first version at or after the cutoff.
	old := func(k int) (bool, error) {
		d, err := ds.Checkout(ctx, versions[k])
		if err != nil {
			return false, err
		}
		ts := d.Manifest().Timestamp
		return !ts.IsZero() && ts.Before(cutoff), nil
	}
	lo, hi := 0, i // the answer is in [lo, hi]: versions[hi] is kept anyway
	for lo < hi {
		mid := (lo + hi) / 2
		isOld, err := old(mid)
		if err != nil {
			return 0, err
		}
		if isOld {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return versions[lo], nil
}
