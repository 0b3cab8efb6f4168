package migrate

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// go test ./graph/pg/migrate -run TestDocs -update rewrites the generated block.
var update = flag.Bool("update", false, "rewrite the scenario table in docs/schema-evolution.md")

const docPath = "../../../docs/schema-evolution.md"

// elsewhere are the reference's planning tests that are not a pair of schemas, with where
// this project checks the same thing (or why it does not apply).
var elsewhere = []struct{ name, ref, outcome, check string }{
	{"unclassified IR change", planRS + ": plan_guard_rejects_unclassified_zero_step_ir_change",
		"unsupported: one unsupported_change on entity `schema` (a bare next_identity_id bump)", "yes (TestUnclassifiedChange)"},
	{"drop steps through JSON", planRS + ": drop_steps_round_trip_through_serde",
		"each drop_type / drop_property step (soft and hard, node, edge, interface) reads back as itself", "yes (TestPlanJSON)"},
	{"drop mode spelling", planRS + ": drop_mode_serde_uses_snake_case", "`\"soft\"`, `\"hard\"`", "yes (TestPlanJSON)"},
	{"drifted _schema.pg", applyRS + ": plan_schema_rejects_when_schema_contract_has_drifted",
		"error: current _schema.pg no longer matches the accepted compiled schema", "yes (cmd/worker TestSchemaPlan)"},
	{"plan on a server", cliRS + ": schema_plan_with_server_flag_errors_wrong_plane",
		"`schema plan --server` refused: plan is a storage-native command", "n/a: this CLI has no server plane; plan always reads the root"},
	{"apply with a branch", applyRS + ": apply_schema_rejects_when_non_main_branch_exists; " + cliRS + ": schema_apply_rejects_when_non_main_branch_exists",
		"the reference refuses an apply while a non-main branch exists; this project applies on main and checks the branch's merge instead", "differs on purpose: engine TestSchemaApplyWithBranches"},
}

func scenarioTable(scenarios []scenario, withElsewhere bool) string {
	var b strings.Builder
	b.WriteString("| # | scenario | reference test(s) | expected plan / outcome | steps | matches |\n|---|---|---|---|---|---|\n")
	for i, sc := range scenarios {
		steps := fmt.Sprint(len(sc.steps))
		if sc.err != "" {
			steps = "-"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | yes |\n", i+1, sc.name, sc.ref, sc.outcome, steps)
	}
	for i, e := range elsewhere {
		if !withElsewhere {
			break
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | - | %s |\n", len(scenarios)+i+1, e.name, e.ref, e.outcome, e.check)
	}
	return b.String()
}

// The scenario tables of docs/schema-evolution.md are this package's (TestScenarios checks
// every row but the last few of the first, which name their own tests).
func TestDocs(t *testing.T) {
	block(t, "scenarios", scenarioTable(scenarios, true))
	block(t, "further-cases", scenarioTable(extraScenarios, false))
}

// block checks (or with -update rewrites) the text between <!-- name … --> and <!-- /name -->.
func block(t *testing.T, name, want string) {
	t.Helper()
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	open, end := "<!-- "+name+" (generated from graph/pg/migrate: go test ./graph/pg/migrate -run TestDocs -update) -->\n", "<!-- /"+name+" -->"
	i, j := strings.Index(doc, open), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no block %q … %q", docPath, open, end)
	}
	if doc[i+len(open):j] == want {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(doc[:i+len(open)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: block %s differs from the tests (run with -update)", docPath, name)
}

// The document names every step kind, every emitted code and every refusal reason.
func TestDocsNameEverything(t *testing.T) {
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, k := range StepKinds {
		if !strings.Contains(doc, "`"+string(k)+"`") {
			t.Errorf("docs do not name step kind %s", k)
		}
	}
	for _, c := range Codes {
		if !strings.Contains(doc, c.Code) {
			t.Errorf("docs do not name code %s", c.Code)
		}
	}
	for _, r := range []string{"renaming interfaces is not supported", "removing interface", "changing implemented interfaces",
		"changing edge endpoints", "changing cardinality", "adding required property", "changing property type",
		"changing @embed source or model", "removing property constraints", "adding a property-level @", "changing declaration provenance",
		"changing interface-property satisfaction links", "removing constraints from", "adding constraint '",
		"changing annotations beyond @description/@instruction", "unclassified semantic IR change"} {
		if !strings.Contains(doc, r) {
			t.Errorf("docs do not name the refusal %q", r)
		}
	}
}
