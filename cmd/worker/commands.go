package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

func kindExit(err error) int {
	switch errs.Kind(err) {
	case errs.KindInvalid:
		return exitInvalid
	case errs.KindKeyConflict:
		return exitKeyConflict
	case errs.KindResourceLimit:
		return exitResourceLimit
	case errs.KindRecoveryRequired:
		return exitRecoveryRequired
	case errs.KindReadSetChanged, errs.KindPublishedDatasetVersionMismatch:
		return exitConflict
	case errs.KindBranchMissing:
		return exitBranchMissing
	}
	return exitInternal
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return &usageError{msg: err.Error()}
	}
	return nil
}

func openRoot(ctx context.Context, uri string) (storage.Store, error) {
	if uri == "" {
		return nil, &usageError{msg: "--root is required"}
	}
	return storage.Open(ctx, uri)
}

func cmdInit(ctx context.Context, args []string) error {
	fs := newFlags("init")
	root := fs.String("root", "", "graph root URI (path, file://, mem://, s3://, gs://, azblob://)")
	schemaPath := fs.String("schema", "", "the .pg schema file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *schemaPath == "" {
		return &usageError{msg: "--schema is required"}
	}
	src, err := os.ReadFile(*schemaPath)
	if err != nil {
		return err
	}
	st, err := openRoot(ctx, *root)
	if err != nil {
		return err
	}
	defer st.Close()
	g, err := engine.Init(ctx, st, string(src))
	if err != nil {
		return err
	}
	fmt.Printf("initialised %s: %d node types, %d edge types\n", st.URI(), len(g.Catalog().Nodes), len(g.Catalog().Edges))
	return nil
}

func cmdLoad(ctx context.Context, args []string) error {
	fs := newFlags("load")
	root := fs.String("root", "", "graph root URI")
	branch := fs.String("branch", "main", "target branch")
	mode := fs.String("mode", "merge", "append (strict insert), merge (upsert) or overwrite")
	actor := fs.String("actor", "", "actor id recorded on the commit")
	msgID := fs.String("msg-id", "", "receipt key: a batch whose receipt is already visible on the branch is not applied again")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{msg: "load takes one FILE argument (- for standard input)"}
	}
	in := io.Reader(os.Stdin)
	if p := fs.Arg(0); p != "-" {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	recs, err := framing.Parse(in, framing.DefaultLimits())
	if err != nil {
		return err
	}
	st, err := openRoot(ctx, *root)
	if err != nil {
		return err
	}
	defer st.Close()
	g, err := engine.Open(ctx, st)
	if err != nil {
		return err
	}
	req := engine.LoadRequest{Branch: *branch, Mode: rows.Mode(*mode), Actor: *actor, Records: recs}
	if *msgID != "" {
		req.Receipt = &publisher.Receipt{MsgID: *msgID}
	}
	res, err := g.Load(ctx, req)
	if err != nil {
		return err
	}
	return printJSON(res)
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdExport(ctx context.Context, args []string) error {
	fs := newFlags("export")
	root := fs.String("root", "", "graph root URI")
	branch := fs.String("branch", "main", "branch to export")
	version := fs.Uint64("version", 0, "__manifest version to export (0: latest)")
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := openRoot(ctx, *root)
	if err != nil {
		return err
	}
	defer st.Close()
	g, err := engine.OpenReadOnly(ctx, st)
	if err != nil {
		return err
	}
	return g.Export(ctx, *branch, *version, os.Stdout)
}

func cmdCommits(ctx context.Context, args []string) error {
	fs := newFlags("commits")
	root := fs.String("root", "", "graph root URI")
	branch := fs.String("branch", "main", "branch")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := openRoot(ctx, *root)
	if err != nil {
		return err
	}
	defer st.Close()
	g, err := engine.OpenReadOnly(ctx, st)
	if err != nil {
		return err
	}
	cs, err := g.Commits(ctx, *branch)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(cs)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMIT\tVERSION\tBRANCH\tACTOR\tCREATED")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", c.GraphCommitID, c.GraphManifestVersion, orDash(c.GraphBranch), orDash(c.ActorID),
			time.UnixMicro(c.CreatedAt).UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func orDash(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func cmdRun(ctx context.Context, args []string) error {
	fmt.Fprintln(os.Stderr, "omnigraph-worker: the JetStream worker is not built yet; use init, load, export and commits.")
	return nil
}

func cmdRecover(ctx context.Context, args []string) error {
	fs := newFlags("recover")
	root := fs.String("root", "", "graph root URI")
	list := fs.Bool("list", false, "only list pending recovery sidecars; change nothing")
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := openRoot(ctx, *root)
	if err != nil {
		return err
	}
	defer st.Close()
	if *list {
		listed, err := recovery.List(ctx, st)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "OPERATION\tKIND\tBRANCH\tPHASE\tTABLES\tSTARTED")
		for _, l := range listed {
			sc, ok, err := recovery.Read(ctx, st, l.Name)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			phase, tables := "-", []string{}
			if sc.ProtocolV3 != nil {
				phase = string(sc.ProtocolV3.EffectPhase)
			}
			for _, t := range sc.Tables {
				tables = append(tables, t.TableKey)
			}
			started := "-"
			if us, err := strconv.ParseInt(sc.StartedAt, 10, 64); err == nil {
				started = time.UnixMicro(us).UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", sc.OperationID, sc.WriterKind, orDash(sc.Branch), phase, strings.Join(tables, ","), started)
		}
		return tw.Flush()
	}
	g, err := engine.OpenReadOnly(ctx, st)
	if err != nil {
		return err
	}
	out, err := g.Recover(ctx)
	for _, o := range out {
		fmt.Printf("%s %s on %s", o.Action, o.OperationID, o.Branch)
		if o.GraphCommitID != "" {
			fmt.Printf(" (commit %s)", o.GraphCommitID)
		}
		for _, t := range o.Tables {
			fmt.Printf(" %s:%d->%d", t.TableKey, t.FromVersion, t.ToVersion)
		}
		if o.Reason != "" {
			fmt.Printf(": %s", o.Reason)
		}
		fmt.Println()
	}
	if err == nil && len(out) == 0 {
		fmt.Println("no pending recovery sidecars")
	}
	return err
}
