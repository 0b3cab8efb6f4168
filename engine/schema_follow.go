package engine

import (
	"context"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// SchemaChangedError is a write refused because another writer moved the graph's accepted
// schema to a contract this build cannot load. A leased worker holds the message (kind
// schema) rather than write against the schema it had; the fix is an upgrade or a schema
// this build reads.
type SchemaChangedError struct {
	Was, Now string // schema_ir_hash before and after
	Reason   string
}

func (e *SchemaChangedError) Error() string {
	return fmt.Sprintf("the graph's accepted schema changed under this writer (schema_ir_hash %s, was %s) and cannot be loaded: %s", e.Now, e.Was, e.Reason)
}

// ErrorKind is errs.KindSchema.
func (e *SchemaChangedError) ErrorKind() string { return errs.KindSchema }

// ErrorDetail names both identities.
func (e *SchemaChangedError) ErrorDetail() map[string]any {
	return map[string]any{"schema_ir_hash": e.Now, "was": e.Was}
}

// followSchema makes the graph's contract the accepted one in storage: a write checks it at
// its entry, so a schema another process applied is followed before anything is validated or
// written against the one before. raw is __schema_state.json as just read. A later apply
// races the write's publish, which the apply's own commit on main makes fail
// (ExactGraphHead), and the retry follows it here.
func (g *Graph) followSchema(ctx context.Context, raw []byte) error {
	cur := g.Contract().State
	state, moved, err := g.readSchemaState(raw)
	if err != nil {
		return &SchemaChangedError{Was: cur.IRHash, Now: "?", Reason: err.Error()}
	}
	if !moved {
		return nil
	}
	c, err := loadContract(ctx, g.root)
	if err != nil {
		return &SchemaChangedError{Was: cur.IRHash, Now: state.IRHash, Reason: err.Error()}
	}
	g.contract.Store(c)
	g.tables = map[tableRef]*tableState{} // the other writer may have rewritten tables
	return nil
}

// schemaMoved says raw (__schema_state.json as just read) is not the accepted schema this
// writer holds, or is unreadable: followSchema has something to do or to report.
func (g *Graph) schemaMoved(raw []byte) bool {
	_, moved, err := g.readSchemaState(raw)
	return err != nil || moved
}

// readSchemaState parses raw and says whether it names another schema than the contract this
// writer holds (its IR hash or domain differs).
func (g *Graph) readSchemaState(raw []byte) (state *pg.SchemaState, moved bool, err error) {
	cur := g.Contract().State
	if state, err = pg.ParseSchemaState(raw); err != nil {
		return state, false, err
	}
	return state, state.IRHash != cur.IRHash || state.Domain != cur.Domain, nil
}
