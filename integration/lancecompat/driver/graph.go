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
	"github.com/omnigraph/omnigraph-worker/integration/lancecompat/canon"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// graphBatches are loaded into a graph initialised from the bundled example schema.
var graphBatches = []struct {
	mode  string
	lines []string
}{
	{"append", []string{
		`{"type":"Person","data":{"handle":"alice","name":"Alice","active":true,"born":"1990-05-01","skills":["go","rust"],"email":"a@x.io"}}`,
		`{"type":"Person","data":{"handle":"bob","name":"Bob","active":false}}`,
		`{"type":"Company","data":{"domain":"acme.io","name":"Acme","size":"startup","revenue_usd":18446744073709551615,"founded":12000}}`,
		`{"type":"Project","data":{"org":"acme","slug":"x","name":"X","status":"active","started_at":"2024-06-01T12:00:00Z","stars":5}}`,
		`{"type":"Doc","data":{"url":"https://d","title":"T","body":"B","embedding":[1,2,3,4,5,6,7,0.5]}}`,
		`{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w1","role":"cto","since":19000}}`,
		`{"edge":"Describes","from":"https://d","to":"[\"acme\",\"x\"]","data":{"id":"d1","relevance":0.25}}`,
		`{"edge":"Contributes","from":"bob","to":"[\"acme\",\"x\"]","data":{"id":"c1","commits":7}}`,
	}},
	{"merge", []string{
		`{"type":"Person","data":{"handle":"alice","name":"Alice Again","active":false}}`,
		`{"type":"Person","data":{"handle":"carol","name":"Carol","active":true,"skills":[]}}`,
		`{"edge":"WorksAt","from":"carol","to":"acme.io","data":{"id":"w2"}}`,
	}},
}

// graphCompat loads batches with the engine, then has the official engine open every node and
// edge table and __manifest (through symlinks named <table>.lance) and compare each row with
// what the Go reader sees at the published version.
func graphCompat(ctx context.Context, s *suite, dir string) {
	err := func() error {
		rootDir := filepath.Join(dir, "graph")
		root, err := storage.Open(ctx, rootDir)
		if err != nil {
			return err
		}
		src, err := os.ReadFile("graph/pg/testdata/example.pg")
		if err != nil {
			return err
		}
		g, err := engine.Init(ctx, root, string(src))
		if err != nil {
			return err
		}
		for i, b := range graphBatches {
			recs, err := framing.ParseBytes([]byte(strings.Join(b.lines, "\n")), framing.DefaultLimits())
			if err != nil {
				return err
			}
			if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.Mode(b.mode), Records: recs,
				Receipt: &publisher.Receipt{Stream: "compat", Sequence: uint64(i + 1)}}); err != nil {
				return fmt.Errorf("batch %d: %w", i, err)
			}
		}
		// A third load dies after its first table commit; the read-write open rolls it back with
		// a Lance Restore, so the official engine also reads restored versions below.
		_ = failpoint.Enable("load.after_table_commit", "1*error")
		recs, _ := framing.ParseBytes([]byte(strings.Join(graphBatches[0].lines[:3], "\n")), framing.DefaultLimits())
		_, lerr := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeMerge, Records: recs})
		failpoint.Reset()
		var rr *errs.RecoveryRequired
		if !errors.As(lerr, &rr) {
			return fmt.Errorf("the interrupted load returned %v, want RecoveryRequired", lerr)
		}
		if g, err = engine.Open(ctx, root); err != nil {
			return err
		}
		// A stage branch merged into main with delete: main's tables then hold the merge chain
		// (a rewritten row and new rows) in main's own files, which the official engine reads.
		for _, b := range []struct{ mode, line string }{
			{"append", `{"type":"Person","data":{"handle":"dave","name":"Dave","active":true}}`},
			{"merge", `{"type":"Person","data":{"handle":"bob","name":"Bob Staged","active":true}}`},
		} {
			recs, _ := framing.ParseBytes([]byte(b.line), framing.DefaultLimits())
			if _, err := g.Load(ctx, engine.LoadRequest{Branch: "stage", From: "main", Mode: engine.Mode(b.mode), Records: recs}); err != nil {
				return fmt.Errorf("stage load: %w", err)
			}
		}
		if _, err := g.Merge(ctx, engine.MergeRequest{Source: "stage", Target: "main", DeleteSource: true}); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		st, err := g.Snapshot(ctx, "")
		if err != nil {
			return err
		}
		conn := filepath.Join(dir, "graphconn")
		if err := os.MkdirAll(conn, 0o755); err != nil {
			return err
		}
		var cases []verifyCase
		add := func(name, path string, version uint64) error {
			if err := os.Symlink(filepath.Join(rootDir, path), filepath.Join(conn, name+".lance")); err != nil {
				return err
			}
			ds, err := lance.Open(ctx, root.Sub(path), lance.AtVersion(version))
			if err != nil {
				return err
			}
			recs, err := ds.ReadAll(ctx, lance.ScanOptions{})
			if err != nil {
				return err
			}
			rows, err := canon.Rows(recs)
			if err != nil {
				return err
			}
			v := version
			cases = append(cases, verifyCase{Name: "graph-" + name, Table: name, Version: &v, Count: len(rows), Rows: rows})
			return nil
		}
		for _, e := range st.Tables() {
			if err := add(strings.ReplaceAll(e.TableKey, ":", "_"), e.Path, e.Version); err != nil {
				return err
			}
		}
		if err := add("manifest", publisher.Dir, st.ManifestVersion); err != nil {
			return err
		}
		// The manifest must hold the two load commits, their receipts and the live table pins.
		for _, c := range cases {
			if c.Table == "manifest" {
				n := 0
				for _, r := range c.Rows {
					if r["object_type"] == publisher.TypeIngestReceipt || r["object_type"] == publisher.TypeGraphCommit {
						n++
					}
				}
				if n != 7 { // genesis + 2 loads + the rollback commit + the merge, 2 receipts
					return fmt.Errorf("manifest has %d commit/receipt rows, want 7", n)
				}
			}
		}
		return writeJSON(filepath.Join(conn, "cases.json"), map[string]any{"cases": cases})
	}()
	s.add("go-loads-graph", err)
	if err == nil {
		_ = s.runNode(ctx, "node-reads-graph/", "verify", filepath.Join(dir, "graphconn"))
	}
}
