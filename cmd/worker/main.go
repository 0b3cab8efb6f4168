// Command worker is the omnigraph-worker binary: the JetStream worker (`run`), a producer
// (`publish`), and the graph tools (`init`, `load`, `export`, `commits`, `recover`).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/buildinfo"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Exit codes: one per error kind (graph/errs's catalogue gives each kind its code; the kinds
// that need an operator share one), so scripts can route failures without parsing text.
const (
	exitOK       = errs.ExitOK
	exitInternal = errs.ExitInternal
	exitUsage    = errs.ExitUsage
)

// version is what `worker version` and `worker --version` print: the module version, commit,
// build time and Go version of this binary (internal/buildinfo).
var version = buildinfo.Read().String()

// getenv is the process environment as the commands see it: they pass it to config, the one
// reader of OMNIGRAPH_* settings, and read nothing else but the Go runtime's GOGC and
// GOMEMLIMIT. Tests replace it.
var getenv = os.Getenv

// runFunc runs a command on its positional arguments, once its flags are parsed.
type runFunc func(ctx context.Context, args []string) error

// command is one verb: build declares its flags on the verb's flag set and returns what runs
// it; a verb with subs (branch, dlq) only groups them.
type command struct {
	name, args, summary, example string
	build                        func(fs *flagSet) runFunc
	subs                         []command
}

var commands = []command{
	{name: "init", summary: "create a graph from a .pg schema", build: cmdInit},
	{name: "load", args: "FILE", summary: "apply an NDJSON graph batch as one commit (FILE - for standard input)", build: cmdLoad},
	{name: "export", summary: "write a branch's rows as NDJSON in the load envelope", build: cmdExport},
	{name: "commits", summary: "list a branch's graph commits: branch, actor, message id, time", build: cmdCommits},
	{name: "get", args: "TYPE ID", summary: "print one node or edge by its id (a node's edges too), in the load envelope", build: cmdGet},
	{name: "find", args: "TYPE --where 'prop = value'", summary: "print the rows of a type that match a where clause", build: cmdFind},
	{name: "count", args: "[TYPE]", summary: "row counts per type, from the tables' metadata", build: cmdCount},
	{name: "branch", summary: "graph branches: create NAME [--from B], list [--json], delete NAME", subs: []command{
		{name: "create", args: "NAME", summary: "create branch NAME from --from", build: cmdBranch("create")},
		{name: "list", summary: "list the branches", build: cmdBranch("list")},
		{name: "delete", args: "NAME", summary: "delete branch NAME", build: cmdBranch("delete")},
	}},
	{name: "merge", summary: "merge --source S [--target T] [--delete-source] into one commit (--root), or ask the graph's worker (--graph) and wait for its outcome", build: cmdMerge},
	{name: "optimize", summary: "compact main's tables (fragment runs; --all for everything Lance would) in one commit", build: cmdOptimize},
	{name: "cleanup", summary: "remove old versions and the files only they name (--keep N [--older-than 7d]; a preview unless --confirm)", build: cmdCleanup},
	{name: "recover", summary: "resolve pending recovery sidecars (--list to only show them; --restore-drift also puts drifted tables back)", build: cmdRecover},
	{name: "dlq", summary: "dead letters: list [--reason R] [--json], show SEQ, replay [--reason R] [--seq A-B] [--mode M] [--branch B --from BASE] [--split] [--dry-run], delete SEQ[,SEQ|A-B...] | --reason R | --all [--confirm] [--json]", subs: []command{
		{name: "list", summary: "list dead letters", build: cmdDLQ("list")},
		{name: "show", args: "SEQ", summary: "show one dead letter: its headers and body", build: cmdDLQ("show")},
		{name: "replay", summary: "republish dead letters to the subject they came from", build: cmdDLQ("replay")},
		{name: "delete", args: "[SEQ[,SEQ|A-B...]]", summary: "delete dead letters (and the bodies sent by reference that are theirs alone): what would go unless --confirm", build: cmdDLQ("delete")},
	}},
	{name: "publish", args: "FILE", summary: "validate a graph batch and publish it to a graph's ingest subject (a producer for scripts; FILE - for standard input)", build: cmdPublish},
	{name: "run", summary: "consume graph batches from NATS JetStream", build: cmdRun},
	{name: "schema", summary: "schema migrations: plan FILE.pg (what migrating the graph to it takes; read-only), apply FILE.pg (do it)", subs: []command{
		{name: "plan", args: "FILE.pg", summary: "plan the migration from the graph's accepted schema to FILE.pg: steps, and whether it is supported (exit 12 if not)", build: cmdSchemaPlan, example: schemaPlanExample},
		{name: "apply", args: "FILE.pg", summary: "apply the migration to FILE.pg on a graph no worker serves (--root): one graph commit, recovered forward or back if interrupted", build: cmdSchemaApply, example: schemaApplyExample}}},
	{name: "health", summary: "ask a running worker's /readyz (--live: /healthz); exit 0 only on 200", build: cmdHealth},
	{name: "version", summary: "print the version", build: func(*flagSet) runFunc {
		return func(context.Context, []string) error { fmt.Println(version); return nil }
	}},
}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// newRoot builds the command tree afresh (flags hold their parsed values, so each run gets
// its own).
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:                        "worker",
		Short:                      "omnigraph-worker: a JetStream worker that applies graph batches, and its tools",
		Version:                    version,
		SilenceErrors:              true, // main prints the error and exits by its kind
		SilenceUsage:               true,
		Args:                       cobra.ArbitraryArgs,
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(os.Stderr)
				_ = cmd.Help()
				return &usageError{msg: "a command is required"}
			}
			return unknown(cmd, args[0])
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{msg: fmt.Sprintf("%v (see 'worker %s --help')", err, strings.TrimPrefix(cmd.CommandPath(), "worker "))}
	})
	for _, c := range commands {
		root.AddCommand(c.cobra(c.name))
	}
	decorateCommands(root)
	return root
}

