package recovery

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// OptimizeTable is one main-branch table an Optimize intends to compact with one Lance Rewrite
// read from ExpectedVersion (its manifest pin).
type OptimizeTable struct {
	Identity        ids.TableIdentity
	TableKey        string
	ExpectedVersion uint64
}

// NewOptimizeSidecar builds the v9 Optimize envelope: main, the actor, and one identity-bearing
// pin per table (post_commit_pin = expected_version + 1) and nothing else. Its bounded payload
// carries no transaction identity: a Rewrite changes no row, so recovery keeps whatever landed
// and needs no proof of whose it was beyond "a Rewrite read from the pin".
func NewOptimizeSidecar(root string, actor *string, tables []OptimizeTable) (*Sidecar, error) {
	op := ids.NewULID()
	s := &Sidecar{
		SchemaVersion: SchemaVersion,
		OperationID:   op,
		StartedAt:     strconv.FormatInt(time.Now().UnixMicro(), 10),
		ActorID:       actor,
		WriterKind:    Optimize,
		Tables:        make([]TablePin, 0, len(tables)),
	}
	for _, t := range tables {
		path, ok := TablePath(root, t.TableKey, t.Identity)
		if !ok {
			return nil, refuse(Key(op), KindShape, "invalid table key %q", t.TableKey)
		}
		if t.ExpectedVersion == ^uint64(0) {
			return nil, refuse(Key(op), KindShape, "table %q expected_version has no successor", t.TableKey)
		}
		s.Tables = append(s.Tables, TablePin{Identity: t.Identity, TableKey: t.TableKey, TablePath: path,
			ExpectedVersion: t.ExpectedVersion, PostCommitPin: t.ExpectedVersion + 1})
	}
	if err := s.validate(Key(op), root); err != nil {
		return nil, err
	}
	return s, nil
}

