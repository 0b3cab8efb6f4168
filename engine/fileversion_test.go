package engine

import (
	"errors"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// TestInitFileVersion: every table of a new graph, __manifest included, declares the version
// Init was given (DefaultFileVersion when none); a version this build cannot write is refused
// before anything is written, claim included, and so is one it cannot read (a graph reads its
// own tables).
func TestInitFileVersion(t *testing.T) {
	for _, v := range []file.Version{{}, file.V2_0, file.V2_1, file.V2_2, {Major: 2, Minor: 3}} {
		root, err := storage.Open(t.Context(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		g, err := Init(t.Context(), root, graphtest.Schema(t, graphtest.Example), InitOptions{FileVersion: v})
		want := v
		if want.IsZero() {
			want = DefaultFileVersion
		}
		if !file.Writable(want) || !file.Readable(want) {
			var ie *InitError
			if !errors.As(err, &ie) {
				t.Fatalf("%s: got %v, want *InitError", want, err)
			}
			if objs, _ := root.List(t.Context(), ""); len(objs) != 0 {
				t.Fatalf("%s: refused init left %d files", want, len(objs))
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		st, err := g.Snapshot(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		paths := []string{publisher.Dir}
		for _, e := range st.Tables() {
			paths = append(paths, e.Path)
		}
		for _, p := range paths {
			ds, err := lance.Open(t.Context(), root.Sub(p))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := ds.FileVersion(); got != want {
				t.Fatalf("%s declares %s, want %s", p, got, want)
			}
		}
		if got, err := publisher.FileVersion(t.Context(), root); err != nil || got != want {
			t.Fatalf("publisher.FileVersion %s %v", got, err)
		}
	}
}
