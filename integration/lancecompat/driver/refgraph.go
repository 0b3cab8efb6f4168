package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// refGraphCompat: a graph whose every table the official engine made at 2.2, as the reference
// OmniGraph makes them (Lance 10 builds it: compat.mjs refgraph), served by the Go engine, and
// afterwards opened by Lance 12 at every version of every table. The engine serves it in every
// load mode, through a branch merge, compaction, cleanup and recovery of an interrupted load.
// (A table at a version this build cannot read or write is refused with *lance.DataVersionError
// and left as it was; lance/dataversion_test.go proves that on every write path.)
func refGraphCompat(ctx context.Context, s *suite, dir string) {
	saved := *s
	defer func() { s.engine, s.version, s.prefix = saved.engine, saved.version, saved.prefix }()
	s.engine, s.version, s.prefix = "lance10", file.V2_2, "refgraph/"

	rootDir := filepath.Join(dir, "refgraph")
	err := func() error {
		root, err := storage.Open(ctx, rootDir)
		if err != nil {
			return err
		}
		src, err := os.ReadFile("graph/pg/testdata/example.pg")
		if err != nil {
			return err
		}
		if _, err := engine.Init(ctx, root, string(src)); err != nil {
			return err
		}
		return nil
	}()
	s.add("go-inits-graph", err)
	if err != nil || s.runNode(ctx, "lance10-remakes-at-2.2/", "refgraph", rootDir) != nil {
		return
	}
	s.add("go-serves-refgraph", serveRefGraph(ctx, rootDir))
	s.engine = "lance12"
	_ = s.runNode(ctx, "lance12-opens-every-version/", "openall", rootDir)
	// The same on a second reference graph, served by the worker binary over NATS.
	refWorkerCompat(ctx, s, dir)
}

// serveRefGraph runs the engine's whole write surface on the graph.
func serveRefGraph(ctx context.Context, rootDir string) error {
	root, err := storage.Open(ctx, rootDir)
	if err != nil {
		return err
	}
	g, err := engine.Open(ctx, root)
	if err != nil {
		return err
	}
	load := func(branch, from, mode string, lines ...string) error {
		recs, err := framing.ParseBytes([]byte(strings.Join(lines, "\n")), framing.DefaultLimits())
		if err != nil {
			return err
		}
		_, err = g.Load(ctx, engine.LoadRequest{Branch: branch, From: from, Mode: engine.Mode(mode), Records: recs})
		return err
	}
	for i, b := range graphBatches {
		if err := load("", "", b.mode, b.lines...); err != nil {
			return fmt.Errorf("load %d (%s): %w", i, b.mode, err)
		}
	}
	// An overwrite must keep the people edges still point at (alice, bob, carol).
	if err := load("", "", "overwrite",
		`{"type":"Person","data":{"handle":"alice","name":"Alice","active":true}}`,
		`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`,
		`{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`,
		`{"type":"Person","data":{"handle":"erin","name":"Erin","active":true}}`); err != nil {
		return fmt.Errorf("overwrite load: %w", err)
	}
	// An interrupted load, recovered by the next read-write open (the audit table, created empty
	// by the official engine, gets its first row from Go).
	_ = failpoint.Enable("load.after_table_commit", "1*error")
	err = load("", "", "merge", `{"type":"Person","data":{"handle":"frank","name":"Frank","active":true}}`)
	failpoint.Reset()
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) {
		return fmt.Errorf("the interrupted load returned %v, want RecoveryRequired", err)
	}
	if g, err = engine.Open(ctx, root); err != nil {
		return fmt.Errorf("recovering open: %w", err)
	}
	if err := load("stage", "main", "append", `{"type":"Person","data":{"handle":"gina","name":"Gina","active":true}}`); err != nil {
		return fmt.Errorf("branch load: %w", err)
	}
	if _, err := g.Merge(ctx, engine.MergeRequest{Source: "stage", Target: "main", DeleteSource: true}); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	for i := 0; i < 3; i++ {
		if err := load("", "", "append", fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}`, i)); err != nil {
			return fmt.Errorf("small load %d: %w", i, err)
		}
	}
	if _, err := g.Optimize(ctx, engine.OptimizeOptions{All: true}); err != nil {
		return fmt.Errorf("optimize: %w", err)
	}
	if _, err := g.Cleanup(ctx, engine.CleanupOptions{Keep: 2}); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}
