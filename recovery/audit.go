package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// AuditDir is the recovery audit log dataset under the graph root, created on first use.
const AuditDir = "_graph_commit_recoveries.lance"

// Recovery kinds recorded in the audit log.
const (
	RolledForward           = "RolledForward"
	RolledBack              = "RolledBack"
	OrphanedBranchDiscarded = "OrphanedBranchDiscarded"
)

// RecoveryActor is the actor of commits recovery publishes on its own behalf.
const RecoveryActor = "omnigraph:recovery"

// FailpointAuditAppend fires before an audit row is appended.
const FailpointAuditAppend = "recovery.audit_append"

var auditSchema = arrow.NewSchema([]arrow.Field{
	{Name: "graph_commit_id", Type: arrow.BinaryTypes.String},
	{Name: "recovery_kind", Type: arrow.BinaryTypes.String},
	{Name: "recovery_for_actor", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "operation_id", Type: arrow.BinaryTypes.String},
	{Name: "sidecar_writer_kind", Type: arrow.BinaryTypes.String},
	{Name: "per_table_outcomes_json", Type: arrow.BinaryTypes.String},
	{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
}, nil)

// AuditRow is one entry of the recovery audit log.
type AuditRow struct {
	GraphCommitID string
	Kind          string
	ForActor      *string
	OperationID   string
	WriterKind    string
	Outcomes      []TableOutcome
	CreatedAt     int64
}

// appendAudit records row once: a row for the same operation and kind already present (a retry
// after a crash between the append and the sidecar delete) is not written again.
func appendAudit(ctx context.Context, root storage.Store, row AuditRow) error {
	rows, ds, err := ReadAudit(ctx, root)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.OperationID == row.OperationID && r.Kind == row.Kind {
			return nil
		}
	}
	if err := failpoint.Inject(FailpointAuditAppend); err != nil {
		return fmt.Errorf("recovery: append audit row: %w", err)
	}
	outcomes := row.Outcomes
	if outcomes == nil {
		outcomes = []TableOutcome{}
	}
	oj, err := json.Marshal(outcomes)
	if err != nil {
		return err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, auditSchema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(row.GraphCommitID)
	b.Field(1).(*array.StringBuilder).Append(row.Kind)
	if row.ForActor != nil {
		b.Field(2).(*array.StringBuilder).Append(*row.ForActor)
	} else {
		b.Field(2).AppendNull()
	}
	b.Field(3).(*array.StringBuilder).Append(row.OperationID)
	b.Field(4).(*array.StringBuilder).Append(row.WriterKind)
	b.Field(5).(*array.StringBuilder).Append(string(oj))
	b.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(row.CreatedAt))
	rec := b.NewRecord()
	defer rec.Release()
	if ds == nil {
		s, err := schema.FromArrow(auditSchema)
		if err != nil {
			return err
		}
		// The audit table is made on the first recovery, at the graph's own file version.
		v, err := publisher.FileVersion(ctx, root)
		if err != nil {
			return fmt.Errorf("recovery: create audit table: %w", err)
		}
		_, err = lance.Create(ctx, root.Sub(AuditDir), s, []arrow.Record{rec}, lance.CreateOptions{FileVersion: v})
		return err
	}
	staged, err := ds.StageAppend(ctx, []arrow.Record{rec}, lance.StageOptions{})
	if err != nil {
		return err
	}
	_, err = ds.Commit(ctx, staged)
	return err
}

// ReadAudit reads every audit row (none, with a nil dataset, before the first recovery).
func ReadAudit(ctx context.Context, root storage.Store) ([]AuditRow, *lance.Dataset, error) {
	ds, err := lance.Open(ctx, root.Sub(AuditDir))
	var nf *lance.VersionNotFoundError
	if errors.As(err, &nf) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	sc, err := ds.Scan(ctx, lance.ScanOptions{})
	if err != nil {
		return nil, nil, err
	}
	var out []AuditRow
	for {
		rec, err := sc.Next(ctx)
		if err == io.EOF {
			return out, ds, nil
		}
		if err != nil {
			return nil, nil, err
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			r := AuditRow{
				GraphCommitID: rec.Column(0).(*array.String).Value(i),
				Kind:          rec.Column(1).(*array.String).Value(i),
				OperationID:   rec.Column(3).(*array.String).Value(i),
				WriterKind:    rec.Column(4).(*array.String).Value(i),
				CreatedAt:     int64(rec.Column(6).(*array.Timestamp).Value(i)),
			}
			if a := rec.Column(2).(*array.String); a.IsValid(i) {
				s := a.Value(i)
				r.ForActor = &s
			}
			if err := json.Unmarshal([]byte(rec.Column(5).(*array.String).Value(i)), &r.Outcomes); err != nil {
				rec.Release()
				return nil, nil, fmt.Errorf("recovery: audit row %s: %w", r.OperationID, err)
			}
			out = append(out, r)
		}
		rec.Release()
	}
}

func nowMicros() int64 { return time.Now().UnixMicro() }