// unknown refuses a command name with cobra's suggestions.
func unknown(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return &usageError{msg: msg}
}

// cobra builds the command; path is its place below the program ("dlq replay").
func (c command) cobra(path string) *cobra.Command {
	use := c.name
	if c.args != "" {
		use += " " + c.args
	}
	cc := &cobra.Command{Use: use, Short: c.summary, Example: c.example, Args: cobra.ArbitraryArgs, SuggestionsMinimumDistance: 2}
	if c.subs != nil {
		// A group takes no flags of its own: those of the subcommand the user meant, given
		// beside a misspelt one (dlq lst --graph g), must not hide the misspelling.
		cc.FParseErrWhitelist.UnknownFlags = true
		names := make([]string, len(c.subs))
		for i, s := range c.subs {
			names[i] = s.name
			cc.AddCommand(s.cobra(path + " " + s.name))
		}
		cc.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{msg: c.name + " needs a subcommand: " + strings.Join(names, ", ")}
			}
			return unknown(cmd, args[0])
		}
		return cc
	}
	fs := &flagSet{FlagSet: cc.Flags()}
	run := c.build(fs)
	cc.RunE = func(cmd *cobra.Command, args []string) error {
		if err := applyCommandFlags(fs, config.Section(path)); err != nil {
			return err
		}
		return run(cmd.Context(), args)
	}
	describeOwnFlags(fs.FlagSet, config.Section(path))
	return cc
}

// execute runs the command line args (without the program name).
func execute(ctx context.Context, args []string) error {
	root := newRoot()
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := execute(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", describe(err))
	}
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var ce *config.Error
	var lw *liveWorkerError
	var pe *ingest.PlacementError
	var ng *storage.NoGraphError
	var bu *storage.URIError
	var ns *ingest.NoStreamError
	var se *ingest.SelectionError
	var le *listenError
	// A served root is refused for how the command was invoked (stop the worker or --force),
	// not for anything in the graph; replicas NATS cannot place, for the configuration; a
	// root that holds no graph or is no root, for the --root given; a graph that has no
	// stream, for the --graph given; a port that cannot be listened on, for the setting.
	if errors.As(err, &ue) || errors.As(err, &ce) || errors.As(err, &lw) || errors.As(err, &pe) || errors.As(err, &ng) ||
		errors.As(err, &bu) || errors.As(err, &ns) || errors.As(err, &se) || errors.As(err, &le) {
		return exitUsage
	}
	return kindExit(err)
}

// describe is err as the CLI prints it: with the entity id of a key conflict, which the
// error's reference text leaves out but a user needs to find the row.
func describe(err error) string {
	var kc *errs.KeyConflict
	if errors.As(err, &kc) && kc.EntityID != nil {
		return fmt.Sprintf("%v (id %q)", err, *kc.EntityID)
	}
	return err.Error()
}
