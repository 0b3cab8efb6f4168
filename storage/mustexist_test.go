package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// MustExist refuses a missing local root with *NoGraphError and creates nothing, for a plain
// path, a relative one and a file:// URI; an existing directory opens. (A mistyped cloud URI,
// "s3:/bucket/x", is no local path: TestStrictURIs.)
func TestMustExistCreatesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(dir)
	for _, uri := range []string{filepath.Join(dir, "nope"), "file://" + filepath.Join(dir, "nope2"), "rel/nope", "./s3:nope"} {
		_, err := Open(ctx, uri, MustExist())
		var ng *NoGraphError
		if !errors.As(err, &ng) || !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: err %v, want a NoGraphError", uri, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("MustExist created %v", ents)
	}
	file := filepath.Join(dir, "file")
	_ = os.WriteFile(file, nil, 0o644)
	if _, err := Open(ctx, file, MustExist()); !errors.As(err, new(*NoGraphError)) {
		t.Errorf("a file as root: %v", err)
	}
	st, err := Open(ctx, dir, MustExist())
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	// Without it, a missing root is created, as before.
	st, err = Open(ctx, filepath.Join(dir, "made"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := os.Stat(filepath.Join(dir, "made")); err != nil {
		t.Fatal(err)
	}
}
