package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

// withEnv makes the commands see environ as their whole environment for the test.
func withEnv(t *testing.T, environ map[string]string) {
	t.Helper()
	old := getenv
	getenv = func(k string) string { return environ[k] }
	t.Cleanup(func() { getenv = old })
}

// captureStdout runs f with the process's standard output going to a file, and returns it.
func captureStdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	old := os.Stdout
	os.Stdout = out
	ferr := f()
	os.Stdout = old
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b), ferr
}

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs `worker name args...` as main does, without exiting.
func run(name string, args ...string) error {
	return execute(context.Background(), append([]string{name}, args...))
}

// Every command that talks to NATS takes the NATS settings by the same names from the same
// three sources: here a CA file that does not exist, which the connection refuses before it
// dials, so the error shows that the setting reached it.
func TestNATSCommandsTakeTheSameSettings(t *testing.T) {
	batch := writeTemp(t, "b.ndjson", `{"type":"Person","data":{"handle":"a","name":"A","active":true}}`+"\n")
	ca := filepath.Join(t.TempDir(), "missing-ca.pem")
	yaml := writeTemp(t, "w.yaml", "graph: demo\nnats_ca: "+ca+"\n")
	// The command, its words before the settings' flags, and its own arguments after them
	// (the Go flag parser stops at the first argument).
	commands := []struct {
		name      string
		pre, post []string
	}{
		{"publish", nil, []string{batch}},
		{"dlq", []string{"list"}, nil},
		{"dlq", []string{"show"}, []string{"1"}},
		{"dlq", []string{"replay"}, nil},
		{"merge", nil, []string{"--source", "s"}},
		{"optimize", nil, nil},
		{"cleanup", nil, []string{"--keep", "1"}},
	}
	sources := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flags", []string{"--graph", "demo", "--nats-ca", ca}, nil},
		{"environment", nil, map[string]string{"OMNIGRAPH_GRAPH": "demo", "OMNIGRAPH_NATS_CA": ca}},
		{"config flag", []string{"--config", yaml}, nil},
		{"config variable", nil, map[string]string{"OMNIGRAPH_CONFIG": yaml}},
	}
	for _, cmd := range commands {
		for _, src := range sources {
			withEnv(t, src.env)
			args := append(append(append([]string{}, cmd.pre...), src.args...), cmd.post...)
			err := run(cmd.name, args...)
			if err == nil || !strings.Contains(err.Error(), "rootCA") || !strings.Contains(err.Error(), "missing-ca.pem") {
				t.Errorf("%s %v from %s: %v, want the CA file refused", cmd.name, args, src.name, err)
			}
		}
	}
}

// `dlq` reads the dead-letter stream the config names (dlq_stream), not the default name.
func TestDLQReadsTheConfiguredStream(t *testing.T) {
	ns, err := ingest.StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CUSTOM_DLQ", Subjects: []string{"omnigraph.demo.dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("omnigraph.demo.dlq.invalid")
	m.Data = []byte(`{"type":"Nope","data":{}}`)
	m.Header.Set(ingest.HeaderErrorKind, "invalid")
	m.Header.Set(ingest.HeaderError, "unknown node type 'Nope'")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	yaml := writeTemp(t, "w.yaml", "graph: demo\nnats_url: "+ns.ClientURL()+"\ndlq_stream: CUSTOM_DLQ\n")
	withEnv(t, nil)
	out, err := captureStdout(t, func() error { return run("dlq", "list", "--config", yaml, "--json") })
	if err != nil || !strings.Contains(out, `"reason": "invalid"`) || !strings.Contains(out, "unknown node type") {
		t.Fatalf("dlq list: %v\n%s", err, out)
	}
	withEnv(t, map[string]string{"OMNIGRAPH_DLQ_STREAM": "CUSTOM_DLQ", "OMNIGRAPH_NATS_URL": ns.ClientURL()})
	if _, err := captureStdout(t, func() error { return run("dlq", "list", "--graph", "demo") }); err != nil {
		t.Fatalf("dlq list with the stream from the environment: %v", err)
	}
	withEnv(t, nil)
	_, err = captureStdout(t, func() error { return run("dlq", "list", "--graph", "demo", "--nats-url", ns.ClientURL()) })
	if err == nil || !strings.Contains(err.Error(), "OMNIGRAPH_DEMO_DLQ") {
		t.Fatalf("dlq list without dlq_stream: %v, want the default stream missing", err)
	}
}

// initGraph makes a graph root for the direct commands.
func initGraph(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "g")
	withEnv(t, nil)
	if _, err := captureStdout(t, func() error {
		return run("init", "--root", root, "--schema", "../../graph/pg/testdata/example.pg")
	}); err != nil {
		t.Fatal(err)
	}
	return root
}

// Every command that opens a graph root takes local_fsync from config (OMNIGRAPH_LOCAL_FSYNC
// is its variable, no longer storage's own), and a bad value is refused as a usage error
// naming the setting and where it came from.
func TestRootCommandsTakeLocalFsync(t *testing.T) {
	root := initGraph(t)
	batch := writeTemp(t, "b.ndjson", `{"type":"Person","data":{"handle":"a","name":"A","active":true}}`+"\n")
	commands := [][]string{
		{"init", "--root", filepath.Join(t.TempDir(), "new"), "--schema", "../../graph/pg/testdata/example.pg"},
		{"load", "--root", root, batch},
		{"export", "--root", root},
		{"commits", "--root", root},
		{"branch", "list", "--root", root},
		{"recover", "--root", root},
		{"merge", "--root", root, "--source", "s"},
		{"optimize", "--root", root},
		{"cleanup", "--root", root, "--keep", "1"},
	}
	for _, cmd := range commands {
		withEnv(t, map[string]string{"OMNIGRAPH_LOCAL_FSYNC": "maybe"})
		_, err := captureStdout(t, func() error { return run(cmd[0], cmd[1:]...) })
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Setting != "local_fsync" || ce.Source != "OMNIGRAPH_LOCAL_FSYNC" || exitCode(err) != exitUsage {
			t.Errorf("%s: %v (exit %d), want local_fsync refused", strings.Join(cmd, " "), err, exitCode(err))
		}
	}
	withEnv(t, map[string]string{"OMNIGRAPH_LOCAL_FSYNC": "0"})
	if _, err := captureStdout(t, func() error { return run("load", "--root", root, "--local-fsync=off", batch) }); err != nil {
		t.Fatalf("load without fsync: %v", err)
	}
	out, err := captureStdout(t, func() error { return run("export", "--root", root) })
	if err != nil || !strings.Contains(out, `"handle":"a"`) {
		t.Fatalf("export: %v\n%s", err, out)
	}
}

// merge, optimize and cleanup work on --root directly or publish a request for --graph:
// both on the command line, or neither anywhere, is a usage error; a graph that only the
// environment names gives way to --root.
func TestRequestTargets(t *testing.T) {
	root := initGraph(t)
	for _, c := range []struct {
		args []string
		env  map[string]string
		ok   bool
	}{
		{[]string{"--root", root, "--graph", "demo"}, nil, false},
		{nil, nil, false},
		{[]string{"--root", root}, map[string]string{"OMNIGRAPH_GRAPH": "demo"}, true},
	} {
		withEnv(t, c.env)
		out, err := captureStdout(t, func() error { return run("optimize", c.args...) })
		var ue *usageError
		if c.ok && (err != nil || !strings.Contains(out, `"tables"`)) || !c.ok && !errors.As(err, &ue) {
			t.Errorf("optimize %v %v: %v\n%s", c.args, c.env, err, out)
		}
	}
}
