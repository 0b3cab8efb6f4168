package publisher

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// A publish given the state its caller has just read (Request.Known) makes no probe for a
// newer __manifest version: its first request is a write.
func TestKnownStateSkipsTheProbe(t *testing.T) {
	ctx := context.Background()
	dir, g := genesisDir(t)
	l := storage.NewLatency(0)
	root, err := storage.Open(ctx, dir, storage.WithLatency(l))
	if err != nil {
		t.Fatal(err)
	}
	p := Open(root, "")
	st, err := p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	l.Trace(func(r storage.Request) { ops = append(ops, r.Op+" "+r.Location) })
	c1 := ids.NewULID()
	if _, err := p.Publish(ctx, Request{
		Updates:      []DatasetUpdate{update(person, "node:Person", 2, 10)},
		Expected:     map[ids.TableIdentity]Expectation{person: {"node:Person", 1}},
		Lineage:      &Lineage{CommitID: c1, CreatedAt: 5},
		Precondition: &ExactHead{Identifier: lance.BranchIdentifier{}, Head: &g},
		Known:        st,
	}); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if strings.HasPrefix(op, "exists ") {
			t.Fatalf("a publish from a known state probed storage: %q (all: %q)", op, ops)
		}
	}
}

// A known state that another publisher has since overtaken loses the commit's race: the retry
// rescans and the precondition, checked against the newer version, refuses the publish.
func TestKnownStateOvertakenIsRefused(t *testing.T) {
	ctx := context.Background()
	dir, g := genesisDir(t)
	open := func() *Publisher {
		root, err := storage.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		return Open(root, "")
	}
	mine, other := open(), open()
	st, err := mine.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := func(v uint64, known *State) Request {
		return Request{
			Updates:      []DatasetUpdate{update(person, "node:Person", v, 10)},
			Expected:     map[ids.TableIdentity]Expectation{person: {"node:Person", 1}},
			Lineage:      &Lineage{CommitID: ids.NewULID(), CreatedAt: 5},
			Precondition: &ExactHead{Identifier: lance.BranchIdentifier{}, Head: &g},
			Known:        known,
		}
	}
	if _, err := other.Publish(ctx, req(2, nil)); err != nil {
		t.Fatal(err)
	}
	_, err = mine.Publish(ctx, req(3, st))
	var rsc *errs.ReadSetChanged
	if !errors.As(err, &rsc) {
		t.Fatalf("publish from an overtaken known state: %v, want ReadSetChanged", err)
	}
	now, err := open().Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := now.Table("node:Person"); now.ManifestVersion != 2 || e.Version != 2 {
		t.Fatalf("after the refused publish: manifest version %d, Person at %d; want 2 and 2", now.ManifestVersion, e.Version)
	}
}

// genesisDir is genesis's root, to open again with options.
func genesisDir(t *testing.T) (string, string) {
	root, g := genesis(t)
	return root.URI(), g
}
