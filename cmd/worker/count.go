package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
)

// cmdCount is `worker count [TYPE]`: rows per type from the tables' metadata, without reading
// a row.
func cmdCount(fs *flagSet) runFunc {
	branch, version := readAtFlags(fs, "count")
	out := outputFlag(fs, true, formatTable, formatJSON)
	settings := bindSettings(fs, config.RootSettings)
	return func(ctx context.Context, args []string) error {
		if len(args) > 1 {
			return &usageError{msg: "count takes at most one TYPE"}
		}
		format, g, closeGraph, err := openForRead(ctx, out, settings)
		if err != nil {
			return err
		}
		defer closeGraph()
		typ := ""
		if len(args) == 1 {
			typ = args[0]
		}
		res, err := g.Count(ctx, typ, engine.ReadAt{Branch: *branch, Version: *version})
		if err != nil {
			return err
		}
		if format == formatJSON {
			return printJSON(res)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TYPE\tKIND\tROWS\tDELETED\tFRAGMENTS\tTABLE_VERSION")
		var total uint64
		for _, t := range res.Tables {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", t.Type, t.Kind, t.Rows, t.DeletedRows, t.Fragments, t.TableVersion)
			total += t.Rows
		}
		if len(res.Tables) > 1 {
			fmt.Fprintf(tw, "total\t\t%d\n", total)
		}
		return tw.Flush()
	}
}
