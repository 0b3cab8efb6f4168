package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/graph/pg/migrate"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// schemaPlanExample is `worker schema plan -h`'s Examples section, with its exit codes.
const schemaPlanExample = `  # What migrating the graph at /data/g to next.pg takes, step by step
  worker schema plan --root /data/g next.pg

  # The same as JSON (the reference's keys: supported, step_count, steps[].kind, …)
  worker schema plan --root /data/g --json next.pg

  # Drops as an apply with --allow-data-loss would run them (hard, not soft)
  worker schema plan --root /data/g --allow-data-loss next.pg

  # A fleet's graph "orders": its root is <root>/orders, root and graphs from the
  # worker's own config file (or OMNIGRAPH_ROOT and OMNIGRAPH_GRAPHS)
  worker schema plan --config worker.yaml --graph orders next.pg

  # Exit status: 0 the plan is supported; 12 (schema_unsupported) it holds an unsupported
  # change, printed with the plan; 3 (invalid) FILE.pg does not compile or its
  # @rename_from cannot be resolved; 2 usage, or no graph at the root.`

// schemaInputError is a desired schema refused before any plan: it does not compile, or its
// identities cannot be resolved from the accepted schema (a bad @rename_from). The request
// itself is at fault, so it exits as invalid input (3).
type schemaInputError struct {
	file string
	err  error
}

func (e *schemaInputError) Error() string {
	var pe *pg.ParseError
	var se *pg.SemanticError
	if errors.As(e.err, &pe) || errors.As(e.err, &se) {
		return e.err.Error() // already "file:line:col: …"
	}
	return e.file + ": " + e.err.Error()
}

func (e *schemaInputError) Unwrap() error     { return e.err }
func (e *schemaInputError) ErrorKind() string { return errs.KindInvalid }

// schemaPlanOutput is `--json`'s document, the reference CLI's keys and order.
type schemaPlanOutput struct {
	URI       string         `json:"uri"`
	Supported bool           `json:"supported"`
	StepCount int            `json:"step_count"`
	Steps     []migrate.Step `json:"steps"`
}

// cmdSchemaPlan is `worker schema plan FILE.pg`: the migration from the graph's accepted
// schema to FILE.pg, read-only (the graph is opened without recovery and nothing is written).
func cmdSchemaPlan(fs *flagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	dataLoss := fs.Bool("allow-data-loss", false, "show drops as an apply with --allow-data-loss would run them: hard (the data goes) rather than soft")
	defaults := defaultsFlag(fs)
	graph := fs.String("graph", "", "plan against this graph of a fleet: its root is <root>/<graph> when the graphs setting lists it, the root setting itself otherwise")
	settings := bindSettings(fs, config.RootSettings, []string{"graphs"})
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return &usageError{msg: "schema plan takes one FILE.pg argument"}
		}
		c, err := settings.load()
		if err != nil {
			return err
		}
		root, err := schemaPlanRoot(c, *graph)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(args[0])
		if err != nil {
			return fmt.Errorf("schema: %w", err)
		}
		// Read-only: no recovery, nothing created (MustExist), and a root that holds no graph
		// is the --root given, not an internal error.
		st, err := openRoot(ctx, root, c, storage.MustExist())
		if err != nil {
			return err
		}
		defer st.Close()
		if ok, err := st.Exists(ctx, pg.SchemaStateFile); err != nil {
			return err
		} else if !ok {
			return &storage.NoGraphError{Root: st.URI(), Hint: "no " + pg.SchemaStateFile + " (worker init makes a graph)"}
		}
		g, err := engine.OpenReadOnly(ctx, st)
		if err != nil {
			return err
		}
		plan, diags, err := migrate.PlanSchema(g.Contract().IR, args[0], string(src))
		if err != nil {
			return &schemaInputError{file: args[0], err: err}
		}
		for _, d := range diags {
			fmt.Fprintf(os.Stderr, "warning: %s: @rename_from(%q) ignored: an accepted declaration has this exact name (%s)\n", d.Entity, d.Hint, d.Kind)
		}
		if *dataLoss {
			plan = plan.WithDataLoss()
		}
		fill, err := parseDefaults(*defaults)
		if err != nil {
			return err
		}
		if len(fill) > 0 {
			names := make([]string, 0, len(fill))
			for n := range fill {
				names = append(names, n)
			}
			sort.Strings(names)
			var unused []string
			if plan, unused = plan.WithBackfill(names); len(unused) > 0 {
				return &usageError{msg: "--default: the schema adds no required property " + strings.Join(unused, ", ")}
			}
		}
		uri := g.Root().URI()
		if *asJSON {
			steps := plan.Steps
			if steps == nil {
				steps = []migrate.Step{}
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false) // a description's "<" as serde_json writes it
			if err := enc.Encode(schemaPlanOutput{URI: uri, Supported: plan.Supported, StepCount: len(steps), Steps: steps}); err != nil {
				return err
			}
		} else {
			printSchemaPlan(uri, plan)
		}
		return plan.Err()
	}
}

// schemaPlanRoot is the root to plan against: the root setting, or with --graph the root
// `worker run` serves that graph from (<root>/<graph> in a fleet whose graphs list it).
func schemaPlanRoot(c *config.Config, graph string) (string, error) {
	if c.Root == "" {
		return "", &usageError{msg: "schema plan needs --root (or " + config.EnvName("root") + ", or root: in the --config file), also with --graph"}
	}
	if graph == "" {
		return c.Root, nil
	}
	list := c.GraphList()
	if len(list) == 0 {
		return c.Root, nil // one graph served from root, as `worker run --graph` serves it
	}
	for _, g := range list {
		if g == graph {
			return c.GraphRoot(graph), nil
		}
	}
	return "", &usageError{msg: fmt.Sprintf("graph %q is not one of the graphs setting's (%s)", graph, c.Graphs)}
}

// printSchemaPlan prints the plan as the reference CLI does: the root, the verdict, then one
// line per step in order.
func printSchemaPlan(uri string, plan *migrate.Plan) {
	fmt.Printf("schema plan for %s\n", uri)
	fmt.Printf("supported: %s\n", map[bool]string{true: "yes", false: "no"}[plan.Supported])
	if len(plan.Steps) == 0 {
		fmt.Println("no schema changes")
		return
	}
	for _, s := range plan.Steps {
		fmt.Printf("- %s\n", s)
	}
}
