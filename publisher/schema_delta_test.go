package publisher

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
)

// A schema apply's manifest delta: a rename keeps the identity, path and version under a new
// key; a tombstone takes a table out of the current version and frees its key; a registration
// may then take the freed key with a new identity. A cold reader folds the same state.
func TestRenameAndTombstone(t *testing.T) {
	ctx := context.Background()
	root, _ := genesis(t)
	p := Open(root, "")
	human := ids.TableIdentity{StableTableID: 7, TableIncarnationID: 8}
	res, err := p.Publish(ctx, Request{
		Renames:       []Rename{{Identity: person, ExpectedTableKey: "node:Person", TableKey: "node:Human"}},
		Tombstones:    []Tombstone{{Identity: knows, TableKey: "edge:Knows", Version: 2}},
		Registrations: []Registration{{Identity: human, TableKey: "edge:Knows"}},
		Updates:       []DatasetUpdate{update(human, "edge:Knows", 1, 0)},
		Expected: map[ids.TableIdentity]Expectation{person: {"node:Person", 1}, knows: {"edge:Knows", 1},
			human: {"edge:Knows", 0}},
		Lineage: &Lineage{CommitID: ids.NewULID()},
	})
	if err != nil {
		t.Fatal(err)
	}
	cold, err := Open(root, "").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*State{res.State, cold} {
		tabs := st.Tables()
		if len(tabs) != 2 || tabs[0].TableKey != "edge:Knows" || tabs[0].Identity != human ||
			tabs[1].TableKey != "node:Human" || tabs[1].Identity != person || tabs[1].Version != 1 ||
			tabs[1].Path != "nodes/0000000000000001-0000000000000004" {
			t.Fatalf("tables %+v", tabs)
		}
	}
	// The version before still reads the old names.
	old, err := Open(root, "").SnapshotAt(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if tb, ok := old.Table("node:Person"); !ok || tb.Identity != person {
		t.Fatalf("version 1: %+v", old.Tables())
	}
}

func TestRenameAndTombstoneRefusals(t *testing.T) {
	ctx := context.Background()
	root, _ := genesis(t)
	p := Open(root, "")
	other := ids.TableIdentity{StableTableID: 3, TableIncarnationID: 3}
	for _, c := range []struct {
		name string
		req  Request
		want string
	}{
		{"rename under a stale key", Request{Renames: []Rename{{Identity: person, ExpectedTableKey: "node:User", TableKey: "node:Human"}}}, "dataset_binding"},
		{"rename of an unknown table", Request{Renames: []Rename{{Identity: other, ExpectedTableKey: "node:X", TableKey: "node:Y"}}}, "no live table"},
		{"rename across kinds", Request{Renames: []Rename{{Identity: person, ExpectedTableKey: "node:Person", TableKey: "edge:Person"}}}, "would move its dataset"},
		{"register a live key", Request{Registrations: []Registration{{Identity: other, TableKey: "node:Person"}}}, "bound to both"},
		{"rename onto a key registered beside it", Request{Renames: []Rename{{Identity: person, ExpectedTableKey: "node:Person", TableKey: "node:Human"}},
			Registrations: []Registration{{Identity: other, TableKey: "node:Human"}}}, "bound to both"},
		{"tombstone not past the version", Request{Tombstones: []Tombstone{{Identity: knows, TableKey: "edge:Knows", Version: 1}}}, "the table is at 1"},
		{"tombstone under another key", Request{Tombstones: []Tombstone{{Identity: knows, TableKey: "edge:Likes", Version: 2}}}, "not registered under that key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.Lineage = &Lineage{CommitID: ids.NewULID()}
			_, err := p.Publish(ctx, c.req)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if c.want == "dataset_binding" {
				var rsc *errs.ReadSetChanged
				if !errors.As(err, &rsc) {
					t.Fatalf("%v is not a ReadSetChanged", err)
				}
			}
			st, err := Open(root, "").Snapshot(ctx)
			if err != nil || st.ManifestVersion != 1 {
				t.Fatalf("a refused publish wrote: %v %v", st.ManifestVersion, err)
			}
		})
	}
}
