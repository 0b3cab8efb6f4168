package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg/migrate"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

func evolved(t testing.TB) string { return graphtest.EvolvedExample(t) }

func TestApplySchema(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	if _, err := load(t, g, "append", append(people, `{"type":"Company","data":{"domain":"b.io","name":"B","size":"smb","revenue_usd":7}}`)...); err != nil {
		t.Fatal(err)
	}
	before, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	beforeVersion := before.ManifestVersion // the state advances with the graph's own publishes
	res, err := g.ApplySchema(ctx, evolved(t), SchemaApplyOptions{Actor: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || res.CommitID == "" {
		t.Fatalf("result %+v", res)
	}
	var kinds []string
	for _, s := range res.Plan.Steps {
		kinds = append(kinds, string(s.Kind))
	}
	if got := strings.Join(kinds, ","); got != "rename_property,add_property,add_type,add_constraint,rename_type,drop_type" {
		t.Fatalf("steps %s", got)
	}
	// Existing rows read null in the new column, the renamed one keeps its values, and the new
	// type and the renamed edge take loads.
	out := export(t, g, "")
	for _, want := range []string{`"revenue":7`, `"EmployedBy"`, `"handle":"alice"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("export lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "revenue_usd") || strings.Contains(out, "WorksAt") {
		t.Fatalf("old names in export:\n%s", out)
	}
	if _, err := load(t, g, "append", `{"type":"Tag","data":{"label":"x"}}`, `{"type":"Person","data":{"handle":"c","name":"C","active":true,"nickname":"cc"}}`,
		`{"edge":"EmployedBy","from":"c","to":"b.io","data":{"id":"e2"}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, g, "append", `{"edge":"Owns","from":"b.io","to":"p","data":{}}`); err == nil {
		t.Fatal("a load of the dropped edge was accepted")
	}
	// A reopened graph has the new schema; the version before still reads the old tables.
	g2, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	if g2.Contract().State.IRHash != res.SchemaIRHash || g2.Catalog().Node("Tag") == nil {
		t.Fatalf("reopened contract %s", g2.Contract().State.IRHash)
	}
	old, err := g.publisher("").SnapshotAt(ctx, beforeVersion)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := old.Table("edge:Owns"); !ok {
		t.Fatalf("the version before the apply lost its dropped table: %d %+v", before.ManifestVersion, old.Tables())
	}
	now, _ := g.Snapshot(ctx, "")
	if _, ok := now.Table("edge:Owns"); ok {
		t.Fatal("the dropped table is still live")
	}
	tablesAligned(t, g)
	noSidecars(t, g)
	if staged, _ := recovery.SchemaStagingPresent(ctx, g.root); staged {
		t.Fatal("staging files left")
	}
	// The same schema again changes nothing.
	again, err := g.ApplySchema(ctx, evolved(t), SchemaApplyOptions{})
	if err != nil || again.Applied {
		t.Fatalf("no-op apply: %+v %v", again, err)
	}
}

func TestApplySchemaRefusals(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	st, _ := g.Snapshot(ctx, "")
	beforeVersion := st.ManifestVersion
	src := graphtest.Schema(t, graphtest.Example)
	_, err := g.ApplySchema(ctx, strings.Replace(src, "    stars: I32?\n", "    stars: I64?\n", 1), SchemaApplyOptions{})
	var ue *migrate.UnsupportedError
	if !errors.As(err, &ue) || ue.Code() != "OG-MF-106" || errs.Kind(err) != errs.KindSchemaUnsupported {
		t.Fatalf("type change: %v", err)
	}
	after, _ := g.Snapshot(ctx, "")
	if after.ManifestVersion != beforeVersion {
		t.Fatal("a refused apply wrote")
	}
	noSidecars(t, g)
}

// Killed at each step of the apply (here: an error at the failpoint, the process's work since
// forgotten by reopening), the graph recovers to the old schema with the old data, or to the
// new schema with every effect, never to a mix.
func TestApplySchemaRecovers(t *testing.T) {
	for _, c := range []struct {
		point   string
		forward bool
	}{
		{FailpointSchemaAfterArm, false},
		{FailpointSchemaAfterTableCommit, false},
		{FailpointSchemaAfterStaging, false},
		{FailpointSchemaAfterConfirm, true},
		{"schema.before_publish", true},
		{"recovery.schema_promote_step", true},
		{FailpointSchemaAfterPublish, true},
	} {
		t.Run(c.point, func(t *testing.T) {
			ctx := context.Background()
			g := testGraph(t)
			if _, err := load(t, g, "append", people...); err != nil {
				t.Fatal(err)
			}
			accepted := g.Contract().State.IRHash
			t.Cleanup(failpoint.Reset)
			point := c.point
			if point == "recovery.schema_promote_step" {
				point = "schema.promote_step"
			}
			if err := failpoint.Enable(point, "1*error"); err != nil {
				t.Fatal(err)
			}
			_, err := g.ApplySchema(ctx, evolved(t), SchemaApplyOptions{})
			var rr *errs.RecoveryRequired
			if !errors.As(err, &rr) {
				t.Fatalf("want RecoveryRequired, got %v", err)
			}
			failpoint.Reset()
			g2, err := Open(ctx, g.root)
			if err != nil {
				t.Fatal(err)
			}
			out := export(t, g2, "")
			st, _ := g2.Snapshot(ctx, "")
			_, tag := st.Table("node:Tag")
			_, owns := st.Table("edge:Owns")
			if c.forward {
				if g2.Contract().State.IRHash == accepted || !tag || owns || !strings.Contains(out, "EmployedBy") {
					t.Fatalf("not rolled forward: tag %v owns %v\n%s", tag, owns, out)
				}
			} else if g2.Contract().State.IRHash != accepted || tag || !owns || !strings.Contains(out, "WorksAt") {
				t.Fatalf("not rolled back: tag %v owns %v\n%s", tag, owns, out)
			}
			if !strings.Contains(out, "alice") {
				t.Fatalf("data lost:\n%s", out)
			}
			tablesAligned(t, g2)
			noSidecars(t, g2)
			if staged, _ := recovery.SchemaStagingPresent(ctx, g2.root); staged {
				t.Fatal("staging files left")
			}
			// And the schema applies (again, or as a no-op) afterwards.
			if _, err := g2.ApplySchema(ctx, evolved(t), SchemaApplyOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A confirmed apply whose publish failed is finished by the next write's heal on the same
// graph, which then validates the batch against the new schema.
func TestHealFinishesSchemaApply(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("schema.before_publish", "1*error")
	_, err := g.ApplySchema(ctx, evolved(t), SchemaApplyOptions{})
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) {
		t.Fatalf("want RecoveryRequired, got %v", err)
	}
	if _, err := load(t, g, "append", `{"type":"Tag","data":{"label":"x"}}`); err != nil {
		t.Fatalf("a batch of the new schema after the heal: %v", err)
	}
	rows := auditRows(t, g)
	if len(rows) != 1 || rows[0].Kind != recovery.RolledForward || rows[0].WriterKind != string(recovery.SchemaApply) {
		t.Fatalf("audit %+v", rows)
	}
	noSidecars(t, g)
}

// A writer follows a schema another process applied at its next write, and holds (kind
// schema) when it cannot load the new contract rather than write against the old one.
func TestWriterFollowsSchemaAppliedElsewhere(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ApplySchema(ctx, evolved(t), SchemaApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, g, "append", `{"type":"Tag","data":{"label":"x"}}`); err != nil {
		t.Fatalf("a batch of the schema applied elsewhere: %v", err)
	}
	if g.Contract().State.IRHash != other.Contract().State.IRHash {
		t.Fatal("the writer did not follow the schema")
	}
	if _, err := load(t, g, "append", `{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w9"}}`); errs.Kind(err) != errs.KindInvalid {
		t.Fatalf("a batch of the old schema: %v", err)
	}
	// A contract this build cannot load: the write holds, nothing is written.
	st, _ := g.Snapshot(ctx, "")
	version := st.ManifestVersion
	state, _ := g.root.Get(ctx, "__schema_state.json")
	if err := g.root.Put(ctx, "__schema_state.json", []byte(strings.Replace(string(state), `"schema_ir_hash": "`, `"schema_ir_hash": "0`, 1))); err != nil {
		t.Fatal(err)
	}
	_, err = load(t, g, "append", `{"type":"Tag","data":{"label":"y"}}`)
	var sc *SchemaChangedError
	if !errors.As(err, &sc) || errs.Kind(err) != errs.KindSchema || !errs.NeedsOperator(err) {
		t.Fatalf("an unloadable schema: %v", err)
	}
	if st, _ := g.publisher("").Snapshot(ctx); st.ManifestVersion != version {
		t.Fatal("a write went through against the old schema")
	}
}

// A soft drop keeps the dropped column in the table's history; a hard one (--allow-data-loss)
// leaves only the version the apply wrote.
func TestHardDropRemovesHistory(t *testing.T) {
	ctx := context.Background()
	for _, hard := range []bool{false, true} {
		g := testGraph(t)
		if _, err := load(t, g, "append", people...); err != nil {
			t.Fatal(err)
		}
		st, _ := g.Snapshot(ctx, "")
		e, _ := st.Table("node:Person")
		path, old := e.Path, e.Version
		src := strings.Replace(graphtest.Schema(t, graphtest.Example), "    skills: [String]?\n", "", 1)
		res, err := g.ApplySchema(ctx, src, SchemaApplyOptions{AllowDataLoss: hard})
		if err != nil || len(res.Plan.Steps) != 1 || res.Plan.Steps[0].Kind != migrate.DropProperty || (res.Plan.Steps[0].Mode == migrate.Hard) != hard {
			t.Fatalf("apply: %+v %v", res, err)
		}
		_, err = lance.Open(ctx, g.root.Sub(path), lance.AtVersion(old))
		if hard && err == nil || !hard && err != nil {
			t.Fatalf("hard %v: the version before the drop: %v", hard, err)
		}
		if out := export(t, g, ""); !strings.Contains(out, "alice") || strings.Contains(out, "skills") {
			t.Fatalf("hard %v: export\n%s", hard, out)
		}
	}
}

// A schema apply is on main; branches forked before it keep their manifests. Their merges are
// checked per table: rows inserted under columns the accepted schema only widened merge (with
// nulls), a renamed type merges by identity, and what the accepted schema dropped, renamed or
// forbids is a schema_mismatch merge conflict naming it. Loads into such a branch's stale
// tables are refused, typed; a branch forked after the apply loads and merges as ever.
func TestSchemaApplyWithBranches(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "", "", "append", `{"type":"Project","data":{"org":"o","slug":"p","name":"P","status":"active","started_at":"2026-01-01T00:00:00Z"}}`)
	forks := map[string][]string{
		"ins":  {`{"type":"Person","data":{"handle":"ins1","name":"I","active":true}}`},
		"upd":  {`{"type":"Person","data":{"handle":"alice","name":"Alice U","active":true}}`},
		"comp": {`{"type":"Company","data":{"domain":"c2.io","name":"C2","size":"smb","revenue_usd":5}}`},
		"owns": {`{"edge":"Owns","from":"acme.io","to":"[\"o\",\"p\"]","data":{"id":"o1"}}`},
		"wa":   {`{"type":"Person","data":{"handle":"w","name":"W","active":true}}`, `{"edge":"WorksAt","from":"bob","to":"acme.io","data":{"id":"w2"}}`},
	}
	for b, lines := range forks {
		loadInto(t, g, b, "main", "merge", lines...)
	}
	if _, err := g.ApplySchema(ctx, evolved(t), SchemaApplyOptions{}); err != nil {
		t.Fatalf("apply with branches: %v", err)
	}
	// Loads into the stale branches are refused, typed, naming the table.
	for _, c := range []struct{ branch, line, key string }{
		{"ins", `{"type":"Person","data":{"handle":"x","name":"X","active":true,"nickname":"n"}}`, "node:Person"},
		{"ins", `{"type":"Tag","data":{"label":"x"}}`, "node:Tag"},
		{"wa", `{"edge":"EmployedBy","from":"alice","to":"acme.io","data":{"id":"w3"}}`, "edge:EmployedBy"},
	} {
		_, err := g.Load(ctx, LoadRequest{Branch: c.branch, Mode: ModeMerge, Records: records(t, c.line)})
		var sb *StaleBranchError
		if !errors.As(err, &sb) || sb.TableKey != c.key || errs.Kind(err) != errs.KindSchemaUnsupported {
			t.Fatalf("a load into %s (%s): %v", c.branch, c.key, err)
		}
	}
	merge := func(b string) error {
		_, err := g.Merge(ctx, MergeRequest{Source: b})
		return err
	}
	for _, b := range []string{"ins", "wa"} {
		if err := merge(b); err != nil {
			t.Fatalf("merge %s: %v", b, err)
		}
	}
	out := export(t, g, "")
	for _, want := range []string{`"handle":"ins1"`, `"handle":"w"`, `{"edge":"EmployedBy","from":"bob","to":"acme.io"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("main lacks %s:\n%s", want, out)
		}
	}
	for b, want := range map[string]string{
		"upd":  "rows updated or deleted on the source under an earlier schema",
		"comp": "the accepted schema no longer has revenue_usd",
		"owns": "the accepted schema no longer has this type",
	} {
		err := merge(b)
		var mc *errs.MergeConflicts
		if !errors.As(err, &mc) || len(mc.Conflicts) != 1 || mc.Conflicts[0].Kind != ConflictSchemaMismatch || !strings.Contains(mc.Conflicts[0].Message, want) {
			t.Fatalf("merge %s: %v", b, err)
		}
	}
	// A branch forked now has the accepted schema.
	loadInto(t, g, "fresh", "main", "append", `{"type":"Tag","data":{"label":"f"}}`, `{"type":"Person","data":{"handle":"f","name":"F","active":true,"nickname":"ff"}}`)
	if err := merge("fresh"); err != nil {
		t.Fatal(err)
	}
	if out := export(t, g, ""); !strings.Contains(out, `"nickname":"ff"`) || !strings.Contains(out, `"label":"f"`) {
		t.Fatalf("main after the fresh branch:\n%s", out)
	}
	tablesAligned(t, g)
}

// A required property the schema adds is refused (OG-MF-103) unless the apply is given a
// default for it: every stored row then holds it. A default that does not fit the property is
// refused before anything is written, as is one for a property the schema does not add.
func TestApplySchemaBackfillsRequiredProperty(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(graphtest.Schema(t, graphtest.Example), "    active: Bool\n", "    active: Bool\n    level: I32\n    tier: enum(free, paid)\n", 1)
	st, _ := g.Snapshot(ctx, "")
	version := st.ManifestVersion
	var ue *migrate.UnsupportedError
	if _, err := g.ApplySchema(ctx, src, SchemaApplyOptions{}); !errors.As(err, &ue) || ue.Code() != migrate.CodeRequiredProperty {
		t.Fatalf("without a default: %v", err)
	}
	for _, c := range []struct {
		defaults map[string]string
		want     string
	}{
		{map[string]string{"Person.level": `"x"`, "Person.tier": `"free"`}, "default.Person.level"},
		{map[string]string{"Person.level": `1`, "Person.tier": `"gold"`}, "invalid enum value 'gold'"},
		{map[string]string{"Person.level": `1`, "Person.tier": `"free"`, "Person.name": `"n"`}, "adds no required property Person.name"},
		{map[string]string{"Person.level": `1`}, "OG-MF-103"},
	} {
		_, err := g.ApplySchema(ctx, src, SchemaApplyOptions{Defaults: c.defaults})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("defaults %v: %v, want %q", c.defaults, err, c.want)
		}
	}
	if st, _ := g.publisher("").Snapshot(ctx); st.ManifestVersion != version {
		t.Fatal("a refused apply wrote")
	}
	noSidecars(t, g)
	res, err := g.ApplySchema(ctx, src, SchemaApplyOptions{Defaults: map[string]string{"Person.level": `3`, "Person.tier": `"paid"`}})
	if err != nil || !res.Applied {
		t.Fatalf("with defaults: %+v %v", res, err)
	}
	out := export(t, g, "")
	if strings.Count(out, `"level":3`) != 2 || strings.Count(out, `"tier":"paid"`) != 2 {
		t.Fatalf("export:\n%s", out)
	}
	if _, err := load(t, g, "append", `{"type":"Person","data":{"handle":"c","name":"C","active":true}}`); errs.Kind(err) != errs.KindInvalid {
		t.Fatalf("a new row without the required property: %v", err)
	}
}

// Removing an @index (this project's drop_constraint) changes the contract only; the next index
// maintenance removes the table's index of that column, and keeps the others.
func TestDropIndexFollows(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	if _, err := load(t, g, "append", `{"type":"Doc","data":{"url":"https://a","title":"alpha beta","body":"b"}}`,
		`{"type":"Doc","data":{"url":"https://b","title":"gamma","body":"c"}}`); err != nil {
		t.Fatal(err)
	}
	indexNames := func() []string {
		st, _ := g.Snapshot(ctx, "")
		e, _ := st.Table("node:Doc")
		ds, err := lance.Open(ctx, g.root.Sub(e.Path))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range ds.Indices() {
			out = append(out, x.Name)
		}
		return out
	}
	if _, err := g.Optimize(ctx, OptimizeOptions{Indices: true}); err != nil {
		t.Fatal(err)
	}
	if got := indexNames(); !slices.Contains(got, "title_idx") || !slices.Contains(got, "id_idx") {
		t.Fatalf("indices before %v", got)
	}
	src := strings.Replace(graphtest.Schema(t, graphtest.Example), "    title: String @index\n", "    title: String\n", 1)
	res, err := g.ApplySchema(ctx, src, SchemaApplyOptions{})
	if err != nil || len(res.Plan.Steps) != 1 || res.Plan.Steps[0].Kind != migrate.DropConstraint {
		t.Fatalf("apply: %+v %v", res, err)
	}
	if !g.IndicesDue(0) {
		t.Fatal("no index maintenance due after the drop")
	}
	if _, err := g.Optimize(ctx, OptimizeOptions{Indices: true}); err != nil {
		t.Fatal(err)
	}
	if got := indexNames(); slices.Contains(got, "title_idx") || !slices.Contains(got, "id_idx") {
		t.Fatalf("indices after %v", got)
	}
	tablesAligned(t, g)
}