// resolveOptimize settles a compaction intent. Nothing is ever restored, so the heal and a
// full pass do the same: a table whose manifest pointer is already at or past its
// post_commit_pin converged (the writer published it); a table whose HEAD never left the pin
// has its post_commit_pin taken (take.go: its writer may be paused, not dead) and the take
// published; a table whose HEAD is a Rewrite read from the pin at exactly the
// post_commit_pin gets its pointer published. Those pointers go out in one main commit under
// the intent's actor, audited as RolledForward. Anything else on a pinned table (a foreign
// commit, a HEAD behind the manifest) fails closed and leaves the sidecar in place.
//
// The Optimize payload carries no lineage, so the roll-forward commit takes the intent's
// operation id: a pass that dies after its publish is finished by the next one (audit row,
// sidecar removal) without a second commit.
func resolveOptimize(ctx context.Context, root storage.Store, sc *Sidecar, fence Fence) (Outcome, error) {
	o := Outcome{OperationID: sc.OperationID, Branch: ids.BranchKey(""), Tables: []TableOutcome{}}
	if sc.Branch != nil && *sc.Branch != "main" {
		return o, fmt.Errorf("an Optimize intent on branch %q: this build compacts main only", *sc.Branch)
	}
	pub := publisher.Open(root, "")
	st, err := pub.Snapshot(ctx)
	if err != nil {
		return o, err
	}
	// The roll-forward publishes under the intent's operation id (a ULID no writer uses as a
	// commit id), so a pass that died after that publish finds it and only finalizes.
	_, visible, err := st.Commit(ctx, sc.OperationID, 0)
	if err != nil {
		return o, err
	}
	if visible {
		for _, pin := range sc.Tables {
			if e, ok := st.Table(pin.TableKey); ok && e.Identity == pin.Identity && e.Version == pin.PostCommitPin {
				o.Tables = append(o.Tables, TableOutcome{TableKey: pin.TableKey, FromVersion: pin.ExpectedVersion, ToVersion: pin.PostCommitPin})
			}
		}
		return finalize(ctx, root, sc, RolledForward, sc.OperationID, o.Tables)
	}
	rootLoc := RootLocation(root)
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{}}
	for _, pin := range sc.Tables {
		e, ok := st.Table(pin.TableKey)
		if !ok || e.Identity != pin.Identity {
			return o, refuseState(pin.TableKey, false, " (%s) is no longer registered on main", pin.Identity)
		}
		if e.Version >= pin.PostCommitPin {
			continue
		}
		if e.Version != pin.ExpectedVersion {
			return o, refuseState(pin.TableKey, false, ": manifest pointer %d is behind the intent's expected version %d; refusing", e.Version, pin.ExpectedVersion)
		}
		rel, err := pin.relPath(rootLoc)
		if err != nil {
			return o, err
		}
		ds, err := lance.Open(ctx, root.Sub(rel))
		if err != nil {
			return o, err
		}
		switch head := ds.Version(); {
		case head == pin.ExpectedVersion:
			// The rewrite never committed; its files are unreferenced. Its writer may still
			// be alive, so its version is taken (take.go) before the intent is retired.
			if err := take(ctx, &req, sc.OperationID, pin, ds, fence); err != nil {
				return o, err
			}
			o.Tables = append(o.Tables, TableOutcome{TableKey: pin.TableKey, FromVersion: pin.ExpectedVersion, ToVersion: pin.ExpectedVersion})
		case head == pin.PostCommitPin:
			txn, err := ds.ReadTransaction(ctx, head)
			if err != nil {
				return o, err
			}
			if taken, err := isTake(ctx, ds, head, sc.OperationID, pin.Identity, pin.ExpectedVersion); err != nil {
				return o, err
			} else if taken {
				addPointer(&req, pin, ds, pin.ExpectedVersion)
				o.Tables = append(o.Tables, TableOutcome{TableKey: pin.TableKey, FromVersion: pin.ExpectedVersion, ToVersion: pin.ExpectedVersion})
				continue
			}
			// An Optimize commits one Rewrite (a compaction) or one CreateIndex (the indices
			// the table lacked) per table.
			if (txn.Op.Kind != lance.OpRewrite && txn.Op.Kind != lance.OpCreateIndex) || txn.ReadVersion != pin.ExpectedVersion {
				return o, refuseState(pin.TableKey, true, ": version %d is a %s read from %d, not this intent's Rewrite or CreateIndex of %d; refusing", head, txn.Op.Kind, txn.ReadVersion, pin.ExpectedVersion)
			}
			req.Updates = append(req.Updates, publisher.DatasetUpdate{Identity: pin.Identity, TableKey: pin.TableKey, Version: head,
				RowCount: ds.CountRows(), Meta: publisher.VersionMetadata(ds)})
			req.Expected[pin.Identity] = publisher.Expectation{TableKey: pin.TableKey, Version: pin.ExpectedVersion}
			o.Tables = append(o.Tables, TableOutcome{TableKey: pin.TableKey, FromVersion: pin.ExpectedVersion, ToVersion: head})
		case head < pin.ExpectedVersion:
			return o, refuseState(pin.TableKey, false, ": Lance HEAD %d is behind its manifest pin %d (invariant violation); refusing", head, pin.ExpectedVersion)
		default:
			return o, refuseState(pin.TableKey, true, " moved from %d to %d past this intent's single Rewrite; refusing", pin.ExpectedVersion, head)
		}
	}
	if len(req.Updates) == 0 {
		if err := Delete(ctx, root, sc.OperationID); err != nil {
			return o, err
		}
		o.Action, o.Reason = Discarded, "no compaction is left to publish"
		return o, nil
	}
	commit := sc.OperationID
	req.Lineage = &publisher.Lineage{CommitID: commit, ActorID: deref(sc.ActorID), CreatedAt: nowMicros()}
	return publishAndFinalize(ctx, root, sc, pub, fence, req, forwardPoints, "roll the compaction forward", commit, o.Tables)
}
