package main

import (
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/pg/migrate"
)

// The reference CLI's apply cases (cli_schema_config.rs: schema_apply_json_applies_supported_
// migration, schema_apply_rejects_unsupported_plan, schema_apply_human_reports_noop), as this
// CLI spells them.
func TestSchemaApply(t *testing.T) {
	withEnv(t, nil)
	root := filepath.Join(t.TempDir(), "g")
	initRefGraph(t, root)
	add := writeTemp(t, "add.pg", strings.Replace(refTestSchema, "    age: I32?\n}", "    age: I32?\n    nickname: String?\n}", 1))
	widen := writeTemp(t, "widen.pg", strings.Replace(refTestSchema, "age: I32?", "age: I64?", 1))

	before := rootState(t, root)
	_, err := captureStdout(t, func() error { return run("schema", "apply", "--root", root, widen) })
	var ue *migrate.UnsupportedError
	if !errors.As(err, &ue) || exitCode(err) != 12 {
		t.Fatalf("widen: %v (exit %d)", err, exitCode(err))
	}
	if after := rootState(t, root); !maps.Equal(after, before) {
		t.Fatalf("a refused apply changed the root:\n%v\n---\n%v", before, after)
	}

	out, err := captureStdout(t, func() error { return run("schema", "apply", "--root", root, "--json", add) })
	var doc map[string]any
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("apply --json: %v\n%s", err, out)
	}
	if doc["applied"] != true || doc["supported"] != true || doc["step_count"] != 1.0 || doc["graph_commit_id"] == "" {
		t.Fatalf("apply --json: %s", out)
	}
	// The accepted schema is the applied one now: planning it again is no change.
	out, err = captureStdout(t, func() error { return run("schema", "plan", "--root", root, add) })
	if err != nil || !strings.Contains(out, "no schema changes") {
		t.Fatalf("plan after the apply: %v\n%s", err, out)
	}
	out, err = captureStdout(t, func() error { return run("schema", "apply", "--root", root, add) })
	if err != nil || !strings.Contains(out, "applied: no\n") || !strings.Contains(out, "no schema changes") {
		t.Fatalf("no-op apply: %v\n%s", err, out)
	}

	// A required property: refused (12) without a default, planned and applied with one.
	required := writeTemp(t, "required.pg", strings.Replace(refTestSchema, "    age: I32?\n}", "    age: I32?\n    nickname: String?\n    rank: I32\n}", 1))
	if _, err := captureStdout(t, func() error { return run("schema", "apply", "--root", root, required) }); exitCode(err) != 12 {
		t.Fatalf("a required property without a default: %v", err)
	}
	for _, bad := range []string{"rank=1", "Person.rank=one", "Person.nope=1"} {
		if _, err := captureStdout(t, func() error { return run("schema", "plan", "--root", root, "--default", bad, required) }); exitCode(err) != exitUsage {
			t.Errorf("--default %s: %v (exit %d)", bad, err, exitCode(err))
		}
	}
	out, err = captureStdout(t, func() error { return run("schema", "plan", "--root", root, "--default", "Person.rank=7", required) })
	if err != nil || !strings.Contains(out, "add property 'Person.rank' (I32) on node 'Person'") {
		t.Fatalf("plan with a default: %v\n%s", err, out)
	}
	out, err = captureStdout(t, func() error { return run("schema", "apply", "--root", root, "--default", "Person.rank=7", required) })
	if err != nil || !strings.Contains(out, "applied: yes") {
		t.Fatalf("apply with a default: %v\n%s", err, out)
	}
}
