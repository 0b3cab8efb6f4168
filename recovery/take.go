package recovery

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// Taking an intent's versions.
//
// A writer commits each table at an exact version: the one after the version it read. When
// recovery retires an intent without its effect (a discard, a rollback), the writer that
// armed it may still be alive: paused, partitioned, its lease lost without its knowing. Were
// the planned version left free, that writer could still commit it after it resumed, and the
// table would hold a version the graph never published (drift), which stops the new writer.
// So recovery takes the version first: it commits, at the version the intent would have
// committed next, a Restore to the published pin (the same rows), and publishes it with the
// rollback. The stale writer's commit then finds its version taken and fails; storage, not
// the lease, decides. The Restore's transaction id is derived from the intent and the table,
// so a recovery pass that dies between a take and its publish recognizes its own take.

// FailpointBeforeTake fires before recovery takes one table's planned version.
const FailpointBeforeTake = "recovery.before_take"

// errRaced says a table moved between recovery's observation and its own commit (a stale
// writer committed the version first): the intent is observed and resolved again.
var errRaced = errors.New("recovery: a table moved while recovery committed to it")

// takeUUID is the transaction id of the take of table by operation op.
func takeUUID(op string, table ids.TableIdentity) string {
	h := sha256.Sum256([]byte("omnigraph-take/" + op + "/" + table.String()))
	h[6] = h[6]&0x0f | 0x40 // the version and variant bits of a UUIDv4
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// isTake says whether version v of ds is op's take of table back to pinned.
func isTake(ctx context.Context, ds *lance.Dataset, v uint64, op string, table ids.TableIdentity, pinned uint64) (bool, error) {
	txn, err := ds.ReadTransaction(ctx, v)
	if err != nil {
		return false, err
	}
	return txn.Op.Kind == lance.OpRestore && txn.Op.RestoreVersion == pinned && txn.UUID == takeUUID(op, table), nil
}

// take commits op's take of a table whose HEAD (ds) is still at its published pin: a Restore
// to the pin at pin+1, the version the intent would commit next. The taken version goes into
// req as the table's rollback pointer. A table someone else moved meanwhile is errRaced.
func take(ctx context.Context, req *publisher.Request, op string, pin TablePin, ds *lance.Dataset, fence Fence) error {
	if err := failpoint.Inject(FailpointBeforeTake); err != nil {
		return err
	}
	if err := fence.Check(ctx, "take "+pin.TableKey); err != nil {
		return err
	}
	pinned := ds.Version()
	staged, err := ds.StageRestore(ctx, pinned, lance.StageOptions{UUID: takeUUID(op, pin.Identity)})
	if err != nil {
		return err
	}
	taken, err := ds.Commit(ctx, staged)
	if err != nil {
		return raced(fmt.Errorf("take version %d of %s: %w", pinned+1, pin.TableKey, err))
	}
	addPointer(req, pin, taken, pinned)
	return nil
}

// addPointer adds ds's HEAD to req as pin's new version, expected at pinned.
func addPointer(req *publisher.Request, pin TablePin, ds *lance.Dataset, pinned uint64) {
	req.Updates = append(req.Updates, publisher.DatasetUpdate{Identity: pin.Identity, TableKey: pin.TableKey, Version: ds.Version(),
		Branch: ids.BranchPtr(ds.Branch()), RowCount: ds.CountRows(), Meta: publisher.VersionMetadata(ds)})
	req.Expected[pin.Identity] = publisher.Expectation{TableKey: pin.TableKey, Version: pinned}
}

// raced marks a commit conflict as errRaced (keeping the cause for the message).
func raced(err error) error {
	var cc *lance.CommitConflictError
	if errors.As(err, &cc) {
		return fmt.Errorf("%w: %w", errRaced, err)
	}
	return err
}
