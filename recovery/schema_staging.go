package recovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// A schema apply writes the new contract beside the accepted one (the .staging files) before it
// confirms its intent, and promotes it over the accepted files only after its __manifest commit
// is visible. The state file goes last both ways: it is what names the accepted schema, so a
// crash between two promotions leaves the old state naming a contract whose other files are
// already new, which only recovery (PromoteSchemaStaging again) may touch.

var stagingPairs = [][2]string{
	{pg.SchemaSourceStagingFile, pg.SchemaSourceFile},
	{pg.SchemaIRStagingFile, pg.SchemaIRFile},
	{pg.SchemaStateStagingFile, pg.SchemaStateFile},
}

// WriteSchemaStaging writes c's three files under their staging names.
func WriteSchemaStaging(ctx context.Context, root storage.Store, c *pg.Contract) error {
	files := c.Files()
	for _, p := range stagingPairs {
		if err := root.Put(ctx, p[0], []byte(files[p[1]])); err != nil {
			return err
		}
	}
	return nil
}

// PromoteSchemaStaging makes the staged contract whose IR hash is target the accepted one, and
// removes the staging files. It is idempotent: with the staging gone and target already
// accepted it does nothing. Staged files of another schema, or no staging while another schema
// is accepted, are refused (*StateError): the intent's proof is gone.
func PromoteSchemaStaging(ctx context.Context, root storage.Store, target string) error {
	staged, err := root.Get(ctx, pg.SchemaStateStagingFile)
	if errors.Is(err, storage.ErrNotFound) {
		raw, err := root.Get(ctx, pg.SchemaStateFile)
		if err != nil {
			return err
		}
		state, err := pg.ParseSchemaState(raw)
		if err != nil {
			return err
		}
		if state.IRHash != target {
			return refuseFile(pg.SchemaStateFile, "the schema apply's staged contract (schema_ir_hash %s) is gone and %s is accepted; refusing", target, state.IRHash)
		}
		return discardStaging(ctx, root)
	}
	if err != nil {
		return err
	}
	state, err := pg.ParseSchemaState(staged)
	if err != nil {
		return err
	}
	if state.IRHash != target {
		return refuseFile(pg.SchemaStateStagingFile, "staged schema_ir_hash %s is not the intent's %s; refusing", state.IRHash, target)
	}
	src, err := root.Get(ctx, pg.SchemaSourceStagingFile)
	if err != nil {
		return fmt.Errorf("staged schema source: %w", err)
	}
	ir, err := root.Get(ctx, pg.SchemaIRStagingFile)
	if err != nil {
		return fmt.Errorf("staged schema IR: %w", err)
	}
	if _, err := pg.OpenContract(string(src), ir, staged); err != nil {
		return refuseFile(pg.SchemaStateStagingFile, "the staged contract does not hold together: %v", err)
	}
	for i, body := range [][]byte{src, ir, staged} {
		if err := root.Put(ctx, stagingPairs[i][1], body); err != nil {
			return err
		}
		if err := failpoint.Inject("schema.promote_step"); err != nil {
			return err
		}
	}
	return discardStaging(ctx, root)
}

// DiscardSchemaStaging removes whatever staging files a rolled-back schema apply left.
func DiscardSchemaStaging(ctx context.Context, root storage.Store) error {
	return discardStaging(ctx, root)
}

func discardStaging(ctx context.Context, root storage.Store) error {
	for _, p := range stagingPairs {
		if err := root.Delete(ctx, p[0]); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
	}
	return nil
}

// SchemaStagingPresent says whether any staging file of a schema apply exists.
func SchemaStagingPresent(ctx context.Context, root storage.Store) (bool, error) {
	for _, p := range stagingPairs {
		ok, err := root.Exists(ctx, p[0])
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// refuseFile is a *StateError about a contract file rather than a table.
func refuseFile(name, format string, args ...any) *StateError {
	return &StateError{Table: name, msg: name + ": " + fmt.Sprintf(format, args...)}
}
