package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
)

// cmdCommits is `worker commits`: a branch's graph commits, newest first, each with its
// branch, actor, the message id of its receipt and its time.
func cmdCommits(fs *flagSet) runFunc {
	branch, version := readAtFlags(fs, "list")
	out := outputFlag(fs, true, formatTable, formatJSON)
	settings := bindSettings(fs, config.RootSettings)
	return func(ctx context.Context, args []string) error {
		if len(args) != 0 {
			return &usageError{msg: "commits takes no arguments"}
		}
		format, g, closeGraph, err := openForRead(ctx, out, settings)
		if err != nil {
			return err
		}
		defer closeGraph()
		cs, err := g.CommitLog(ctx, engine.ReadAt{Branch: *branch, Version: *version})
		if err != nil {
			return err
		}
		if format == formatJSON {
			return printJSON(cs)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "COMMIT\tVERSION\tBRANCH\tACTOR\tMSG_ID\tTIME")
		for _, c := range cs {
			msg := c.MsgID
			if msg == "" {
				msg = c.Receipt // a message without a producer's id: its stream and sequence
			}
			if msg == "" {
				msg = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", c.GraphCommitID, c.GraphManifestVersion, c.Branch, orDash(c.ActorID), msg,
				time.UnixMicro(c.CreatedAt).UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
}
