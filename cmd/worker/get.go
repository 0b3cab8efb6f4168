package main

import (
	"context"
	"fmt"
	"os"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
)

// cmdGet is `worker get TYPE ID`: one node or edge by its id, in the load envelope as export
// prints it, and a node's edges out and in after it.
func cmdGet(fs *flagSet) runFunc {
	branch, version := readAtFlags(fs, "read")
	edges := fs.Bool("edges", true, "with a node, also print its edges: out (it is their from), then in (their to)")
	out := outputFlag(fs, false, formatJSON, formatTable)
	verbose := fs.BoolP("verbose", "v", false, "say on standard error how each table was read: the BTREE index and its pages, or a filtered scan")
	scan := fs.Bool("scan", false, "read without indices: a filtered scan (the answer is the same)")
	settings := bindSettings(fs, config.RootSettings)
	return func(ctx context.Context, args []string) error {
		if len(args) != 2 {
			return &usageError{msg: "get takes TYPE ID (a node's id is its @key value; an edge's, its id)"}
		}
		format, g, closeGraph, err := openForRead(ctx, out, settings)
		if err != nil {
			return err
		}
		defer closeGraph()
		res, err := g.Get(ctx, args[0], args[1], engine.GetOptions{ReadAt: engine.ReadAt{Branch: *branch, Version: *version}, Edges: *edges, Scan: *scan})
		if err != nil {
			return err
		}
		if *verbose {
			for _, a := range res.Access {
				fmt.Fprintln(os.Stderr, "read", a)
			}
		}
		lines := [][]byte{res.Row.Line}
		for _, r := range append(append([]engine.Row(nil), res.Out...), res.In...) {
			lines = append(lines, r.Line)
		}
		if format == formatJSON {
			return printLines(lines)
		}
		if err := recordTable(os.Stdout, lines[:1]); err != nil {
			return err
		}
		for _, part := range []struct {
			title string
			rows  []engine.Row
		}{{"edges out", res.Out}, {"edges in", res.In}} {
			if len(part.rows) == 0 {
				continue
			}
			fmt.Printf("\n%s:\n", part.title)
			var ls [][]byte
			for _, r := range part.rows {
				ls = append(ls, r.Line)
			}
			if err := recordTable(os.Stdout, ls); err != nil {
				return err
			}
		}
		return nil
	}
}
