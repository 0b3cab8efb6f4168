// Package graphtest is what tests of several packages share to set up graphs: the bundled
// schemas of graph/pg/testdata, found from any package directory, and fresh local roots.
package graphtest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// schemaDir is graph/pg/testdata, located from this file so that a test in any package
// (at any depth) names a schema the same way.
var schemaDir = func() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "graph", "pg", "testdata")
}()

// Example is the schema `make run` and most tests use.
const Example = "example.pg"

// SchemaPath is the absolute path of a bundled schema (example.pg, crm.pg, docs.pg,
// telemetry.pg), for tests that pass it to the worker binary.
func SchemaPath(name string) string { return filepath.Join(schemaDir, name) }

// Schema is the source of a bundled schema.
func Schema(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(SchemaPath(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Root opens a fresh local graph root in a directory removed after the test, returning the
// store and its directory. The store is closed when the test ends.
func Root(t testing.TB) (storage.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dir
}
