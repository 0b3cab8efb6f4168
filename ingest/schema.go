package ingest

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/graph/pg/migrate"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// SchemaRequestBody is the JSON body of a schema apply request on omnigraph.<graph>.schema: the
// desired schema's .pg source, applied in stream order between batches.
type SchemaRequestBody struct {
	Schema        string `json:"schema"`
	AllowDataLoss bool   `json:"allow_data_loss"`
	// Defaults backfill required properties the schema adds: "<Type>.<property>" to the
	// value every stored row gets (engine.SchemaApplyOptions.Defaults).
	Defaults map[string]json.RawMessage `json:"defaults,omitempty"`
}

// SchemaEvent is the schema part of a schema event: the steps applied, the schema's identity
// after the request, and whether anything changed.
type SchemaEvent struct {
	Applied      bool           `json:"applied"`
	StepCount    int            `json:"step_count"`
	Steps        []migrate.Step `json:"steps"`
	SchemaIRHash string         `json:"schema_ir_hash"`
}

// ParseSchemaRequest reads a schema request strictly and compiles its schema, so a schema that
// does not compile is refused as invalid input before the write, naming its line.
func ParseSchemaRequest(data []byte) (SchemaRequestBody, error) {
	var body SchemaRequestBody
	if err := decodeRequest(data, &body, "schema request", `{"schema", "allow_data_loss", "defaults"}`); err != nil {
		return body, err
	}
	if body.Schema == "" {
		return body, &errs.InvalidInput{Field: "schema", Reason: "a schema request needs the desired schema's .pg source"}
	}
	if _, err := pg.CompileFile("schema", body.Schema); err != nil {
		return body, &errs.InvalidInput{Field: "schema", Reason: err.Error()}
	}
	return body, nil
}

// schemaRequest parses a schema request and returns the apply. A plan the migration rules
// refuse is schema_unsupported: permanent, dead-lettered.
// A desired schema whose @rename_from names nothing is invalid input.
func (w *Worker) schemaRequest(msg jetstream.Msg, receipt *publisher.Receipt) (func(context.Context) (*applied, error), error) {
	body, err := ParseSchemaRequest(msg.Data())
	if err != nil {
		return nil, err
	}
	o := engine.SchemaApplyOptions{AllowDataLoss: body.AllowDataLoss, Actor: msg.Headers().Get(HeaderActor), Receipt: receipt}
	if len(body.Defaults) > 0 {
		o.Defaults = map[string]string{}
		for k, v := range body.Defaults {
			o.Defaults[k] = string(v)
		}
	}
	return func(ctx context.Context) (*applied, error) {
		res, err := w.g.ApplySchema(ctx, body.Schema, o)
		var ie *pg.IdentityError
		if errors.As(err, &ie) {
			return nil, &errs.InvalidInput{Field: "schema", Reason: err.Error()}
		}
		if err != nil {
			return nil, err
		}
		steps := res.Plan.Steps
		if steps == nil {
			steps = []migrate.Step{}
		}
		// A schema already accepted is no commit: the event has no commit id, as an
		// already_up_to_date merge's has none.
		ev := Event{Kind: RequestSchema, Branch: "main", AlreadyApplied: res.AlreadyApplied,
			GraphCommitID: res.CommitID, ManifestVersion: res.ManifestVersion,
			Schema: &SchemaEvent{Applied: res.Applied, StepCount: len(steps), Steps: steps, SchemaIRHash: res.SchemaIRHash}}
		if o.Actor != "" {
			ev.ActorID = &o.Actor
		}
		return &applied{event: ev}, nil
	}, nil
}
