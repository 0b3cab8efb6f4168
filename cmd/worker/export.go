package main

import (
	"bytes"
	"context"
	"os"

	"github.com/omnigraph/omnigraph-worker/config"
)

// cmdExport is `worker export`: every row of a branch in the load envelope (-o json, NDJSON,
// which init and load take back), or as tables, one per type (-o table, for people: it holds
// the export in memory).
func cmdExport(fs *flagSet) runFunc {
	branch := fs.String("branch", "main", "branch to export")
	version := fs.Uint64("version", 0, "__manifest version to export (0: latest)")
	out := outputFlag(fs, false, formatJSON, formatTable)
	settings := bindSettings(fs, config.RootSettings)
	return func(ctx context.Context, args []string) error {
		format, g, closeGraph, err := openForRead(ctx, out, settings)
		if err != nil {
			return err
		}
		defer closeGraph()
		if format == formatJSON {
			return g.Export(ctx, *branch, *version, os.Stdout)
		}
		var buf bytes.Buffer
		if err := g.Export(ctx, *branch, *version, &buf); err != nil {
			return err
		}
		return recordTable(os.Stdout, bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")))
	}
}
