package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// checkNoDrift requires the table's Lance HEAD to equal its manifest pin.
func checkNoDrift(ctx context.Context, ds *lance.Dataset, e publisher.TableEntry) error {
	latest, err := ds.Latest(ctx)
	if err != nil {
		return err
	}
	return driftOf(latest, e)
}

// headProbes are the Lance HEADs of tables, by path, read beside a snapshot from the datasets
// the writer holds: both are reads, and one after the other they were a round trip per table.
type headProbes map[string]*headProbe

type headProbe struct {
	head *lance.Dataset
	err  error
}

// probeHeads starts probing the HEAD of each main table at paths the writer holds; wait
// returns once all are read.
func (g *Graph) probeHeads(ctx context.Context, paths []string) (probes headProbes, wait func()) {
	probes = make(headProbes, len(paths))
	var wg sync.WaitGroup
	for _, path := range paths {
		ts, ok := g.tables[tableRef{path: path}]
		if !ok {
			continue // checkNoDrift probes it once it is opened
		}
		hp := &headProbe{}
		probes[path] = hp
		wg.Go(func() { hp.head, hp.err = ts.ds.Latest(ctx) })
	}
	return probes, wg.Wait
}

// checkNoDrift is the package's checkNoDrift, from the probe of e's table when there is one.
func (probes headProbes) checkNoDrift(ctx context.Context, ds *lance.Dataset, e publisher.TableEntry) error {
	hp := probes[e.Path]
	if hp == nil {
		return checkNoDrift(ctx, ds, e)
	}
	if hp.err != nil {
		return hp.err
	}
	return driftOf(hp.head, e)
}

// driftOf is the verdict on a table's Lance HEAD (latest) against its published entry e.
func driftOf(latest *lance.Dataset, e publisher.TableEntry) error {
	if latest.Version() != e.Version {
		return &DriftError{TableKey: e.TableKey, Path: e.Path, Branch: derefOr(e.Branch), Head: latest.Version(), Published: e.Version}
	}
	return nil
}

// DriftError is a table whose Lance HEAD is ahead of its published version with no recovery
// sidecar covering it: nothing a write can resolve. Its kind is table_drift (the graph needs an
// operator); RestoreDrift (`worker recover --restore-drift`) is the operator's fix.
type DriftError struct {
	TableKey        string
	Path            string // the table's dataset directory under the graph root
	Branch          string // the Lance branch of the table ("" = main)
	Head, Published uint64
}

func (e *DriftError) Error() string {
	on := ""
	if e.Branch != "" {
		on = " on branch " + e.Branch
	}
	return fmt.Sprintf("table %s (%s%s) is at Lance HEAD version %d, ahead of published dataset version %d, moved by a writer outside a graph commit; "+
		"with no worker serving the graph, `worker recover --root <root> --restore-drift` restores it to version %d and publishes that",
		e.TableKey, e.Path, on, e.Head, e.Published, e.Published)
}

// ErrorKind is table_drift (graph/errs.KindTableDrift).
func (e *DriftError) ErrorKind() string { return errs.KindTableDrift }

// ErrorDetail names the table and both versions.
func (e *DriftError) ErrorDetail() map[string]any {
	return map[string]any{"table_key": e.TableKey, "path": e.Path, "branch": e.Branch, "head": e.Head, "published": e.Published}
}

// DriftActor is the actor of the graph commits RestoreDrift makes.
const DriftActor = "omnigraph-worker:restore-drift"

// DriftRestore is one table RestoreDrift put back.
type DriftRestore struct {
	Branch    string `json:"branch"`
	TableKey  string `json:"table_key"`
	Published uint64 `json:"published_version"` // the version the graph read before and reads again
	Head      uint64 `json:"drifted_head"`      // the HEAD a writer outside a graph commit left
	// Restored is the table's new HEAD: a Lance Restore of Published (Lance never moves a HEAD
	// back, so a restore is one more version), now the published one.
	Restored      uint64 `json:"restored_version"`
	GraphCommitID string `json:"graph_commit_id"`
}

