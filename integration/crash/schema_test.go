package crash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

type schemaCase struct {
	name        string
	applyKill   string // failpoint spec for the crashing `worker schema apply`
	recoverKill string // when set, a `worker recover` after it is killed here too
}

func schemaCases() []schemaCase {
	var out []schemaCase
	// The evolved schema has three table effects: Tag created, Person and Company rewritten.
	steps := []string{"schema.after_arm=kill"}
	for j := 0; j < 3; j++ {
		steps = append(steps, fmt.Sprintf("schema.after_table_commit=%d+1*kill", j))
	}
	steps = append(steps, "schema.after_staging=kill", "schema.after_confirm=kill", "schema.before_publish=kill", "publisher.before_commit=kill")
	for j := 0; j < 3; j++ {
		steps = append(steps, fmt.Sprintf("schema.promote_step=%d+1*kill", j))
	}
	steps = append(steps, "schema.after_promote=kill", "recovery.sidecar_delete=kill")
	for _, s := range steps {
		out = append(out, schemaCase{name: s, applyKill: s})
	}
	for _, rk := range []string{"recovery.before_restore=kill", "recovery.after_restore=kill", "recovery.before_rollback_publish=kill", "recovery.after_rollback_publish=kill"} {
		out = append(out, schemaCase{name: "rollback/" + rk, applyKill: "schema.after_table_commit=2+1*kill", recoverKill: rk})
	}
	// Killed after the first effect only: the rollback takes the untouched tables' planned
	// versions (a paused apply cannot commit them later), and dies before publishing them.
	for _, rk := range []string{"recovery.before_take=1+1*kill", "recovery.before_rollback_publish=kill"} {
		out = append(out, schemaCase{name: "rollback-take/" + rk, applyKill: "schema.after_table_commit=0+1*kill", recoverKill: rk})
	}
	for _, rk := range []string{"recovery.before_forward_publish=kill", "recovery.after_forward_publish=kill", "schema.promote_step=1+1*kill", "recovery.sidecar_delete=kill"} {
		out = append(out, schemaCase{name: "forward/" + rk, applyKill: "schema.after_confirm=kill", recoverKill: rk})
	}
	return out
}

// TestSchemaCrashMatrix kills `worker schema apply` at every step of the SchemaApply protocol
// (after arming, after each table effect, after staging the contract, after confirming, inside
// the publish, between the promoted contract files, after retiring) and `worker recover` at
// the steps of its roll-back and roll-forward, then opens the graph read-write and checks that
// it holds either the old schema with the old rows or the new schema with the rows as the
// apply makes them — never a mix (half-applied) — with every table at its pin, no sidecar and
// no staging left; and that the apply then completes exactly once.
func TestSchemaCrashMatrix(t *testing.T) {
	want := schemaApplied(t)
	var tl tally
	for _, c := range schemaCases() {
		t.Run(c.name, func(t *testing.T) {
			tl.add(runSchemaCase(t, c, want))
		})
	}
	line := fmt.Sprintf("crash-matrix-schema: %d cases, %d lost, %d doubled, %d half-applied", tl.cases, tl.lost, tl.doubled, tl.half)
	summary = strings.TrimSpace(summary + "\n" + line)
	if tl.lost+tl.doubled+tl.half != 0 {
		t.Errorf("%s", line)
	}
}

var schemaSeed = append(slices.Clone(seed),
	`{"type":"Company","data":{"domain":"r.co","name":"R","size":"smb","revenue_usd":7}}`,
	`{"edge":"WorksAt","from":"seed","to":"seed.co","data":{"id":"w-seed","role":"cto"}}`)

func seededGraph(t *testing.T) (string, *engine.Graph) {
	t.Helper()
	dir, _, g := newGraph(t)
	recs, _ := framing.ParseBytes([]byte(strings.Join(schemaSeed, "\n")), framing.DefaultLimits())
	if _, err := g.Load(context.Background(), engine.LoadRequest{Mode: engine.ModeAppend, Records: recs}); err != nil {
		t.Fatal(err)
	}
	return dir, g
}

// schemaApplied is the export of the seeded graph after the apply, made in-process.
func schemaApplied(t *testing.T) []string {
	_, g := seededGraph(t)
	if _, err := g.ApplySchema(context.Background(), graphtest.EvolvedExample(t), engine.SchemaApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	return exportLines(t, g.Root())
}

func runSchemaCase(t *testing.T, c schemaCase, want []string) (lost, doubled, half bool) {
	ctx := context.Background()
	dir, g := seededGraph(t)
	root := g.Root()
	before, accepted := exportLines(t, root), g.Contract().State.IRHash
	file := filepath.Join(t.TempDir(), "next.pg")
	if err := os.WriteFile(file, []byte(graphtest.EvolvedExample(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"schema", "apply", "--root", dir, file}
	if killed, out := run(t, c.applyKill, args...); !killed {
		t.Fatalf("the apply was not killed at %s:\n%s", c.applyKill, out)
	}
	if c.recoverKill != "" {
		if killed, out := run(t, c.recoverKill, "recover", "--root", dir); !killed {
			t.Fatalf("recover was not killed at %s:\n%s", c.recoverKill, out)
		}
	}
	g2, err := engine.Open(ctx, root) // full recovery
	if err != nil {
		t.Fatalf("open after crash: %v", err)
	}
	assertAligned(t, g2)
	if l, _ := recovery.List(ctx, root); len(l) != 0 {
		t.Fatalf("sidecars left after recovery: %v", l)
	}
	if staged, _ := recovery.SchemaStagingPresent(ctx, root); staged {
		t.Fatal("schema staging left after recovery")
	}
	got, newSchema := exportLines(t, root), g2.Contract().State.IRHash != accepted
	switch {
	case !newSchema && slices.Equal(got, before), newSchema && slices.Equal(got, want):
	default:
		half = true
		t.Errorf("half-applied (new schema %v):\n%s\nbefore:\n%s\nwant:\n%s", newSchema, strings.Join(got, "\n"), strings.Join(before, "\n"), strings.Join(want, "\n"))
	}
	// The apply again: done now, or no change.
	if _, out := run(t, "", args...); !strings.Contains(out, "supported: yes") {
		t.Fatalf("apply again: %s", out)
	}
	final := exportLines(t, root)
	lost, doubled = len(final) < len(want), len(final) > len(want)
	if !slices.Equal(final, want) {
		t.Errorf("after the apply again:\n%s\nwant:\n%s", strings.Join(final, "\n"), strings.Join(want, "\n"))
	}
	return lost, doubled, half
}
