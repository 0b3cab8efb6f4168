package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// `worker run --graphs` refuses, with exit 2 and before it connects to anything, graph and
// graphs together and a fleet whose graph roots hold no graph while no schema is given,
// naming every such root.
func TestRunFleetRefusals(t *testing.T) {
	withEnv(t, nil)
	root := t.TempDir()
	err := run("run", "--root", root, "--graph", "a", "--graphs", "b,c", "--http", "")
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Setting != "graphs" || exitCode(err) != exitUsage {
		t.Fatalf("graph and graphs: %v (exit %d)", err, exitCode(err))
	}
	// An unreachable NATS: the refusal must come first.
	err = run("run", "--root", root, "--graphs", "b,c", "--http", "", "--nats-url", "nats://127.0.0.1:1")
	var ng *storage.NoGraphError
	if !errors.As(err, &ng) || exitCode(err) != exitUsage ||
		!strings.Contains(err.Error(), filepath.Join(root, "b")) || !strings.Contains(err.Error(), filepath.Join(root, "c")) {
		t.Fatalf("roots without a graph: %v (exit %d)", err, exitCode(err))
	}
}
