package recovery

import (
	"errors"
	"fmt"
	"testing"

	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// TestAuditTableFollowsGraphFileVersion: the audit table, made on the first recovery, declares
// the data file version of the graph's __manifest; where this build cannot write that version
// the append is refused with *lance.DataVersionError and no audit table appears (a 2.0 audit
// table in a 2.2 graph would be the first mixed table of that graph).
func TestAuditTableFollowsGraphFileVersion(t *testing.T) {
	for _, v := range file.Known {
		root, err := storage.Open(t.Context(), fmt.Sprintf("mem://audit-version-%s", v))
		if err != nil {
			t.Fatal(err)
		}
		s, err := schema.FromArrow(publisher.ManifestSchema())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lance.Create(t.Context(), root.Sub(publisher.Dir), s, nil, lance.CreateOptions{FileVersion: v}); err != nil {
			t.Fatal(err)
		}
		row := AuditRow{GraphCommitID: "01JZ000000000000000000000C", Kind: "RolledBack", OperationID: "01JZ000000000000000000000D", WriterKind: "Load", Outcomes: []TableOutcome{}}
		err = appendAudit(t.Context(), root, row)
		if !file.Writable(v) {
			var dv *lance.DataVersionError
			if !errors.As(err, &dv) || dv.Declared != v.String() {
				t.Fatalf("%s: got %v, want *lance.DataVersionError", v, err)
			}
			if objs, _ := root.Sub(AuditDir).List(t.Context(), ""); len(objs) != 0 {
				t.Fatalf("%s: refused append left %d files", v, len(objs))
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		ds, err := lance.Open(t.Context(), root.Sub(AuditDir))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := ds.FileVersion(); got != v {
			t.Fatalf("audit table declares %s in a %s graph", got, v)
		}
	}
}
