package errs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// routedByOthers are the error types of the storage, Lance, recovery, publisher and engine
// layers that declare no kind of their own, each with why it needs none: what the router
// (ingest, the CLI's exit codes) sees is another error, or the type's cause.
var routedByOthers = map[string]string{
	"lance.BranchError":         "engine and recovery map it to the catalogue's branch errors (branch_missing, …) before it leaves them",
	"lance/file.CopyError":      "compaction's page copy falls back to decoding the group; it never leaves the lance package",
	"publisher.CheckpointError": "a checkpoint that cannot be used is read around: the publisher folds the rows instead",
	"recovery.FenceError":       "a step refused by the fence: routed by its cause (the lease lost), which it wraps",
	"engine.InitError":          "only `worker init` returns it, before any graph exists to serve",
	"storage.NoGraphError":      "a root without a graph, met by the CLI before serving; it wraps storage.ErrNotFound",
	"storage.SyncError":         "the process's, not the batch's or the graph's: storage.Classify calls it transient, so the worker stalls on it (and /healthz fails) until a restart",
	"storage.URIError":          "a root setting refused before anything is opened: the CLI's usage error (exit 2), never met by the router",
}

// Every exported error type of the layers under the router either declares its kind
// (ErrorKind, for the catalogue) or is listed above with the reason it needs none: an error
// type added without either fails here, before it can reach the router as "unknown" and get a
// good batch dead-lettered as retry_exhausted.
func TestEveryErrorTypeHasAKind(t *testing.T) {
	root := filepath.Join("..", "..")
	var missing, seen []string
	for _, pkg := range []string{"storage", "lance", "lance/file", "lance/schema", "recovery", "publisher", "engine"} {
		types, kinds := errorTypes(t, filepath.Join(root, pkg))
		for _, ty := range types {
			name := pkg + "." + ty
			seen = append(seen, name)
			_, listed := routedByOthers[name]
			switch {
			case kinds[ty] && listed:
				t.Errorf("%s declares a kind: take it off the list of types routed by others", name)
			case !kinds[ty] && !listed:
				missing = append(missing, name)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("error types without a kind (give them ErrorKind, or list them with why they need none): %s", strings.Join(missing, ", "))
	}
	for name := range routedByOthers {
		if !strings.Contains(strings.Join(seen, " ")+" ", name+" ") {
			t.Errorf("%s is listed but no longer declared", name)
		}
	}
	if len(seen) < 15 {
		t.Fatalf("found only %d error types: %v", len(seen), seen)
	}
}

// errorTypes parses a package's non-test files: its exported struct types named *Error, and
// which of them have an ErrorKind method.
func errorTypes(t *testing.T, dir string) (types []string, kinds map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	kinds = map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || ts.Assign != 0 || !ts.Name.IsExported() || !strings.HasSuffix(ts.Name.Name, "Error") {
						continue
					}
					if _, ok := ts.Type.(*ast.StructType); ok {
						types = append(types, ts.Name.Name)
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || d.Name.Name != "ErrorKind" || len(d.Recv.List) != 1 {
					continue
				}
				rt := d.Recv.List[0].Type
				if st, ok := rt.(*ast.StarExpr); ok {
					rt = st.X
				}
				if id, ok := rt.(*ast.Ident); ok {
					kinds[id.Name] = true
				}
			}
		}
	}
	return types, kinds
}

// Missing stored state is damage an operator mends, never a reason to dead-letter the batch
// that met it; a commit another writer won is planned again.
func TestMissingStateIsCorrupt(t *testing.T) {
	cases := []struct {
		err  error
		kind string
	}{
		{&lance.VersionNotFoundError{Dataset: "nodes/x", Version: 6}, errs.KindCorrupt},
		{&storage.OpError{Op: "get", Key: "data/x.lance", Err: storage.ErrNotFound}, errs.KindCorrupt},
		{&storage.OpError{Op: "get_range", Key: "data/x.lance", Err: fmt.Errorf("%w: gone", storage.ErrNotFound)}, errs.KindCorrupt},
		{&storage.OpError{Op: "put_if_absent", Key: "_versions/1.manifest", Err: storage.ErrAlreadyExists}, errs.KindUnknown},
		{&storage.OpError{Op: "get", Key: "data/x.lance", Err: syscall.EIO}, errs.KindUnknown},
		{&lance.CommitConflictError{Dataset: "nodes/x", ReadVersion: 3, Version: 4}, errs.KindReadSetChanged},
		{&lance.RewriteConflictError{Dataset: "nodes/x", ReadVersion: 3, Version: 5}, errs.KindReadSetChanged},
	}
	for _, c := range cases {
		err := fmt.Errorf("load: %w", c.err)
		if got := errs.Kind(err); got != c.kind {
			t.Errorf("%v: kind %q, want %q", c.err, got, c.kind)
		}
		if errs.Permanent(err) {
			t.Errorf("%v: permanent (it would be dead-lettered)", c.err)
		}
	}
}
