package publisher

import (
	"context"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
)

// SyntheticTable is the table identity PublishSynthetic records versions of: registered
// nowhere, so the graph's tables do not see it, while its rows weigh in __manifest as a real
// table's would.
var SyntheticTable = ids.TableIdentity{StableTableID: 1 << 60, TableIncarnationID: 1 << 60}

// PublishSynthetic appends the __manifest rows of n applied messages in one commit, for the
// history benchmark (a million messages one commit each would take hours): per message a
// graph commit (each the parent of the next, with created_at rising), its ingest receipt
// (stream "BENCH", sequence and msg id "hist-<seq>" from first) and a table version, then the
// branch's head on the last commit. The state folds each as it folds an applied message.
func (p *Publisher) PublishSynthetic(ctx context.Context, first, n int) error {
	st, err := p.Snapshot(ctx)
	if err != nil {
		return err
	}
	newVersion := st.ManifestVersion + 1
	parent := ""
	var created int64
	if h := st.lineageHead; h != nil {
		parent, created = h.ID, h.Meta.CreatedAt
	}
	rows := make([]Row, 0, 3*n+1)
	var last Lineage
	lastParent := parent
	for i := 0; i < n; i++ {
		seq := uint64(first + i)
		created++
		last = Lineage{CommitID: ids.NewULID(), ActorID: "bench", CreatedAt: created}
		lastParent = parent
		lr := lineageRows(p.branch, last, parent, newVersion)
		rows = append(rows, lr[0])
		rc := Receipt{Stream: "BENCH", Sequence: seq, MsgID: fmt.Sprintf("hist-%d", seq), PayloadSHA256: fmt.Sprintf("%064x", seq),
			GraphCommitID: last.CommitID, Branch: ids.BranchKey(p.branch)}
		rows = append(rows, Row{ObjectID: ReceiptObjectID(rc.ReceiptKey()), ObjectType: TypeIngestReceipt, Metadata: jsonString(rc),
			TableVersion: u64p(newVersion), TableBranch: ids.BranchPtr(p.branch)})
		size := uint64(512)
		rows = append(rows, versionRow(DatasetUpdate{Identity: SyntheticTable, TableKey: "node:Synthetic", Version: seq + 1, RowCount: seq,
			Meta: TableVersionMetadata{ManifestPath: fmt.Sprintf("nodes/synthetic/_versions/%d.manifest", seq+1), ManifestSize: &size}}))
		parent = last.CommitID
	}
	rows = append(rows, lineageRows(p.branch, last, lastParent, newVersion)[1])
	return p.write(ctx, st, rows, newVersion, nil, true)
}
