package storage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/omnigraph/omnigraph-worker/storage"
	"github.com/omnigraph/omnigraph-worker/storage/storagetest"
)

func openT(t *testing.T, uri string) storage.Store {
	t.Helper()
	s, err := storage.Open(t.Context(), uri)
	if err != nil {
		t.Fatalf("Open(%q): %v", uri, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestFileSuite(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		dir := filepath.Join(t.TempDir(), "root") // does not exist yet: Open creates it
		s := openT(t, "file://"+filepath.ToSlash(dir))
		t.Cleanup(func() { storagetest.AssertNoTempFiles(t, dir) })
		return s
	})
}

// With spare files (KeepSpares) every write goes through a file created ahead of it.
func TestFileSuiteWithSpares(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		dir := filepath.Join(t.TempDir(), "root")
		s := openT(t, "file://"+filepath.ToSlash(dir))
		if !storage.KeepSpares(s) {
			t.Fatal("KeepSpares refused a local root")
		}
		t.Cleanup(func() { storagetest.AssertNoTempFiles(t, dir) })
		return s
	})
}

// Without fsync (storage.WithLocalFsync(false), the worker's local_fsync off) the local store
// keeps every other guarantee: the same suite passes.
func TestFileSuiteWithoutFsync(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		dir := filepath.Join(t.TempDir(), "root")
		s, err := storage.Open(context.Background(), "file://"+filepath.ToSlash(dir), storage.WithLocalFsync(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if storage.LocalFsync(s) {
			t.Fatal("WithLocalFsync(false) did not take")
		}
		t.Cleanup(func() { storagetest.AssertNoTempFiles(t, dir) })
		return s
	})
}

// The fsync mode is the Open's, not the process's: a store opened without the option fsyncs
// while another is open without, and a Sub writes as its root does.
func TestLocalFsyncIsPerStore(t *testing.T) {
	ctx := context.Background()
	durable := openT(t, t.TempDir())
	fast, err := storage.Open(ctx, t.TempDir(), storage.WithLocalFsync(false))
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	explicit, err := storage.Open(ctx, t.TempDir(), storage.WithLocalFsync(true))
	if err != nil {
		t.Fatal(err)
	}
	defer explicit.Close()
	if !storage.LocalFsync(durable) || !storage.LocalFsync(explicit) || storage.LocalFsync(fast) {
		t.Fatalf("default %v, on %v, off %v", storage.LocalFsync(durable), storage.LocalFsync(explicit), storage.LocalFsync(fast))
	}
	if storage.LocalFsync(fast.Sub("t")) || !storage.LocalFsync(durable.Sub("t")) {
		t.Fatal("a Sub does not write as its root")
	}
}

func TestRelativePathSuite(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		t.Chdir(t.TempDir())
		s := openT(t, filepath.Join("rel", "root"))
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		abs := filepath.Join(wd, "rel", "root")
		if want := "file://" + filepath.ToSlash(abs); s.URI() != want {
			t.Fatalf("URI() = %q, want %q", s.URI(), want)
		}
		t.Cleanup(func() { storagetest.AssertNoTempFiles(t, abs) })
		return s
	})
}

var memSeq atomic.Int64

func TestMemSuite(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return openT(t, fmt.Sprintf("mem://suite-%d", memSeq.Add(1)))
	})
}

func TestMemSuiteUnderPrefix(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return openT(t, fmt.Sprintf("mem://shared/tables/t%d", memSeq.Add(1)))
	})
}

func TestMemIsSharedPerName(t *testing.T) {
	a := openT(t, "mem://shared-name")
	b := openT(t, "mem://shared-name")
	c := openT(t, "mem://other-name")
	ctx := t.Context()
	if err := a.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("second Open of the same mem URI: %q, %v", got, err)
	}
	if _, err := c.Get(ctx, "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a different mem name shares data: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("closing one mem handle broke another: %q, %v", got, err)
	}
	if err := b.PutIfAbsent(ctx, "k", nil); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("PutIfAbsent across mem handles: %v", err)
	}
}

func TestOpenURIs(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	for _, c := range []struct{ in, uri string }{
		{dir, "file://" + filepath.ToSlash(dir)},
		{dir + "/", "file://" + filepath.ToSlash(dir)},
		{"file://" + filepath.ToSlash(dir), "file://" + filepath.ToSlash(dir)},
		{"file://localhost" + filepath.ToSlash(dir) + "/sub", "file://" + filepath.ToSlash(dir) + "/sub"},
		{"mem://uris", "mem://uris"},
		{"mem://uris/a/b/", "mem://uris/a/b"},
	} {
		s, err := storage.Open(ctx, c.in)
		if err != nil {
			t.Fatalf("Open(%q): %v", c.in, err)
		}
		if s.URI() != c.uri {
			t.Errorf("Open(%q).URI() = %q, want %q", c.in, s.URI(), c.uri)
		}
		s.Close()
	}
	for _, bad := range []string{
		"", "file://relative/path", "file://host/abs", "ftp://x/y", "mem://", "mem://x?y=1",
		"mem://x/../y", "s3:///prefix", "s3://b/p?prefix=x", "file://" + filepath.ToSlash(dir) + "?metadata=skip",
	} {
		if s, err := storage.Open(ctx, bad); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", bad)
		}
	}
	// A root that is a file, not a directory, is refused.
	f := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(f, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if s, err := storage.Open(ctx, f); err == nil {
		s.Close()
		t.Errorf("Open(file) succeeded")
	}
}

func TestOpErrorMessage(t *testing.T) {
	s := openT(t, "mem://errors")
	_, err := s.Get(t.Context(), "a/b")
	if err == nil || !strings.HasPrefix(err.Error(), `storage get "a/b": not found`) {
		t.Fatalf("error message %q", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), -1)
	defer cancel()
	_, err = s.Get(ctx, "a/b")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired deadline: %v", err)
	}
}
