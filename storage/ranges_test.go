package storage_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Ranges answers every read exactly as GetRange does, on a local root (through one open
// file), in memory and through a sub-store: the bytes, a read past the end or at a negative
// offset (ErrOutOfRange), an empty read at the end and past it, a missing object (ErrNotFound),
// an invalid key, and the storage.get_range failpoint.
func TestRangesReadAsGetRangeDoes(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	ctx := t.Context()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	for _, uri := range []string{t.TempDir(), "mem://ranges-as-getrange"} {
		root := openT(t, uri)
		for _, st := range []storage.Store{root, root.Sub("sub")} {
			if err := st.Put(ctx, "obj", data); err != nil {
				t.Fatal(err)
			}
			reads := []struct{ off, n int64 }{{0, 16}, {5, 100}, {15990, 10}, {15999, 1}, {16000, 0}, {0, 16000},
				{15990, 11}, {16001, 0}, {20000, 5}, {-1, 4}, {3, -1}}
			for _, key := range []string{"obj", "missing", "a/./b"} {
				r := storage.OpenRanges(st, key)
				for _, rd := range reads {
					got, gotErr := r.GetRange(ctx, rd.off, rd.n)
					want, wantErr := st.GetRange(ctx, key, rd.off, rd.n)
					if !bytes.Equal(got, want) || (gotErr == nil) != (wantErr == nil) ||
						!errors.Is(gotErr, storage.ErrOutOfRange) && errors.Is(wantErr, storage.ErrOutOfRange) ||
						!errors.Is(gotErr, storage.ErrNotFound) && errors.Is(wantErr, storage.ErrNotFound) ||
						!errors.Is(gotErr, storage.ErrInvalidKey) && errors.Is(wantErr, storage.ErrInvalidKey) {
						t.Fatalf("%s %s: read %d+%d: %d bytes, %v; GetRange %d bytes, %v", uri, key, rd.off, rd.n, len(got), gotErr, len(want), wantErr)
					}
				}
				if err := failpoint.Enable("storage.get_range", "error"); err != nil {
					t.Fatal(err)
				}
				_, err := r.GetRange(ctx, 0, 4)
				failpoint.Reset()
				if !failpoint.IsInjected(err) {
					t.Fatalf("%s %s: read under the failpoint: %v", uri, key, err)
				}
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// On a local root the reads share one open file: once the first read opened it, the object's
// removal does not stop the next reads; after Close a read opens the object again (and finds
// it gone), as GetRange would.
func TestRangesOpenALocalObjectOnce(t *testing.T) {
	ctx := t.Context()
	st := openT(t, t.TempDir())
	if err := st.Put(ctx, "obj", []byte("hello, ranges")); err != nil {
		t.Fatal(err)
	}
	r := storage.OpenRanges(st, "obj")
	if b, err := r.GetRange(ctx, 0, 5); err != nil || string(b) != "hello" {
		t.Fatalf("first read: %q, %v", b, err)
	}
	if err := st.Delete(ctx, "obj"); err != nil {
		t.Fatal(err)
	}
	if b, err := r.GetRange(ctx, 7, 6); err != nil || string(b) != "ranges" {
		t.Fatalf("read through the open file after the removal: %q, %v", b, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetRange(ctx, 0, 5); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("read after Close: %v, want ErrNotFound", err)
	}
}
