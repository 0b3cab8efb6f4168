package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
)

// cmdFind is `worker find TYPE --where 'prop = value'`: the rows of a type that match, in the
// load envelope (or as a table), through a BTREE index on a column of the clause when there is
// one.
func cmdFind(fs *flagSet) runFunc {
	where := fs.String("where", "", "the rows to print: 'property = value' (also !=, <, <=, >, >=; conditions joined by and; quote values with spaces)")
	limit := fs.Int("limit", 0, "print at most N rows (0: every one)")
	branch, version := readAtFlags(fs, "read")
	out := outputFlag(fs, false, formatJSON, formatTable)
	verbose := fs.BoolP("verbose", "v", false, "say on standard error how the table was read: the BTREE index and its pages, or a filtered scan")
	scan := fs.Bool("scan", false, "read without indices: a filtered scan (the answer is the same)")
	settings := bindSettings(fs, config.RootSettings)
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return &usageError{msg: "find takes one TYPE and --where 'property = value'"}
		}
		if *where == "" {
			return &usageError{msg: "find needs " + fs.named("where") + " 'property = value'"}
		}
		if *limit < 0 {
			return &usageError{msg: fs.named("limit") + " must be 0 or more"}
		}
		conds, err := engine.ParseWhere(*where)
		if err != nil {
			return whereUsage(fs, *where, err)
		}
		format, g, closeGraph, err := openForRead(ctx, out, settings)
		if err != nil {
			return err
		}
		defer closeGraph()
		res, err := g.Find(ctx, args[0], engine.FindOptions{ReadAt: engine.ReadAt{Branch: *branch, Version: *version}, Where: conds, Limit: *limit, Scan: *scan})
		if err != nil {
			return whereUsage(fs, *where, err)
		}
		if *verbose {
			fmt.Fprintln(os.Stderr, "read", res.Access)
		}
		lines := make([][]byte, len(res.Rows))
		for i, r := range res.Rows {
			lines[i] = r.Line
		}
		if format == formatJSON {
			return printLines(lines)
		}
		if len(lines) == 0 {
			fmt.Println("no rows")
			return nil
		}
		return recordTable(os.Stdout, lines)
	}
}

// whereUsage makes a where clause's error (engine.WhereError, at its column) a usage error
// naming the flag and the clause; any other error is returned as it is.
func whereUsage(fs *flagSet, where string, err error) error {
	var we *engine.WhereError
	if !errors.As(err, &we) {
		return err
	}
	return &usageError{msg: fmt.Sprintf("%s %q: %v", fs.named("where"), where, we)}
}
