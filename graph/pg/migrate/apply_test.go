package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/graph/pg/migrate"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// TestDocsApplyOutcomes applies every planning scenario through the engine (engine.ApplySchema
// on a graph made from the old schema) and checks the outcome its plan promises: a supported
// plan applies as one commit after which the accepted schema plans as no change, an
// unsupported one is refused with nothing written, an identity error is refused before a
// plan. The table of outcomes in docs/schema-evolution.md is generated from it.
func TestDocsApplyOutcomes(t *testing.T) {
	ref, further := migrate.ApplyCases()
	table := func(cases []migrate.ApplyCase) string {
		var b strings.Builder
		b.WriteString("| # | scenario | apply outcome | matches the plan |\n|---|---|---|---|\n")
		for i, c := range cases {
			fmt.Fprintf(&b, "| %d | %s | %s | yes |\n", i+1, c.Name, applyCase(t, c))
		}
		return b.String()
	}
	migrate.DocBlock(t, "apply-scenarios", table(ref))
	migrate.DocBlock(t, "apply-further-cases", table(further))
}

// applyCase runs one case and returns its outcome for the table; a mismatch fails the test.
func applyCase(t *testing.T, c migrate.ApplyCase) string {
	ctx := context.Background()
	fail := func(format string, args ...any) string {
		t.Errorf("%s: "+format, append([]any{c.Name}, args...)...)
		return "MISMATCH"
	}
	root, err := storage.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	g, err := engine.Init(ctx, root, c.Old)
	if err != nil {
		return fail("init: %v", err)
	}
	if c.Via != "" {
		if _, err := g.ApplySchema(ctx, c.Via, engine.SchemaApplyOptions{}); err != nil {
			return fail("apply the intermediate schema: %v", err)
		}
	}
	before, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	version := before.ManifestVersion
	res, err := g.ApplySchema(ctx, c.New, engine.SchemaApplyOptions{AllowDataLoss: c.DataLoss})
	after, serr := g.Snapshot(ctx, "")
	if serr != nil {
		t.Fatal(serr)
	}
	wrote := after.ManifestVersion != version
	var ie *pg.IdentityError
	var ue *migrate.UnsupportedError
	switch {
	case c.Err != "":
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.Err) || wrote {
			return fail("want an identity error %q, got %v (wrote %v)", c.Err, err, wrote)
		}
		return "refused before a plan (schema identity), nothing written"
	case !c.Supported:
		if !errors.As(err, &ue) || wrote {
			return fail("want schema_unsupported, got %v (wrote %v)", err, wrote)
		}
		code := ue.Code()
		if code == "" {
			code = "(no code)"
		}
		return "refused: schema_unsupported " + code + ", nothing written"
	case err != nil:
		return fail("apply: %v", err)
	case c.Steps == 0:
		if res.Applied || wrote {
			return fail("no steps, but applied %v wrote %v", res.Applied, wrote)
		}
		return "no change: nothing written"
	}
	if !res.Applied || after.ManifestVersion != version+1 {
		return fail("applied %v at manifest version %d (was %d)", res.Applied, after.ManifestVersion, version)
	}
	reopened, err := engine.Open(ctx, root)
	if err != nil {
		return fail("reopen: %v", err)
	}
	again, _, err := migrate.PlanSchema(reopened.Contract().IR, "new.pg", c.New)
	if err != nil || len(again.Steps) != 0 || reopened.Contract().State.IRHash != res.SchemaIRHash {
		return fail("after the apply the schema plans as %v (%v)", again, err)
	}
	return fmt.Sprintf("applied: %d step(s), one commit; the same schema then plans as no change", c.Steps)
}
