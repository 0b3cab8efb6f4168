package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Every command that talks to a graph's streams says the same thing, with the same exit code
// (2: the --graph given is wrong, or its worker never ran here), for a graph that has none.
func TestUnknownGraphEveryCommand(t *testing.T) {
	ns, err := ingest.StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	batch := writeTemp(t, "b.ndjson", `{"type":"Person","data":{"handle":"a","name":"A","active":true}}`+"\n")
	const dlq = "no stream for graph dmeo: is its worker running? (stream OMNIGRAPH_DMEO_DLQ)"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"publish", batch}, "no stream for graph dmeo: is its worker running? (subject omnigraph.dmeo.ingest)"},
		{[]string{"merge", "--source", "s"}, "no stream for graph dmeo: is its worker running? (subject omnigraph.dmeo.merge)"},
		{[]string{"optimize"}, "no stream for graph dmeo: is its worker running? (subject omnigraph.dmeo.maintenance)"},
		{[]string{"cleanup", "--keep", "3"}, "no stream for graph dmeo: is its worker running? (subject omnigraph.dmeo.maintenance)"},
		{[]string{"dlq", "list"}, dlq},
		{[]string{"dlq", "show", "1"}, dlq},
		{[]string{"dlq", "replay"}, dlq},
		{[]string{"dlq", "replay", "--dry-run"}, dlq},
		{[]string{"dlq", "delete", "1"}, dlq},
		{[]string{"dlq", "delete", "--all", "--confirm"}, dlq},
	} {
		withEnv(t, nil)
		args := append(c.args, "--graph", "dmeo", "--nats-url", ns.ClientURL())
		out, err := captureStdout(t, func() error { return run(args[0], args[1:]...) })
		var nse *ingest.NoStreamError
		if !errors.As(err, &nse) || err.Error() != c.want || exitCode(err) != exitUsage || out != "" {
			t.Errorf("%v: %v (exit %d), want %q and exit 2, printing nothing\n%s", c.args, err, exitCode(err), c.want, out)
		}
	}
}

// A misspelt subcommand is named as such, with suggestions, even among the flags the meant
// subcommand takes; exit 2.
func TestUnknownSubcommands(t *testing.T) {
	withEnv(t, nil)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq", "lst", "--graph", "x"}, `unknown command "lst" for "worker dlq"; did you mean list?`},
		{[]string{"dlq", "--graph", "x", "lst"}, `unknown command "lst" for "worker dlq"; did you mean list?`},
		{[]string{"dlq", "delet", "3", "--confirm"}, `unknown command "delet" for "worker dlq"; did you mean delete?`},
		{[]string{"branch", "lsit", "--root", "/r", "--json"}, `unknown command "lsit" for "worker branch"; did you mean list?`},
		{[]string{"dlq", "--graph", "x"}, "dlq needs a subcommand: list, show, replay, delete"},
	} {
		err := execute(context.Background(), c.args)
		var ue *usageError
		if !errors.As(err, &ue) || err.Error() != c.want || exitCode(err) != exitUsage {
			t.Errorf("%v: %v (exit %d), want %q", c.args, err, exitCode(err), c.want)
		}
	}
	// Help on a group still works.
	if _, err := captureStdout(t, func() error { return execute(context.Background(), []string{"dlq", "--help"}) }); err != nil {
		t.Fatal(err)
	}
}