// RestoreDrift is the operator's fix for DriftError: every table of every branch whose Lance
// HEAD is ahead of its published version is restored to that version by a Lance Restore, and
// the restored HEADs are published in one graph commit per branch (by DriftActor), so the
// graph reads exactly what it read before and writes go on. The foreign versions stay in the
// table's history, unpublished, until cleanup removes them. A Lance restore alone would not do:
// it is a new version, still ahead of the published one.
//
// It refuses while a recovery intent is pending (RecoveryRequired): such a table is the
// intent's to resolve, so Recover runs first. A crash between a table's restore and the
// publish leaves that table drifted again, and a second run restores and publishes it.
func (g *Graph) RestoreDrift(ctx context.Context) ([]DriftRestore, error) {
	g.lockSettled()
	defer g.writeMu.Unlock()
	if err := g.checkFence(ctx, "restoring drifted tables"); err != nil {
		return nil, err
	}
	g.WaitRetired()
	listed, err := recovery.List(ctx, g.root)
	if err != nil {
		return nil, err
	}
	if len(listed) > 0 {
		return nil, &errs.RecoveryRequired{OperationID: strings.TrimSuffix(listed[0].Name, ".json"),
			Reason: "drift is restored only with no recovery intent pending; run worker recover without --restore-drift first"}
	}
	// Every cached table state may describe a HEAD this changes.
	defer func() { g.tables = map[tableRef]*tableState{} }()
	branches, err := g.Branches(ctx)
	if err != nil {
		return nil, err
	}
	names := []string{""}
	for _, b := range branches {
		names = append(names, b.Name)
	}
	var out []DriftRestore
	for _, b := range names {
		restored, err := g.restoreBranchDrift(ctx, b)
		out = append(out, restored...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// restoreBranchDrift restores the drifted tables branch b owns (a table b reads through from
// its parent is the parent's to restore) and publishes them in one commit on b.
func (g *Graph) restoreBranchDrift(ctx context.Context, b string) ([]DriftRestore, error) {
	pub := g.publisher(b)
	st, err := pub.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{}}
	var out []DriftRestore
	for _, e := range st.Tables() {
		if derefOr(e.Branch) != b {
			continue
		}
		ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.WithBranch(b))
		if err != nil {
			return nil, err
		}
		switch head := ds.Version(); {
		case head == e.Version:
			continue
		case head < e.Version:
			return nil, fmt.Errorf("table %s: Lance HEAD %d is behind its published version %d; not restoring", e.TableKey, head, e.Version)
		}
		staged, err := ds.StageRestore(ctx, e.Version, lance.StageOptions{})
		if err != nil {
			return nil, fmt.Errorf("restore %s to %d: %w", e.TableKey, e.Version, err)
		}
		next, err := ds.Commit(ctx, staged)
		if err != nil {
			return nil, fmt.Errorf("restore %s to %d: %w", e.TableKey, e.Version, err)
		}
		req.Updates = append(req.Updates, publisher.DatasetUpdate{Identity: e.Identity, TableKey: e.TableKey, Version: next.Version(),
			Branch: ids.BranchPtr(next.Branch()), RowCount: next.CountRows(), Meta: publisher.VersionMetadata(next)})
		req.Expected[e.Identity] = publisher.Expectation{TableKey: e.TableKey, Version: e.Version}
		out = append(out, DriftRestore{Branch: ids.BranchKey(b), TableKey: e.TableKey, Published: e.Version, Head: ds.Version(), Restored: next.Version()})
	}
	if len(out) == 0 {
		return nil, nil
	}
	if err := g.checkFence(ctx, "publishing restored tables"); err != nil {
		return nil, err
	}
	commitID := ids.NewULID()
	req.Lineage = &publisher.Lineage{CommitID: commitID, ActorID: DriftActor, CreatedAt: time.Now().UnixMicro()}
	if _, err := pub.Publish(ctx, req); err != nil {
		return nil, fmt.Errorf("publish the restored tables of %s: %w", ids.BranchKey(b), err)
	}
	for i := range out {
		out[i].GraphCommitID = commitID
	}
	return out, nil
}
