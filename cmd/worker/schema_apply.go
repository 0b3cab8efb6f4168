package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/graph/pg/migrate"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

// schemaApplyExample is `worker schema apply -h`'s Examples section, with its exit codes.
const schemaApplyExample = `  # Ask the worker serving graph "demo" to apply next.pg between its batches, and wait
  # for its schema event (a refusal comes back as the request's dead letter)
  worker schema apply --graph demo next.pg

  # Move the graph at /data/g (no worker serving it) to next.pg: one graph commit
  worker schema plan --root /data/g next.pg      # look first
  worker schema apply --root /data/g next.pg

  # A required property the schema adds, backfilled in every stored row
  worker schema apply --root /data/g --default Person.tier='"free"' next.pg

  # Drops remove the data from the tables' history too, not only from the current version
  worker schema apply --root /data/g --allow-data-loss next.pg

  # Exit status: 0 applied (or no change); 12 (schema_unsupported) the plan holds an
  # unsupported change and nothing was written;
  # 3 (invalid) FILE.pg does not compile; 10 recovery_required (an interrupted apply:
  # worker recover finishes or undoes it); 2 usage, or a worker serves the root.`

// schemaApplyOutput is `--json`'s document: the reference CLI's keys and order, then this
// build's commit and new schema identity.
type schemaApplyOutput struct {
	URI                  string         `json:"uri"`
	Supported            bool           `json:"supported"`
	Applied              bool           `json:"applied"`
	StepCount            int            `json:"step_count"`
	GraphManifestVersion uint64         `json:"graph_manifest_version"`
	Steps                []migrate.Step `json:"steps"`
	GraphCommitID        string         `json:"graph_commit_id,omitempty"`
	SchemaIRHash         string         `json:"schema_ir_hash"`
}

// cmdSchemaApply is `worker schema apply FILE.pg`: with --graph, a schema request on
// omnigraph.<graph>.schema that the serving worker applies in stream order between batches
// (the command waits for its schema event); with --root, the migration applied directly to a
// graph no worker serves. Either way one graph commit guarded by a SchemaApply intent.
func cmdSchemaApply(fs *flagSet) runFunc {
	to := targetFlags(fs, "apply directly to a graph no worker serves", "a schema request to omnigraph.<graph>.schema")
	asJSON := fs.Bool("json", false, "print the outcome as JSON (--root; with --graph the event is JSON)")
	dataLoss := fs.Bool("allow-data-loss", false, "make every drop hard: the dropped data is removed from the tables' history, not only from the current version")
	actor := fs.String("actor", "", "the actor recorded on the graph commit")
	msgID := fs.String("msg-id", "", "Nats-Msg-Id of the request (with --graph)")
	defaults := defaultsFlag(fs)
	force := forceFlag(fs)
	wait := waitFlags(fs)
	return func(ctx context.Context, args []string) error {
		const usage = "schema apply takes one FILE.pg argument and exactly one of --root (apply now) or --graph (publish a schema request)"
		if len(args) != 1 {
			return &usageError{msg: usage}
		}
		c, err := to.resolve(usage)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(args[0])
		if err != nil {
			return fmt.Errorf("schema: %w", err)
		}
		fill, err := parseDefaults(*defaults)
		if err != nil {
			return err
		}
		if c.Graph != "" {
			if _, err := pg.CompileFile(args[0], string(src)); err != nil {
				return &schemaInputError{file: args[0], err: err}
			}
			body := ingest.SchemaRequestBody{Schema: string(src), AllowDataLoss: *dataLoss}
			if len(fill) > 0 {
				body.Defaults = map[string]json.RawMessage{}
				for k, v := range fill {
					body.Defaults[k] = json.RawMessage(v)
				}
			}
			cfg := c.Ingest()
			return publishRequest(ctx, c, cfg.SchemaSubject(), body, *actor, *msgID, wait)
		}
		g, closeRoot, err := openGraph(ctx, c.Root, c, true, *force)
		if err != nil {
			return err
		}
		defer closeRoot()
		res, err := g.ApplySchema(ctx, string(src), engine.SchemaApplyOptions{AllowDataLoss: *dataLoss, Actor: *actor, Defaults: fill})
		var pe *pg.ParseError
		var se *pg.SemanticError
		var ie *pg.IdentityError
		if errors.As(err, &pe) || errors.As(err, &se) || errors.As(err, &ie) {
			return &schemaInputError{file: args[0], err: schemaFileError(args[0], err)}
		}
		if res == nil {
			return err
		}
		out := schemaApplyOutput{URI: g.Root().URI(), Supported: res.Plan.Supported, Applied: res.Applied, StepCount: len(res.Plan.Steps),
			GraphManifestVersion: res.ManifestVersion, Steps: res.Plan.Steps, GraphCommitID: res.CommitID, SchemaIRHash: res.SchemaIRHash}
		if out.Steps == nil {
			out.Steps = []migrate.Step{}
		}
		if !res.Applied {
			if st, serr := g.Snapshot(ctx, ""); serr == nil {
				out.GraphManifestVersion = st.ManifestVersion
			}
		}
		if *asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			if jerr := enc.Encode(out); jerr != nil {
				return jerr
			}
		} else {
			yes := map[bool]string{true: "yes", false: "no"}
			fmt.Printf("schema apply for %s\nsupported: %s\napplied: %s\ngraph_manifest_version: %d\n", out.URI, yes[out.Supported], yes[out.Applied], out.GraphManifestVersion)
			if len(out.Steps) == 0 {
				fmt.Println("no schema changes")
			}
			for _, s := range out.Steps {
				fmt.Printf("- %s\n", s)
			}
		}
		return err
	}
}

// defaultsFlag declares --default TYPE.PROPERTY=JSON, repeatable.
func defaultsFlag(fs *flagSet) *[]string {
	return fs.StringArray("default", nil, "backfill a required property the schema adds: TYPE.PROPERTY=JSON (every stored row gets the value; repeatable). Without one such a property is refused (OG-MF-103), as the reference refuses it")
}

// parseDefaults reads --default values into TYPE.PROPERTY -> JSON text.
func parseDefaults(vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		name, value, ok := strings.Cut(v, "=")
		typ, prop, dotted := strings.Cut(name, ".")
		switch {
		case !ok || !dotted || typ == "" || prop == "":
			return nil, &usageError{msg: fmt.Sprintf("--default %q: want TYPE.PROPERTY=JSON", v)}
		case !json.Valid([]byte(value)):
			return nil, &usageError{msg: fmt.Sprintf("--default %q: the value is not JSON (a string is quoted: %s=\"text\")", v, name)}
		}
		out[name] = value
	}
	return out, nil
}