// An error about a command's own flag names it as the user set it: the flag, the variable, or
// the config file's key with its file and line.
func TestOwnFlagErrorsNameTheirSource(t *testing.T) {
	root := initGraph(t)
	modeFile := writeTemp(t, "w.yaml", "publish:\n  mode: apend\ndlq_replay:\n  seq: 9-3\ncleanup:\n  keep: 0\n  older_than: soon\noptimize:\n  fanout: 1\n")
	batch := writeTemp(t, "b.ndjson", `{"type":"Person","data":{"handle":"a","name":"A","active":true}}`+"\n")
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
		code int
	}{
		{nil, []string{"publish", "--graph", "g", "--mode", "apend", batch}, `field "--mode": unknown load mode "apend"`, 3},
		{map[string]string{"OMNIGRAPH_PUBLISH_MODE": "apend"}, []string{"publish", "--graph", "g", batch}, `field "OMNIGRAPH_PUBLISH_MODE": unknown load mode "apend"`, 3},
		{map[string]string{"OMNIGRAPH_CONFIG": modeFile}, []string{"publish", "--graph", "g", batch}, `field "publish.mode (` + modeFile + ` line 2)": unknown load mode "apend"`, 3},
		// The flag wins, and is the one named.
		{map[string]string{"OMNIGRAPH_CONFIG": modeFile}, []string{"publish", "--graph", "g", "--mode", "merg", batch}, `field "--mode": unknown load mode "merg"`, 3},
		{map[string]string{"OMNIGRAPH_LOAD_BRANCH": "a..b"}, []string{"load", "--root", root, batch}, "OMNIGRAPH_LOAD_BRANCH", 3},
		{map[string]string{"OMNIGRAPH_PUBLISH_FROM": "x/."}, []string{"publish", "--graph", "g", batch}, "OMNIGRAPH_PUBLISH_FROM", 3},
		{map[string]string{"OMNIGRAPH_PUBLISH_TIMEOUT": "-1s"}, []string{"publish", "--graph", "g", batch}, "publish OMNIGRAPH_PUBLISH_TIMEOUT must be positive", 2},
		{map[string]string{"OMNIGRAPH_CONFIG": modeFile}, []string{"dlq", "replay", "--graph", "g"}, "dlq_replay.seq (" + modeFile + " line 4) 9-3: the first sequence is after the last", 2},
		{map[string]string{"OMNIGRAPH_DLQ_REPLAY_FROM": "main"}, []string{"dlq", "replay", "--graph", "g"}, "OMNIGRAPH_DLQ_REPLAY_FROM forks the branch --branch names", 2},
		{map[string]string{"OMNIGRAPH_DLQ_LIST_REASON": "nope"}, []string{"dlq", "list", "--graph", "g"}, `OMNIGRAPH_DLQ_LIST_REASON "nope" is not a dead-letter reason`, 2},
		{map[string]string{"OMNIGRAPH_DLQ_DELETE_SEQ": "9-3"}, []string{"dlq", "delete", "--graph", "g"}, `OMNIGRAPH_DLQ_DELETE_SEQ "9-3": goes backwards`, 2},
		{map[string]string{"OMNIGRAPH_CONFIG": modeFile}, []string{"cleanup", "--root", root}, "cleanup needs cleanup.keep (" + modeFile + " line 6) N", 2},
		{map[string]string{"OMNIGRAPH_CONFIG": modeFile}, []string{"cleanup", "--root", root, "--keep", "2"}, "cleanup.older_than (" + modeFile + " line 7): ", 2},
		{map[string]string{"OMNIGRAPH_OPTIMIZE_FANOUT": "1"}, []string{"optimize", "--root", root}, "OMNIGRAPH_OPTIMIZE_FANOUT must be at least 2", 2},
		{map[string]string{"OMNIGRAPH_CONFIG": modeFile}, []string{"optimize", "--root", root}, "optimize.fanout (" + modeFile + " line 9) must be at least 2", 2},
		{map[string]string{"OMNIGRAPH_MERGE_WAIT_TIMEOUT": "0s"}, []string{"merge", "--graph", "g", "--source", "s"}, "OMNIGRAPH_MERGE_WAIT_TIMEOUT must be positive", 2},
	} {
		withEnv(t, c.env)
		_, err := captureStdout(t, func() error { return run(c.args[0], c.args[1:]...) })
		if err == nil || !strings.Contains(err.Error(), c.want) || exitCode(err) != c.code {
			t.Errorf("%v %v: %v (exit %d), want exit %d saying %q", c.env, c.args, err, exitCode(err), c.code, c.want)
		}
	}
}

