package publisher

import (
	"context"
	"fmt"
)

// AllReceipts reads every ingest receipt of the state's __manifest version (its branch's and
// those it inherited), in storage order: which message each graph commit applied, for tools
// that show a branch's history.
func (s *State) AllReceipts(ctx context.Context) ([]Receipt, error) {
	s.lookups.Add(1)
	var out []Receipt
	err := eachRowOf(ctx, s.ds, TypeIngestReceipt, func(r *Row) error {
		rc, err := receiptOf(r)
		if err != nil {
			return &ManifestError{ObjectID: r.ObjectID, Reason: fmt.Sprintf("receipt: %v", err), Err: err}
		}
		out = append(out, rc)
		return nil
	})
	return out, err
}
