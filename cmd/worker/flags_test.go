package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/config"
)

// The tools take --root (and init its schema and file version) from the same settings as
// `worker run`: a worker's environment or config file is enough to point them at its graph.
func TestToolsTakeRootFromSettings(t *testing.T) {
	root := filepath.Join(t.TempDir(), "g")
	withEnv(t, map[string]string{"OMNIGRAPH_ROOT": root, "OMNIGRAPH_SCHEMA": "../../graph/pg/testdata/example.pg", "OMNIGRAPH_LANCE_FILE_VERSION": "2.1"})
	if out, err := captureStdout(t, func() error { return run("init") }); err != nil || !strings.Contains(out, "initialised") {
		t.Fatalf("init from the environment: %v\n%s", err, out)
	}
	yaml := writeTemp(t, "w.yaml", "root: "+root+"\n")
	withEnv(t, map[string]string{"OMNIGRAPH_CONFIG": yaml})
	if out, err := captureStdout(t, func() error { return run("commits") }); err != nil || !strings.Contains(out, "COMMIT") {
		t.Fatalf("commits from the config file: %v\n%s", err, out)
	}
	// init without a schema anywhere says where one goes.
	withEnv(t, map[string]string{"OMNIGRAPH_ROOT": filepath.Join(t.TempDir(), "other")})
	err := run("init")
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Setting != "schema" || !strings.Contains(err.Error(), "OMNIGRAPH_SCHEMA") || exitCode(err) != exitUsage {
		t.Errorf("init without a schema: %v (exit %d)", err, exitCode(err))
	}
	withEnv(t, nil)
	if err := run("export"); err == nil || !strings.Contains(err.Error(), "OMNIGRAPH_ROOT") || exitCode(err) != exitUsage {
		t.Errorf("export without a root: %v (exit %d)", err, exitCode(err))
	}
}

// A command's own flags come from OMNIGRAPH_<COMMAND>_<FLAG> and the file's <command> section:
// the flag over the variable over the file, and one command's values never reach another.
func TestOwnFlagsFromEnvironmentAndFile(t *testing.T) {
	root := initGraph(t)
	batch := writeTemp(t, "b.ndjson", `{"type":"Person","data":{"handle":"a","name":"A","active":true}}`+"\n")
	yaml := writeTemp(t, "w.yaml", "root: "+root+"\nload:\n  branch: fromfile\n  from: main\n  msg_id: m1\nexport:\n  branch: fromfile\n")
	withEnv(t, map[string]string{"OMNIGRAPH_CONFIG": yaml, "OMNIGRAPH_LOAD_BRANCH": "fromenv"})
	if _, err := captureStdout(t, func() error { return run("load", batch) }); err != nil {
		t.Fatalf("load: %v", err)
	}
	// The variable won over the file: the batch is on fromenv (forked from main, as the file
	// said), and export read its own section's branch, not load's variable.
	for branch, want := range map[string]bool{"fromenv": true, "fromfile": false} {
		withEnv(t, map[string]string{"OMNIGRAPH_CONFIG": yaml, "OMNIGRAPH_EXPORT_BRANCH": branch})
		out, err := captureStdout(t, func() error { return run("export") })
		if want && (err != nil || !strings.Contains(out, `"handle":"a"`)) {
			t.Errorf("export of %s: %v\n%s", branch, err, out)
		}
		if !want && err == nil {
			t.Errorf("export of %s: the branch exists\n%s", branch, out)
		}
	}
	// The flag wins over both.
	withEnv(t, map[string]string{"OMNIGRAPH_CONFIG": yaml, "OMNIGRAPH_EXPORT_BRANCH": "nope"})
	if out, err := captureStdout(t, func() error { return run("export", "--branch", "fromenv") }); err != nil || !strings.Contains(out, `"handle":"a"`) {
		t.Errorf("export --branch: %v\n%s", err, out)
	}
	// The receipt key came from the file: the same batch is not applied twice.
	withEnv(t, map[string]string{"OMNIGRAPH_CONFIG": yaml, "OMNIGRAPH_LOAD_BRANCH": "fromenv"})
	if out, err := captureStdout(t, func() error { return run("load", batch) }); err != nil || !strings.Contains(out, `"already_applied": true`) {
		t.Errorf("second load with the file's msg_id: %v\n%s", err, out)
	}
}