// init names the schema file it was given in the schema's errors, refuses it before anything
// is made, and leaves no root behind; a root that is no root is refused as a setting; an
// existing directory is left as it was.
func TestInitBadSchema(t *testing.T) {
	dir := t.TempDir()
	bad := writeTemp(t, "bad.pg", "node Person {\n  handle: String @key\n  bogus bogus\n}\n")
	unknown := writeTemp(t, "unknown.pg", "node Person {\n  handle: Strng @key\n}\n")
	withEnv(t, nil)
	for _, c := range []struct {
		schema, want string
	}{
		{bad, bad + ":3:9: expected ':'"},
		{unknown, unknown + ":2:"},
		{filepath.Join(dir, "missing.pg"), "schema: open " + filepath.Join(dir, "missing.pg")},
	} {
		root := filepath.Join(dir, "g")
		_, err := captureStdout(t, func() error { return run("init", "--root", root, "--schema", c.schema) })
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), pg.DefaultFileName) {
			t.Errorf("init --schema %s: %v, want %q", c.schema, err, c.want)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("init --schema %s left the root behind", c.schema)
		}
	}
	// An existing (empty) root stays.
	root := filepath.Join(dir, "existing")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := captureStdout(t, func() error { return run("init", "--root", root, "--schema", bad) }); err == nil {
		t.Fatal("a bad schema was taken")
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatal("init removed a root it did not make")
	}
	// The schema's errors from the engine name the file too (a run initialising a root).
	var pe *pg.ParseError
	_, err := engine.Init(context.Background(), nil, "node {")
	if err = schemaFileError("mine.pg", err); !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "mine.pg:1:") {
		t.Fatalf("schemaFileError: %v", err)
	}
	// A root that is no root: a setting refused, naming its source, nothing made.
	t.Chdir(dir)
	for _, r := range []string{"s3:/bucket/x", "s3:x", "foo://x", "s3://"} {
		_, err := captureStdout(t, func() error { return run("init", "--root", r, "--schema", bad) })
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Setting != "root" || ce.Source != "--root" || exitCode(err) != exitUsage {
			t.Errorf("init --root %s: %v (exit %d)", r, err, exitCode(err))
		}
	}
	withEnv(t, map[string]string{"OMNIGRAPH_ROOT": "s3:/bucket/x"})
	err = run("commits")
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Source != "OMNIGRAPH_ROOT" || !strings.Contains(err.Error(), "malformed s3 URI") {
		t.Errorf("commits with OMNIGRAPH_ROOT=s3:/bucket/x: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "s3:")); !os.IsNotExist(err) {
		t.Fatal("a mistyped cloud root was made as a local directory")
	}
	// storage's own refusal, for a caller that did not go through config, exits 2 too.
	if exitCode(&storage.URIError{URI: "s3:x"}) != exitUsage {
		t.Error("URIError does not exit 2")
	}
}

// A busy or unusable port of `worker run` is found before anything is made, named with its
// setting; the directories a run makes are only those not there before.
func TestCheckPorts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		cfg  config.Config
		want string
	}{
		{config.Config{NATSPort: busy}, "the embedded NATS server's port 127.0.0.1:" + strconv.Itoa(busy) + " (nats_port) is in use"},
		{config.Config{NATSPort: -1, HTTP: ln.Addr().String()}, "the HTTP address " + ln.Addr().String() + " (http) is in use"},
		{config.Config{NATSPort: -1, HTTP: "192.0.2.1:9464"}, "the HTTP address 192.0.2.1:9464 (http) cannot be listened on"},
	} {
		err := checkPorts(&c.cfg)
		var le *listenError
		if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), c.want) || exitCode(err) != exitUsage {
			t.Errorf("%+v: %v (exit %d), want %q", c.cfg, err, exitCode(err), c.want)
		}
	}
	// A port a NATS server elsewhere serves is not the embedded one's.
	if err := checkPorts(&config.Config{NATSURL: "nats://127.0.0.1:4222", NATSPort: busy, HTTP: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	made := dirsToMake(&config.Config{Root: filepath.Join(dir, "g")}, dir)
	if len(made) != 1 || made[0] != filepath.Join(dir, "g") {
		t.Fatalf("dirsToMake: %v", made)
	}
	if err := os.Mkdir(made[0], 0o755); err != nil {
		t.Fatal(err)
	}
	made.remove()
	if _, err := os.Stat(made[0]); !os.IsNotExist(err) {
		t.Fatal("not removed")
	}
	if m := dirsToMake(&config.Config{Root: "s3://b/p"}, ""); len(m) != 0 {
		t.Fatalf("an object-store root is no directory to remove: %v", m)
	}
}

// The new exit codes: a graph without streams, a selection that names no dead letter by its
// form, and a port, are usage; a selection that names none that exists is not.
func TestClearErrorExitCodes(t *testing.T) {
	for err, want := range map[error]int{
		&ingest.NoStreamError{Graph: "g"}:                    exitUsage,
		&ingest.SelectionError{Reason: "x"}:                  exitUsage,
		&listenError{Setting: "http"}:                        exitUsage,
		&storage.URIError{}:                                  exitUsage,
		&ingest.NoDeadLetterError{Seqs: []ingest.SeqRange{}}: errs.ExitInternal,
	} {
		if got := exitCode(err); got != want {
			t.Errorf("%T: exit %d, want %d", err, got, want)
		}
	}
}
