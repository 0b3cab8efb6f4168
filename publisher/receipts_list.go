package publisher

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// AllReceipts reads every ingest receipt of the state's __manifest version (its branch's and
// those it inherited), in storage order: which message each graph commit applied, for tools
// that show a branch's history.
func (s *State) AllReceipts(ctx context.Context) ([]Receipt, error) {
	s.lookups.Add(1)
	var out []Receipt
	f := lance.In("object_type", TypeIngestReceipt)
	err := s.ds.Each(ctx, lance.ScanOptions{Columns: []string{"object_id", "metadata", "table_version"}, Filter: &f}, func(rec arrow.Record) error {
		oid := rec.Column(0).(*array.String)
		meta := rec.Column(1).(*array.String)
		ver := rec.Column(2).(*array.Uint64)
		for i := 0; i < oid.Len(); i++ {
			r := Row{ObjectID: oid.Value(i), ObjectType: TypeIngestReceipt}
			if meta.IsValid(i) {
				m := meta.Value(i)
				r.Metadata = &m
			}
			if ver.IsValid(i) {
				v := ver.Value(i)
				r.TableVersion = &v
			}
			rc, err := receiptOf(&r)
			if err != nil {
				return &ManifestError{ObjectID: r.ObjectID, Reason: fmt.Sprintf("receipt: %v", err), Err: err}
			}
			out = append(out, rc)
		}
		return nil
	})
	return out, err
}
