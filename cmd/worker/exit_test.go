package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// kinded stands in for any error of a kind.
type kinded string

func (k kinded) Error() string     { return string(k) }
func (k kinded) ErrorKind() string { return string(k) }

// The exit code of every kind is the catalogue's; usage and untyped errors keep 2 and 1.
func TestExitCodesFollowTheCatalogue(t *testing.T) {
	for _, k := range errs.Catalogue() {
		if k.ReasonOnly {
			continue
		}
		err := fmt.Errorf("cmd: %w", kinded(k.Kind))
		if got := exitCode(err); got != k.ExitCode {
			t.Errorf("%s: exit %d, want %d", k.Kind, got, k.ExitCode)
		}
	}
	for err, want := range map[error]int{
		nil: 0, &usageError{msg: "bad flag"}: 2, fmt.Errorf("wrapped: %w", &usageError{msg: "x"}): 2, io.ErrUnexpectedEOF: 1,
		&errs.InvalidInput{Reason: "x"}: 3, &errs.KeyConflict{TypeKey: "node:P"}: 4, &errs.ResourceLimitExceeded{}: 5,
		&errs.RecoveryRequired{}: 6, &errs.ReadSetChanged{}: 7, &errs.PublishedDatasetVersionMismatch{}: 7, &errs.BranchNotFound{}: 8,
		&errs.MergeConflicts{}: 9, &errs.MsgIDReused{}: 1, &engine.DriftError{}: 10,
		&lance.DataVersionError{Op: "read"}: 10,
	} {
		if got := exitCode(err); got != want {
			t.Errorf("%T %v: exit %d, want %d", err, err, got, want)
		}
	}
}

// dlq --reason takes exactly the catalogue's dead-letter reasons, and its help lists them all.
func TestDLQReasons(t *testing.T) {
	for _, r := range errs.DeadLetterReasons() {
		if err := checkReason(nil, r); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	if checkReason(nil, "") != nil {
		t.Error("no --reason is every reason")
	}
	for _, r := range []string{"unknown", "corrupt", "table_drift", "recovery_required", "key-conflict"} {
		err := checkReason(nil, r)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "merge_conflict") || !strings.Contains(err.Error(), "max_deliver") {
			t.Errorf("%s: %v", r, err)
		}
	}
	err := run("dlq", "list", "--graph", "g", "--reason", "nope")
	if exitCode(err) != exitUsage {
		t.Fatalf("dlq list --reason nope: %v", err)
	}
}

// `worker recover --restore-drift` puts a table a foreign writer moved back on its published
// version, after which the graph takes writes again.
func TestRecoverRestoresDrift(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../graph/pg/testdata/example.pg")
	if err != nil {
		t.Fatal(err)
	}
	g, err := engine.Init(ctx, root, string(src))
	if err != nil {
		t.Fatal(err)
	}
	person := func(handle string) []framing.Record {
		recs, err := framing.ParseBytes([]byte(`{"type":"Person","data":{"handle":"`+handle+`","name":"N","active":true}}`), framing.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: person("alice")}); err != nil {
		t.Fatal(err)
	}
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := st.Table("node:Person")
	ds, err := lance.Open(ctx, root.Sub(e.Path))
	if err != nil {
		t.Fatal(err)
	}
	b, err := rows.Build(g.Catalog(), person("intruder"), engine.ModeAppend, rows.Options{})
	if err != nil {
		t.Fatal(err)
	}
	staged, err := ds.StageAppend(ctx, []arrow.Record{b["node:Person"].Record}, lance.StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Commit(ctx, staged); err != nil {
		t.Fatal(err)
	}
	_, err = g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: person("bob")})
	if exitCode(err) != errs.ExitOperator || !strings.Contains(err.Error(), "worker recover --root <root> --restore-drift") {
		t.Fatalf("load over drift: exit %d, %v", exitCode(err), err)
	}
	if err := run("recover", "--root", dir, "--restore-drift"); err != nil {
		t.Fatal(err)
	}
	g, err = engine.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: person("bob")}); err != nil {
		t.Fatalf("load after recover --restore-drift: %v", err)
	}
}
