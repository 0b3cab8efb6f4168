package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// `worker run --stream-replicas 3` against a single nats-server refuses at start, naming the
// setting, the stream and the server's answer, with the usage exit code.
func TestRunRefusesReplicasTheServerCannotPlace(t *testing.T) {
	ns, err := ingest.StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	withEnv(t, nil)
	root := filepath.Join(t.TempDir(), "graph")
	err = run("run", "--root", root, "--schema", graphtest.SchemaPath(graphtest.Example), "--graph", "demo",
		"--nats-url", ns.ClientURL(), "--http", "", "--stream-replicas", "3")
	var pe *ingest.PlacementError
	if !errors.As(err, &pe) || exitCode(err) != exitUsage {
		t.Fatalf("run with 3 replicas on one server: %v (exit %d), want a *PlacementError, exit %d", err, exitCode(err), exitUsage)
	}
	for _, want := range []string{"stream_replicas", "OMNIGRAPH_DEMO", "3 replicas", "replicas > 1 not supported in non-clustered mode"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}
