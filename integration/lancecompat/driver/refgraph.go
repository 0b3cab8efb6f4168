package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// refGraphCompat: a graph whose every table the official engine made at 2.2, as the reference
// OmniGraph makes them (Lance 10 builds it: compat.mjs refgraph), served by the Go engine, and
// afterwards opened by Lance 12 at every version of every table. A build that cannot both read
// and write 2.2 files must refuse the graph with *lance.DataVersionError and change nothing; one
// that can must serve it in every load mode, through a branch merge, compaction, cleanup and
// recovery of an interrupted load.
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
	if file.Readable(file.V2_2) && file.Writable(file.V2_2) {
		s.add("go-serves-refgraph", serveRefGraph(ctx, rootDir))
	} else {
		s.add("go-refuses-refgraph", refuseRefGraph(ctx, rootDir))
	}
	s.engine = "lance12"
	_ = s.runNode(ctx, "lance12-opens-every-version/", "openall", rootDir)
	if file.Readable(file.V2_2) && file.Writable(file.V2_2) {
		// The same on a second reference graph, served by the worker binary over NATS.
		refWorkerCompat(ctx, s, dir)
	}
}

// refuseRefGraph: opening the graph and loading into it fail with a read or write
// *DataVersionError naming 2.2, and every file stays as it was.
func refuseRefGraph(ctx context.Context, rootDir string) error {
	before, err := fileTree(rootDir)
	if err != nil {
		return err
	}
	root, err := storage.Open(ctx, rootDir)
	if err != nil {
		return err
	}
	var dv *lance.DataVersionError
	g, err := engine.Open(ctx, root)
	if err == nil {
		recs, perr := framing.ParseBytes([]byte(graphBatches[0].lines[0]), framing.DefaultLimits())
		if perr != nil {
			return perr
		}
		_, err = g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: recs})
	}
	if !errors.As(err, &dv) || dv.Declared != "2.2" {
		return fmt.Errorf("got %v, want a *lance.DataVersionError for 2.2", err)
	}
	after, err := fileTree(rootDir)
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("the refused graph changed on disk:\nbefore\n%s\nafter\n%s", before, after)
	}
	return nil
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

// fileTree lists every file under dir with its size, one per line.
func fileTree(dir string) (string, error) {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%s %d", rel, info.Size()))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n"), err
}