// A bad value names the flag's section, the variable or the file line, and exits as usage; a
// misspelt section or flag in the file is refused by every command that reads the file.
func TestOwnFlagErrors(t *testing.T) {
	root := initGraph(t)
	withEnv(t, map[string]string{"OMNIGRAPH_ROOT": root, "OMNIGRAPH_CLEANUP_KEEP": "lots"})
	err := run("cleanup")
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Setting != "cleanup.keep" || ce.Source != "OMNIGRAPH_CLEANUP_KEEP" || exitCode(err) != exitUsage {
		t.Errorf("bad variable: %v (exit %d)", err, exitCode(err))
	}
	// A value of the wrong type is refused by its own command (export reads no cleanup value),
	// even one the command line overrides; a key no command takes, by every command.
	for text, want := range map[string]struct {
		setting, line string
		everyCommand  bool
	}{
		"cleanup:\n  keep: many\n":         {"cleanup.keep", "line 2", false},
		"cleanup:\n  kepe: 3\n":            {"cleanup.kepe", "line 2", true},
		"cleanupp:\n  keep: 3\n":           {"cleanupp", "line 1", true},
		"cleanup: 3\n":                     {"cleanup", "line 1", true},
		"cleanup:\n  keep: [1, 2]\n":       {"cleanup.keep", "line 2", true},
		"dlq_replay:\n  confirm: true\n":   {"dlq_replay.confirm", "line 2", true},
		"cleanup:\n  confirm: true\n":      {"cleanup.confirm", "line 2", true},
		"publish:\n  mode: append\nx: 1\n": {"x", "line 3", true},
		"root: /a\nroot: /b\n":             {"root", "line 2", true},
		"root: [/a]\n":                     {"root", "line 1", true},
		"load:\n  mode: a\n  mode: b\n":    {"load.mode", "line 3", true},
	} {
		withEnv(t, map[string]string{"OMNIGRAPH_ROOT": root, "OMNIGRAPH_CONFIG": writeTemp(t, "w.yaml", text)})
		for _, cmd := range [][]string{{"cleanup", "--keep", "1"}, {"export"}} {
			if cmd[0] == "export" && !want.everyCommand {
				continue
			}
			_, err := captureStdout(t, func() error { return run(cmd[0], cmd[1:]...) })
			if !errors.As(err, &ce) || ce.Setting != want.setting || !strings.HasSuffix(ce.Source, want.line) || exitCode(err) != exitUsage {
				t.Errorf("%q, %v: %v (exit %d), want %s at %s", text, cmd, err, exitCode(err), want.setting, want.line)
			}
		}
	}
}

// --confirm and --force are taken from the command line only: a variable left in a shell must
// not turn every later cleanup into a removal.
func TestConfirmIsCommandLineOnly(t *testing.T) {
	root := initGraph(t)
	withEnv(t, map[string]string{"OMNIGRAPH_ROOT": root, "OMNIGRAPH_CLEANUP_KEEP": "1", "OMNIGRAPH_CLEANUP_CONFIRM": "true", "OMNIGRAPH_CLEANUP_FORCE": "true"})
	out, err := captureStdout(t, func() error { return run("cleanup") })
	if err != nil || !strings.Contains(out, `"dry_run": true`) {
		t.Errorf("cleanup with OMNIGRAPH_CLEANUP_CONFIRM: %v\n%s", err, out)
	}
	if _, ok := commandSections()["cleanup"]; !ok {
		t.Fatal("no cleanup section")
	}
	for section, flags := range commandSections() {
		for _, f := range flags {
			if f == "confirm" || f == "force" {
				t.Errorf("%s takes %s from the environment", section, f)
			}
		}
	}
}

// No command's variable is also a setting's: OMNIGRAPH_DLQ_STREAM is a setting, so no command
// may be called dlq with a flag stream.
func TestCommandVariablesAreNotSettings(t *testing.T) {
	settings := map[string]bool{config.ConfigEnv: true}
	for _, s := range config.AllSettings() {
		settings[config.EnvName(s)] = true
	}
	n := 0
	for section, flags := range commandSections() {
		if settings[config.EnvName(section)] {
			t.Errorf("section %s is also a setting's name", section)
		}
		for _, f := range flags {
			n++
			if env := config.CommandEnv(section, f); settings[env] {
				t.Errorf("%s %s: %s is a setting's variable", section, f, env)
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d command flags found", n)
	}
}

// With both a root and a graph from the environment (a worker's own), merge, optimize and
// cleanup ask the worker; a flag picks the other way.
func TestRequestTargetFromSettings(t *testing.T) {
	root := initGraph(t)
	env := map[string]string{"OMNIGRAPH_ROOT": root, "OMNIGRAPH_GRAPH": "demo", "OMNIGRAPH_NATS_URL": "nats://127.0.0.1:1"}
	withEnv(t, env)
	// The request goes to NATS, which is not there.
	if _, err := captureStdout(t, func() error { return run("optimize") }); err == nil || !strings.Contains(err.Error(), "connect to NATS at nats://127.0.0.1:1") {
		t.Errorf("optimize with both from the environment: %v, want a request to NATS", err)
	}
	if out, err := captureStdout(t, func() error { return run("optimize", "--root", root) }); err != nil || !strings.Contains(out, `"tables"`) {
		t.Errorf("optimize --root: %v\n%s", err, out)
	}
	delete(env, "OMNIGRAPH_GRAPH")
	withEnv(t, env)
	if out, err := captureStdout(t, func() error { return run("optimize") }); err != nil || !strings.Contains(out, `"tables"`) {
		t.Errorf("optimize with a root only from the environment: %v\n%s", err, out)
	}
	if _, err := captureStdout(t, func() error { return run("optimize", "--graph", "demo") }); err == nil || !strings.Contains(err.Error(), "connect to NATS") {
		t.Errorf("optimize --graph: %v, want a request to NATS", err)
	}
}
