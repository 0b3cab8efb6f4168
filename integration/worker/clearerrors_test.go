package worker

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every command that talks to a graph's streams, through the binary: one message and exit 2
// for a graph that has none, and nothing on standard output.
func TestCLIUnknownGraph(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "") // graph demo exists; dmeo does not
	waitStream(t, ns.url)
	batch := filepath.Join(t.TempDir(), "b.ndjson")
	if err := os.WriteFile(batch, []byte(`{"type":"Person","data":{"handle":"a","name":"A","active":true}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const dlq = "no stream for graph dmeo: is its worker running? (stream OMNIGRAPH_DMEO_DLQ)"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"publish", batch}, "(subject omnigraph.dmeo.ingest)"},
		{[]string{"merge", "--source", "s"}, "(subject omnigraph.dmeo.merge)"},
		{[]string{"optimize"}, "(subject omnigraph.dmeo.maintenance)"},
		{[]string{"cleanup", "--keep", "3", "--confirm"}, "(subject omnigraph.dmeo.maintenance)"},
		{[]string{"dlq", "list"}, dlq},
		{[]string{"dlq", "show", "1"}, dlq},
		{[]string{"dlq", "replay"}, dlq},
		{[]string{"dlq", "delete", "1", "--confirm"}, dlq},
	} {
		out, errOut, code := runWorker(t, append(c.args, "--graph", "dmeo", "--nats-url", ns.url)...)
		if code != 2 || errOut != "error: no stream for graph dmeo: is its worker running? "+c.want[strings.Index(c.want, "("):]+"\n" || out != "" {
			t.Errorf("%v: exit %d, want 2 saying %q\n%s%s", c.args, code, c.want, out, errOut)
		}
	}
	w.terminate(t)
}

// `worker run` with its embedded NATS server's port, or its HTTP address, taken: it fails at
// once (not after the server's 15 s wait), names the port and the setting, exits 2, and makes
// neither the graph root nor the NATS store it would have made.
func TestCLIRunBusyPort(t *testing.T) {
	schema, err := filepath.Abs("../../graph/pg/testdata/example.pg")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-port", fmt.Sprint(busy), "--http", ""}, fmt.Sprintf("the embedded NATS server's port 127.0.0.1:%d (nats_port) is in use", busy)},
		{[]string{"--nats-port", "-1", "--http", ln.Addr().String()}, fmt.Sprintf("the HTTP address %s (http) is in use", ln.Addr())},
		{[]string{"--nats-port", "0", "--http", ""}, "config nats_port (from --nats-port): must be a port from 1 to 65535, or -1"},
		{[]string{"--nats-port", "-1", "--http", "localhost"}, `config http (from --http): "localhost": want host:port`},
	} {
		dir := t.TempDir()
		root := filepath.Join(dir, "g")
		start := time.Now()
		_, errOut, code := runWorkerIn(t, dir, nil, append([]string{"run", "--root", root, "--graph", "demo", "--schema", schema}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("run %v: exit %d, want 2 saying %q\n%s", c.args, code, c.want, errOut)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("run %v took %v to fail", c.args, d)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("run %v left %v behind", c.args, ents)
		}
	}
}

// init with a schema that does not compile names the file it was given and leaves no root;
// a root that is no root (a mistyped or unknown scheme) is refused and made nowhere.
func TestCLIInitRefusals(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.pg"), []byte("node Person {\n  handle: String @key\n  bogus bogus\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	schema, err := filepath.Abs("../../graph/pg/testdata/example.pg")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--root", "g", "--schema", "bad.pg"}, 1, "error: bad.pg:3:9: expected ':'"},
		{[]string{"--root", "g", "--schema", "nope.pg"}, 1, "error: schema: open nope.pg: no such file or directory"},
		{[]string{"--root", "s3:/bucket/x", "--schema", schema}, 2, `error: config root (from --root): "s3:/bucket/x": malformed s3 URI: want s3://bucket`},
		{[]string{"--root", "s3:x", "--schema", schema}, 2, "malformed s3 URI"},
		{[]string{"--root", "s3://", "--schema", schema}, 2, "missing bucket name"},
		{[]string{"--root", "foo://x", "--schema", schema}, 2, `unsupported scheme "foo"`},
	} {
		_, errOut, code := runWorkerIn(t, dir, nil, append([]string{"init"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "schema.pg") {
			t.Errorf("init %v: exit %d, want %d saying %q\n%s", c.args, code, c.code, c.want, errOut)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("refused inits left %v behind", ents)
	}
	// Run initialising a root from a bad schema: the same, and no root or NATS store left.
	_, errOut, code := runWorkerIn(t, dir, nil, "run", "--root", "g", "--graph", "demo", "--schema", "bad.pg", "--nats-port", "-1", "--http", "")
	if code != 1 || !strings.Contains(errOut, "bad.pg:3:9") {
		t.Fatalf("run --schema bad.pg: exit %d\n%s", code, errOut)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("a refused run left %v behind", ents)
	}
}

// A misspelt subcommand is named, with a suggestion, whatever flags follow it; exit 2.
func TestCLIUnknownSubcommand(t *testing.T) {
	for _, args := range [][]string{{"dlq", "lst", "--graph", "x"}, {"dlq", "--graph", "x", "lst"}} {
		_, errOut, code := runWorker(t, args...)
		if code != 2 || errOut != "error: unknown command \"lst\" for \"worker dlq\"; did you mean list?\n" {
			t.Errorf("%v: exit %d\n%s", args, code, errOut)
		}
	}
	_, errOut, code := runWorker(t, "branch", "lsit", "--root", "/r")
	if code != 2 || !strings.Contains(errOut, `unknown command "lsit" for "worker branch"; did you mean list?`) {
		t.Errorf("branch lsit: exit %d\n%s", code, errOut)
	}
}

// A command's own flag is named in an error as the user set it: the flag, the variable, the
// config file's key with the file and line.
func TestCLIErrorsNameTheSettingsSource(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "b.ndjson")
	yaml := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(body, []byte(`{"type":"Person","data":{"handle":"a","name":"A","active":true}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(yaml, []byte("graph: demo\npublish:\n  mode: apend\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--graph", "demo", "--mode", "apend"}, `field "--mode": unknown load mode "apend"`},
		{[]string{"OMNIGRAPH_PUBLISH_MODE=apend"}, []string{"--graph", "demo"}, `field "OMNIGRAPH_PUBLISH_MODE": unknown load mode "apend"`},
		{nil, []string{"--config", yaml}, `field "publish.mode (` + yaml + ` line 3)": unknown load mode "apend"`},
		{[]string{"OMNIGRAPH_CONFIG=" + yaml}, nil, `field "publish.mode (` + yaml + ` line 3)": unknown load mode "apend"`},
	} {
		_, errOut, code := runWorkerIn(t, dir, c.env, append(append([]string{"publish"}, c.args...), body)...)
		if code != 3 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v publish %v: exit %d, want 3 saying %q\n%s", c.env, c.args, code, c.want, errOut)
		}
	}
}

// A run that made its graph root and then cannot connect to NATS (here a credentials file that
// is not there) removes the root it made, and only it.
func TestCLIRunRemovesWhatItMadeOnFailure(t *testing.T) {
	ns := startNATS(t)
	schema, err := filepath.Abs("../../graph/pg/testdata/example.pg")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(dir, "g"), existing} {
		_, errOut, code := runWorkerIn(t, dir, nil, "run", "--root", root, "--graph", "demo", "--schema", schema, "--http", "",
			"--nats-url", ns.url, "--nats-creds", filepath.Join(dir, "missing.creds"))
		if code == 0 || !strings.Contains(errOut, "missing.creds") {
			t.Fatalf("run with missing credentials: exit %d\n%s", code, errOut)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "existing" {
		t.Fatalf("left behind: %v, want only the root that was there before", ents)
	}
}
