// Package graphtest is what tests of several packages share to set up graphs: the bundled
// schemas of graph/pg/testdata, found from any package directory, and fresh local roots.
package graphtest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

// EvolvedExample is the Example schema with one change of each kind a table feels: a new
// nullable property on Person (a rewrite), a renamed property on Company (a rewrite that
// keeps the values), a new node type Tag (a dataset created), the edge WorksAt renamed
// EmployedBy (manifest only), the edge Owns dropped (a tombstone) and a new @index on
// Contributes (contract only).
func EvolvedExample(t testing.TB) string {
	t.Helper()
	src := Schema(t, Example)
	for _, r := range [][2]string{
		{"    active: Bool\n", "    active: Bool\n    nickname: String?\n"},
		{"    revenue_usd: U64?\n", "    revenue: U64? @rename_from(\"revenue_usd\")\n"},
		{"edge Owns: Company -> Project @card(0..)\n", ""},
		{"edge WorksAt: Person -> Company @card(0..1) {", "edge EmployedBy: Person -> Company @card(0..1) @rename_from(\"WorksAt\") {"},
		{"    commits: U32?\n", "    commits: U32? @index\n"},
	} {
		if !strings.Contains(src, r[0]) {
			t.Fatalf("the example schema has no %q", r[0])
		}
		src = strings.Replace(src, r[0], r[1], 1)
	}
	return src + "\nnode Tag {\n    label: String @key\n}\n"
}
