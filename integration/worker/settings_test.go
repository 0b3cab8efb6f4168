package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Read-only commands on a missing local root fail (exit 2: the --root given is wrong) with
// "no graph at …" and create nothing; a mistyped cloud URI is no local path but a root
// refused as such.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"export", "--root", "./nope"},
		{"commits", "--root", "./s3:nope"},
		{"branch", "list", "--root", "./nope"},
		{"recover", "--list", "--root", "./nope"},
	} {
		_, stderr, code := runWorkerIn(t, dir, nil, args...)
		if code != 2 || !strings.Contains(stderr, "no graph at "+dir) {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	_, stderr, code := runWorkerIn(t, dir, nil, "commits", "--root", "s3:/bucket/x")
	if code != 2 || !strings.Contains(stderr, `config root (from --root): "s3:/bucket/x": malformed s3 URI`) {
		t.Errorf("commits --root s3:/bucket/x: exit %d, stderr %q", code, stderr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("read-only commands created %v", ents)
	}
}

// `run` on an empty root without a schema says to pass --schema.
func TestRunWithoutSchemaSaysSo(t *testing.T) {
	root := filepath.Join(t.TempDir(), "g")
	_, stderr, code := runWorkerIn(t, t.TempDir(), nil, "run", "--root", root, "--graph", "demo", "--http", "")
	if code != 2 || !strings.Contains(stderr, "no graph at") || !strings.Contains(stderr, "pass --schema") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("the refused run left %s behind", root)
	}
}

// Bad NATS settings are refused at load, naming their source, before the graph is initialised.
func TestRunRefusesBadNATSSettings(t *testing.T) {
	schema, err := filepath.Abs("../../graph/pg/testdata/example.pg")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--nats-url", "htp://127.0.0.1:4222"}, `config nats_url (from --nats-url): "htp://127.0.0.1:4222"`},
		{[]string{"NATS_URL=localhost:4222"}, nil, "config nats_url (from NATS_URL)"},
		{[]string{"OMNIGRAPH_NATS_PORT=99999"}, nil, "config nats_port (from OMNIGRAPH_NATS_PORT): must be a port"},
	} {
		root := filepath.Join(t.TempDir(), "g")
		args := append([]string{"run", "--root", root, "--graph", "demo", "--schema", schema, "--http", ""}, c.args...)
		_, stderr, code := runWorkerIn(t, t.TempDir(), c.env, args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v %v: exit %d, stderr %q", c.env, c.args, code, stderr)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("%v %v: the root was made before the refusal", c.env, c.args)
		}
	}
}

// `publish` finds its server through NATS_URL and says when the graph has no stream.
func TestPublishHonoursNATSURL(t *testing.T) {
	ns := startNATS(t)
	dir := t.TempDir()
	body := filepath.Join(dir, "b.ndjson")
	_ = os.WriteFile(body, []byte(`{"type":"Person","data":{"handle":"a","name":"A","active":true}}`+"\n"), 0o644)
	_, stderr, code := runWorkerIn(t, dir, []string{"NATS_URL=" + ns.url, "OMNIGRAPH_NATS_URL="}, "publish", "--graph", "demo", body)
	if code != 2 || !strings.Contains(stderr, "no stream for graph demo: is its worker running? (subject omnigraph.demo.ingest)") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
