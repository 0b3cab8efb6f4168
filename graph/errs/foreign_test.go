package errs_test

import (
	"fmt"
	"testing"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// Every error type of another package that declares a kind gets the catalogue's routing for
// it, through any wrapping: the kinds that need an operator exit 10, are not permanent, and
// are never dead-lettered.
func TestForeignErrorKinds(t *testing.T) {
	unsupported := &file.UnsupportedVersionError{Version: file.Version{Major: 2, Minor: 3}, Op: "read"}
	cases := []struct {
		err  error
		kind string
	}{
		{&engine.DriftError{TableKey: "node:Person", Path: "nodes/x", Head: 4, Published: 3}, errs.KindTableDrift},
		{&publisher.StampError{Reason: "missing stamp"}, errs.KindManifestStamp},
		{&publisher.ManifestError{ObjectID: "graph_head:main", Reason: "graph_head without metadata"}, errs.KindCorrupt},
		{&lance.FormatError{File: "_versions/1.manifest", Offset: -1, Reason: "bad"}, errs.KindCorrupt},
		{&file.FormatError{File: "data/x.lance", Offset: 8, Reason: "truncated"}, errs.KindCorrupt},
		{&recovery.SidecarError{File: "__recovery/x.json", Kind: recovery.KindCorrupt}, errs.KindCorrupt},
		{&recovery.SidecarError{Kind: recovery.KindShape}, errs.KindCorrupt},
		{&recovery.SidecarError{Kind: recovery.KindName}, errs.KindCorrupt},
		{&recovery.SidecarError{Kind: recovery.KindForeignRoot}, errs.KindCorrupt},
		{&recovery.SidecarError{Kind: recovery.KindConfirm}, errs.KindCorrupt},
		{&recovery.StateError{Table: "node:Person"}, errs.KindCorrupt},
		{&recovery.StateError{Table: "node:Person", Foreign: true}, errs.KindTableDrift},
		{&recovery.SidecarError{Kind: recovery.KindFutureVersion}, errs.KindDataVersion},
		{&recovery.SidecarError{Kind: recovery.KindPreIdentity}, errs.KindDataVersion},
		{&lance.DataVersionError{Dataset: "nodes/x", Op: "write", Declared: "2.3", Files: "2.0, 2.1, 2.2"}, errs.KindDataVersion},
		{unsupported, errs.KindDataVersion},
		{&file.FormatError{File: "data/x.lance", Offset: -1, Reason: "footer", Err: unsupported}, errs.KindDataVersion},
	}
	for _, c := range cases {
		err := fmt.Errorf("ingest seq 3: %w", fmt.Errorf("load: %w", c.err))
		info, ok := errs.Lookup(c.kind)
		if !ok || !info.NeedsOperator {
			t.Fatalf("%s is not an operator kind", c.kind)
		}
		if got := errs.Kind(err); got != c.kind {
			t.Errorf("%T: kind %q, want %q", c.err, got, c.kind)
		}
		if !errs.NeedsOperator(err) || errs.Permanent(err) || errs.ExitCode(err) != errs.ExitOperator || info.DeadLetter != "" {
			t.Errorf("%T: operator %v permanent %v exit %d", c.err, errs.NeedsOperator(err), errs.Permanent(err), errs.ExitCode(err))
		}
	}
	if d := errs.Detail(&engine.DriftError{TableKey: "node:Person", Path: "nodes/x", Head: 4, Published: 3}); d["table_key"] != "node:Person" || d["head"] != uint64(4) {
		t.Errorf("drift detail %v", d)
	}
}
