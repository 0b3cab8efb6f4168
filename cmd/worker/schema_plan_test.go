package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/pg/migrate"
)

// refTestSchema is the reference's test fixture (crates/omnigraph/tests/fixtures/test.pg).
const refTestSchema = `node Person {
    name: String @key
    age: I32?
}

node Company {
    name: String @key
}

edge Knows: Person -> Person {
    since: Date?
}

edge WorksAt: Person -> Company
`

func initRefGraph(t *testing.T, root string) {
	t.Helper()
	if _, err := captureStdout(t, func() error {
		return run("init", "--root", root, "--schema", writeTemp(t, "test.pg", refTestSchema))
	}); err != nil {
		t.Fatal(err)
	}
}

// rootState is every file under root with its size and modification time.
func rootState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprint(info.ModTime(), " ", info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// `worker schema plan` prints the reference's plan, as text or JSON, exits 0 when it is
// supported and 12 when not, and writes nothing.
func TestSchemaPlan(t *testing.T) {
	withEnv(t, nil)
	root := filepath.Join(t.TempDir(), "g")
	initRefGraph(t, root)
	before := rootState(t, root)
	add := writeTemp(t, "add.pg", strings.Replace(refTestSchema, "    age: I32?\n}", "    age: I32?\n    nickname: String?\n}", 1))
	widen := writeTemp(t, "widen.pg", strings.Replace(refTestSchema, "age: I32?", "age: I64?", 1))
	drop := writeTemp(t, "drop.pg", strings.Replace(refTestSchema, "    age: I32?\n", "", 1))

	out, err := captureStdout(t, func() error { return run("schema", "plan", "--root", root, add) })
	if err != nil || exitCode(err) != 0 || out != "schema plan for file://"+root+"\nsupported: yes\n- add property 'Person.nickname' (String?) on node 'Person'\n" {
		t.Errorf("add: %v\n%s", err, out)
	}

	// The reference CLI's assertions on --json (schema_plan_json_reports_supported_additive_change).
	out, err = captureStdout(t, func() error { return run("schema", "plan", "--root", root, "--json", add) })
	var doc map[string]any
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("add --json: %v\n%s", err, out)
	}
	step := doc["steps"].([]any)[0].(map[string]any)
	if doc["supported"] != true || doc["step_count"] != 1.0 || step["kind"] != "add_property" || step["type_kind"] != "node" ||
		step["type_name"] != "Person" || step["property_name"] != "nickname" || doc["uri"] != "file://"+root {
		t.Errorf("add --json: %s", out)
	}
	if p, err := migrate.ParsePlan([]byte(out)); err != nil || len(p.Steps) != 1 {
		t.Errorf("the --json output does not read back as a plan: %v", err)
	}

	// Unsupported: the plan is printed, the exit is 12, the error the typed refusal
	// (schema_plan_json_reports_unsupported_type_change).
	out, err = captureStdout(t, func() error { return run("schema", "plan", "--root", root, "--json", widen) })
	var ue *migrate.UnsupportedError
	if !errors.As(err, &ue) || exitCode(err) != 12 || ue.Code() != migrate.CodeTypeChange || ue.Step.Entity != "node:Person.age" {
		t.Errorf("widen: %v (exit %d)", err, exitCode(err))
	}
	if !strings.Contains(out, `"supported": false`) || !strings.Contains(out, `"kind": "unsupported_change"`) || !strings.Contains(out, `"entity": "node:Person.age"`) {
		t.Errorf("widen --json: %s", out)
	}
	out, _ = captureStdout(t, func() error { return run("schema", "plan", "--root", root, widen) })
	if !strings.Contains(out, "supported: no\n- unsupported change on node:Person.age [OG-MF-106, destructive]: changing property type") {
		t.Errorf("widen: %s", out)
	}

	// Drops are soft, and hard as --allow-data-loss would make them.
	for flag, mode := range map[string]string{"": "soft", "--allow-data-loss": "hard"} {
		args := []string{"plan", "--root", root, "--json", drop}
		if flag != "" {
			args = append(args, flag)
		}
		out, err = captureStdout(t, func() error { return run("schema", args...) })
		if err != nil || !strings.Contains(out, `"kind": "drop_property"`) || !strings.Contains(out, `"mode": "`+mode+`"`) {
			t.Errorf("drop %s: %v\n%s", flag, err, out)
		}
	}

	// No change.
	out, err = captureStdout(t, func() error { return run("schema", "plan", "--root", root, writeTemp(t, "same.pg", refTestSchema)) })
	if err != nil || !strings.HasSuffix(out, "supported: yes\nno schema changes\n") {
		t.Errorf("same: %v\n%s", err, out)
	}
	out, _ = captureStdout(t, func() error {
		return run("schema", "plan", "--root", root, "--json", writeTemp(t, "same.pg", refTestSchema))
	})
	if !strings.Contains(out, `"step_count": 0`) || !strings.Contains(out, `"steps": []`) {
		t.Errorf("same --json: %s", out)
	}

	// A desired schema that does not compile, or whose rename cannot resolve: invalid (3).
	for name, src := range map[string]string{
		"syntax.pg": "node Person {",
		"rename.pg": strings.Replace(refTestSchema, "age: I32?", "years: I32? @rename_from(\"nope\")", 1),
	} {
		_, err := captureStdout(t, func() error { return run("schema", "plan", "--root", root, writeTemp(t, name, src)) })
		if exitCode(err) != 3 || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v (exit %d)", name, err, exitCode(err))
		}
	}

	// Usage: no file, two files, no root, a root without a graph.
	for _, args := range [][]string{{"plan", "--root", root}, {"plan", "--root", root, add, add}, {"plan", add},
		{"plan", "--root", filepath.Join(t.TempDir(), "none"), add}, {"plan", "--root", t.TempDir(), add}} {
		_, err := captureStdout(t, func() error { return run("schema", args...) })
		if exitCode(err) != exitUsage {
			t.Errorf("%v: %v (exit %d)", args, err, exitCode(err))
		}
	}

	if after := rootState(t, root); len(after) != len(before) {
		t.Errorf("schema plan changed the root: %d files, was %d", len(after), len(before))
	} else {
		for p, s := range before {
			if after[p] != s {
				t.Errorf("schema plan touched %s", p)
			}
		}
	}

	// A root whose _schema.pg drifted from its accepted schema is refused
	// (plan_schema_rejects_when_schema_contract_has_drifted).
	if err := os.WriteFile(filepath.Join(root, "_schema.pg"), []byte(strings.Replace(refTestSchema, "age: I32?", "age: I64?", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = captureStdout(t, func() error { return run("schema", "plan", "--root", root, add) })
	if err == nil || !strings.Contains(err.Error(), "current _schema.pg no longer matches the accepted compiled schema") {
		t.Errorf("drifted: %v", err)
	}
}

// --graph plans against the root `worker run` serves the graph from: <root>/<graph> in a
// fleet (graphs), the root itself otherwise.
func TestSchemaPlanGraph(t *testing.T) {
	parent := t.TempDir()
	withEnv(t, nil)
	initRefGraph(t, filepath.Join(parent, "orders"))
	add := writeTemp(t, "add.pg", strings.Replace(refTestSchema, "    age: I32?\n}", "    age: I32?\n    nickname: String?\n}", 1))

	withEnv(t, map[string]string{"OMNIGRAPH_ROOT": parent, "OMNIGRAPH_GRAPHS": "orders,billing"})
	out, err := captureStdout(t, func() error { return run("schema", "plan", "--graph", "orders", add) })
	if err != nil || !strings.Contains(out, "schema plan for file://"+filepath.Join(parent, "orders")+"\n") {
		t.Errorf("fleet graph: %v\n%s", err, out)
	}
	_, err = captureStdout(t, func() error { return run("schema", "plan", "--graph", "shipping", add) })
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "shipping") {
		t.Errorf("a graph the fleet does not serve: %v", err)
	}

	cfg := writeTemp(t, "w.yaml", "root: "+filepath.Join(parent, "orders")+"\n")
	withEnv(t, nil)
	out, err = captureStdout(t, func() error { return run("schema", "plan", "--config", cfg, "--graph", "orders", add) })
	if err != nil || !strings.Contains(out, "supported: yes") {
		t.Errorf("single graph: %v\n%s", err, out)
	}
	_, err = captureStdout(t, func() error { return run("schema", "plan", "--graph", "orders", add) })
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--root") {
		t.Errorf("no root: %v", err)
	}
}

// The help shows examples and the exit codes.
func TestSchemaPlanHelp(t *testing.T) {
	out, err := captureStdout(t, func() error { return run("schema", "plan", "-h") })
	if err != nil || !strings.Contains(out, "Examples:") || !strings.Contains(out, "worker schema plan --root /data/g next.pg") ||
		!strings.Contains(out, "12 (schema_unsupported)") || !strings.Contains(out, "--allow-data-loss") {
		t.Errorf("%v\n%s", err, out)
	}
}
