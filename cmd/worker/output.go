package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Output formats of the commands that print records (-o): json (for get, find and export
// NDJSON in the load envelope, one record a line; for the others one JSON document) and table
// (aligned columns for people).
const (
	formatJSON  = "json"
	formatTable = "table"
)

// output is a command's -o flag, and the --json it had before -o, kept as an alias of -o json.
type output struct {
	fs      *flagSet
	o       *string
	json    *bool
	formats []string
}

// outputFlag declares -o/--output with formats, the first the default; withJSON also declares
// --json, an alias of -o json.
func outputFlag(fs *flagSet, withJSON bool, formats ...string) *output {
	out := &output{fs: fs, formats: formats, json: new(bool)}
	out.o = fs.StringP("output", "o", formats[0], "output format: "+strings.Join(formats, " or "))
	if withJSON {
		out.json = fs.Bool("json", false, "print JSON (-o json)")
	}
	return out
}

// format is the format asked for, checked.
func (o *output) format() (string, error) {
	f := strings.ToLower(*o.o)
	if !slices.Contains(o.formats, f) {
		return "", &usageError{msg: fmt.Sprintf("%s %q: the formats are %s", o.fs.named("output"), *o.o, strings.Join(o.formats, ", "))}
	}
	if *o.json {
		if o.fs.Changed("output") && f != formatJSON {
			return "", &usageError{msg: "--json and -o " + f + " contradict each other"}
		}
		f = formatJSON
	}
	return f, nil
}

// readAtFlags are --branch and --version, the state a read sees.
func readAtFlags(fs *flagSet, what string) (branch *string, version *uint64) {
	branch = fs.String("branch", "main", "branch to "+what)
	version = fs.Uint64("version", 0, "__manifest version to "+what+" (0: latest)")
	return branch, version
}

// recordTable prints NDJSON records in the load envelope as tables, one per type in the order
// they come: a header of id (from, to for edges) and the type's properties, then a row each.
// Strings print bare, other values as JSON; null as -.
func recordTable(w io.Writer, lines [][]byte) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var cur string
	var cols []string
	for _, l := range lines {
		var rec struct {
			Type, Edge, From, To string
			Data                 map[string]json.RawMessage
		}
		d := json.NewDecoder(bytes.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&rec); err != nil {
			return fmt.Errorf("record %s: %w", l, err)
		}
		name := rec.Type
		if rec.Edge != "" {
			name = rec.Edge
		}
		if name != cur {
			if cur != "" {
				fmt.Fprintln(tw)
			}
			cur = name
			cols = cols[:0]
			for k := range rec.Data {
				if k != "id" {
					cols = append(cols, k)
				}
			}
			slices.Sort(cols)
			title, head := "node "+name, []string{"ID"}
			if rec.Edge != "" {
				title, head = "edge "+name, append(head, "FROM", "TO")
			}
			for _, c := range cols {
				head = append(head, strings.ToUpper(c))
			}
			fmt.Fprintln(tw, title)
			fmt.Fprintln(tw, strings.Join(head, "\t"))
		}
		row := []string{cell(rec.Data["id"])}
		if rec.Edge != "" {
			row = append(row, rec.From, rec.To)
		}
		for _, c := range cols {
			row = append(row, cell(rec.Data[c]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// cell is a JSON value as a table shows it.
func cell(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return "-"
	}
	var s string
	if v[0] == '"' && json.Unmarshal(v, &s) == nil {
		if s == "" {
			return `""`
		}
		return strings.NewReplacer("\t", `\t`, "\n", `\n`).Replace(s)
	}
	return string(v)
}

// printLines writes NDJSON records as they are, one a line.
func printLines(lines [][]byte) error {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	_, err := os.Stdout.Write(b.Bytes())
	return err
}

// Completion: the values of the flags and arguments where the graph knows them. A read of the
// root given (--root, else OMNIGRAPH_ROOT) lists the schema's types and the branches; without
// one, or when it cannot be read, nothing is offered.

// openForRead is how every read command starts: its -o format, its settings, and the graph
// root opened read-only (beside a running worker); closeGraph releases the graph.
func openForRead(ctx context.Context, out *output, settings *boundSettings) (format string, g *engine.Graph, closeGraph func(), err error) {
	if format, err = out.format(); err != nil {
		return "", nil, nil, err
	}
	c, err := settings.load()
	if err != nil {
		return "", nil, nil, err
	}
	if g, closeGraph, err = openGraph(ctx, c.Root, c, false, false); err != nil {
		return "", nil, nil, err
	}
	return format, g, closeGraph, nil
}

// completeRoot opens the graph the command line names, read-only, for a completion.
func completeRoot(cmd *cobra.Command) (*engine.Graph, func(), bool) {
	root := ""
	if f := cmd.Flags().Lookup("root"); f != nil {
		root = f.Value.String()
	}
	if root == "" {
		root = getenv(config.EnvName("root"))
	}
	if root == "" {
		return nil, nil, false
	}
	ctx := context.Background()
	st, err := storage.Open(ctx, root, storage.MustExist())
	if err != nil {
		return nil, nil, false
	}
	g, err := engine.OpenReadOnly(ctx, st)
	if err != nil {
		st.Close()
		return nil, nil, false
	}
	return g, func() { st.Close() }, true
}

// completeTypes offers the schema's node and edge types as the first argument.
func completeTypes(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	g, done, ok := completeRoot(cmd)
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer done()
	return g.TypeNames(), cobra.ShellCompDirectiveNoFileComp
}

// completeBranches offers main and the graph's branches.
func completeBranches(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	out := []string{"main"}
	g, done, ok := completeRoot(cmd)
	if !ok {
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	defer done()
	if bs, err := g.Branches(context.Background()); err == nil {
		for _, b := range bs {
			out = append(out, b.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// examples are the Examples of each command's help, by command path.
var examples = map[string]string{
	"get": `  worker get Person alice --root .data/graph            # the node and its edges, NDJSON
  worker get Person alice --root .data/graph -o table   # the same as tables
  worker get WorksAt w1 --root .data/graph --branch stage-1
  worker get Person alice --root .data/graph --version 12 --edges=false -v`,
	"find": `  worker find Person --where "name = 'Alice'" --root .data/graph
  worker find Person --where 'active = true and born >= 1990-01-01' --limit 10 -o table --root .data/graph
  worker find WorksAt --where 'from = alice' --root .data/graph -v   # -v: which index or scan`,
	"count": `  worker count --root .data/graph                  # every type, as a table
  worker count Person --root .data/graph -o json
  worker count --root .data/graph --branch stage-1 --version 40`,
	"commits": `  worker commits --root .data/graph                # branch, actor, message id, time
  worker commits --root .data/graph --branch stage-1 -o json`,
	"export": `  worker export --root .data/graph > graph.ndjson  # load envelope: init + load round-trip it
  worker export --root .data/graph --branch stage-1 -o table`,
	"dlq list": `  worker dlq list --graph demo
  worker dlq list --graph demo --reason key_conflict -o json`,
}

// completeWords completes flag name of c with words.
func completeWords(c *cobra.Command, name string, words []string) {
	_ = c.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return words, cobra.ShellCompDirectiveNoFileComp
	})
}

// decorateCommands adds the examples and the completions of flag values to the command tree.
func decorateCommands(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		path := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
		if ex, ok := examples[path]; ok {
			c.Example = ex
		}
		if f := c.Flags().Lookup("output"); f != nil {
			formats := []string{formatJSON, formatTable}
			_ = c.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return formats, cobra.ShellCompDirectiveNoFileComp
			})
		}
		if c.Flags().Lookup("branch") != nil && c.Flags().Lookup("root") != nil {
			_ = c.RegisterFlagCompletionFunc("branch", completeBranches)
		}
		if c.Flags().Lookup("mode") != nil {
			completeWords(c, "mode", []string{string(engine.ModeAppend), string(engine.ModeMerge), string(engine.ModeOverwrite)})
		}
		if c.Flags().Lookup("reason") != nil {
			completeWords(c, "reason", errs.DeadLetterReasons())
		}
		switch path {
		case "get", "find", "count":
			c.ValidArgsFunction = completeTypes
		}
	}
	walk(root)
}
